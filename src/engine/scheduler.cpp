#include "engine/scheduler.h"

#include <algorithm>
#include <limits>

namespace loom {

void Scheduler::insert_waiting(Request* r, bool at_head_of_class) {
  // New arrivals go after every sequence of equal or more urgent priority (FCFS); preempted
  // ones go before their equals, so they resume first.
  auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const Request* w) {
    return at_head_of_class ? w->priority >= r->priority : w->priority > r->priority;
  });
  waiting_.insert(it, r);
}

void Scheduler::add_waiting(Request* r) {
  r->status = RequestStatus::kWaiting;
  insert_waiting(r, /*at_head_of_class=*/false);
}

void Scheduler::add_running(Request* r) {
  r->status = RequestStatus::kRunning;
  r->admit_order = next_admit_++;
  running_.push_back(r);
}

void Scheduler::remove(Request* r, bool free_blocks) {
  if (auto it = std::find(running_.begin(), running_.end(), r); it != running_.end())
    running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), r); it != waiting_.end())
    waiting_.erase(it);
  if (free_blocks) kv_.free(r->seq_id);
}

Request* Scheduler::pick_victim() const {
  // Least urgent priority first, then the most recently admitted.
  Request* victim = nullptr;
  for (Request* r : running_)
    if (!victim || r->priority > victim->priority ||
        (r->priority == victim->priority && r->admit_order > victim->admit_order))
      victim = r;
  return victim;
}

void Scheduler::preempt(Request* victim, SchedulerOutput& out, int32_t& budget) {
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  auto it = std::find_if(out.seqs.begin(), out.seqs.end(),
                         [&](const ScheduledSeq& s) { return s.req == victim; });
  if (it != out.seqs.end()) {  // already scheduled this step: give its tokens back
    budget += it->num_new + it->num_draft;
    out.num_tokens -= it->num_new + it->num_draft;
    out.seqs.erase(it);
  }
  victim->draft.clear();
  kv_.free(victim->seq_id);
  victim->num_computed_tokens = 0;
  // The blocks it gets back hold some other sequence's draft K/V, or none.
  victim->draft_computed = 0;
  victim->status = RequestStatus::kPreempted;
  insert_waiting(victim, /*at_head_of_class=*/true);
  out.preempted.push_back(victim);
  ++num_preemptions_;
}

bool Scheduler::allocate(Request* r, int32_t num_new, SchedulerOutput& out, int32_t& budget) {
  while (
      !kv_.allocate_slots(r->seq_id, r->tokens, r->num_computed_tokens, num_new, r->cache_salt)) {
    Request* victim = pick_victim();
    preempt(victim, out, budget);
    if (victim == r) return false;
  }
  return true;
}

int32_t Scheduler::allocate_draft(Request* r, int32_t budget) {
  const int32_t k = std::min(static_cast<int32_t>(r->draft.size()), budget - 1);
  if (k > 0 && k >= config_.draft_min &&
      kv_.allocate_slots(r->seq_id, r->tokens, r->num_computed_tokens, 1, r->cache_salt, nullptr,
                         k))
    return k;
  r->draft.clear();
  return 0;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_num_batched_tokens;
  // Prompt tokens (anything but a one-token decode) of this step. A lone sequence takes the
  // whole budget: chunking it would only re-read the weights more often.
  const bool shared = running_.size() + waiting_.size() > 1;
  int32_t prefill_budget =
      shared && config_.shared_prefill_tokens > 0 ? config_.shared_prefill_tokens : budget;
  // What the requests whose prompt rows need logits may still compute of their prompts.
  int32_t logits_budget = config_.prompt_logits_tokens > 0 ? config_.prompt_logits_tokens
                                                           : std::numeric_limits<int32_t>::max();
  const auto chunk_bound = [&](const Request& r) {
    return r.prompt_needs_logits ? logits_budget : std::numeric_limits<int32_t>::max();
  };
  auto add = [&](Request* r, int32_t n) {
    out.seqs.push_back({r, n});
    out.num_tokens += n;
    budget -= n;
    r->ever_scheduled = true;
  };

  // Running sequences: decodes (one token to catch up) before partial prompts, so a long
  // prompt never stalls the tokens of sequences already generating.
  std::vector<Request*> order;
  for (Request* r : running_)
    if (r->num_tokens() - r->num_computed_tokens == 1) order.push_back(r);
  for (Request* r : running_)
    if (r->num_tokens() - r->num_computed_tokens != 1) order.push_back(r);
  for (Request* r : order) {
    if (budget <= 0) break;
    if (r->status != RequestStatus::kRunning) continue;  // preempted earlier in this loop
    const int32_t remaining = r->num_tokens() - r->num_computed_tokens;
    const int32_t num_new = remaining == 1
                                ? std::min(1, budget)
                                : std::min({remaining, budget, prefill_budget, chunk_bound(*r)});
    if (num_new <= 0) continue;
    if (num_new == 1 && !r->draft.empty())
      if (const int32_t k = allocate_draft(r, budget); k > 0) {
        r->draft.resize(k);
        add(r, 1);
        out.seqs.back().num_draft = k;
        out.num_tokens += k;
        budget -= k;
        continue;
      }
    r->draft.clear();
    if (allocate(r, num_new, out, budget)) {
      add(r, num_new);
      if (remaining != 1) prefill_budget -= num_new;
      if (remaining != 1 && r->prompt_needs_logits) logits_budget -= num_new;
    }
  }

  // Waiting sequences, only when nothing had to be preempted (there is no room to spare).
  if (!out.preempted.empty()) return out;
  while (!waiting_.empty() && budget > 0 && prefill_budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* r = waiting_.front();
    CachedPrefix prefix;
    const bool fresh = !kv_.has_blocks(r->seq_id);
    int32_t computed = r->num_computed_tokens;
    if (fresh && !r->skip_prefix_cache) {
      prefix = kv_.find_cached_prefix(r->tokens, r->cache_salt);
      computed = prefix.num_tokens;
    }
    const int32_t num_new =
        std::min({r->num_tokens() - computed, budget, prefill_budget, chunk_bound(*r)});
    if (num_new <= 0) break;  // FCFS: nobody overtakes the head of the queue
    if (!kv_.allocate_slots(r->seq_id, r->tokens, computed, num_new, r->cache_salt,
                            fresh && !r->skip_prefix_cache ? &prefix : nullptr))
      break;  // FCFS: nobody overtakes the head of the queue
    if (fresh && !r->skip_prefix_cache) kv_.record_prefix_query(r->num_tokens(), prefix.num_tokens);
    if (!r->ever_scheduled) r->num_cached_tokens = prefix.num_tokens;
    r->num_computed_tokens = computed;
    waiting_.pop_front();
    add_running(r);
    add(r, num_new);
    prefill_budget -= num_new;
    if (r->prompt_needs_logits) logits_budget -= num_new;
  }
  return out;
}

}  // namespace loom
