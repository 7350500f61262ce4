// EngineCore's speculative decoding around a step: which sequences propose (the per-request
// and batch-size back-off), the proposers' fill and observe calls, the hybrid models' state
// snapshots inside a verify, and the metrics' judging of proposals after a stop. Acceptance
// itself is sample_rows' (engine_core.cpp), the same for every proposer.
#include <algorithm>

#include "engine/engine_core.h"

namespace loom {

int32_t EngineCore::decoding_running() const {
  int32_t decoding = 0;
  for (const Request* r : scheduler_->running())
    decoding += r->num_tokens() - r->num_computed_tokens == 1;
  return decoding;
}

bool EngineCore::too_many_decoding_to_propose() const {
  const int32_t bound = config_.speculative.disable_by_batch_size;
  return bound > 0 && decoding_running() >= bound;
}

bool EngineCore::first_proposal_waits(Request& r, int32_t decoding) {
  if (config_.speculative.always_propose || r.spec_kept_avg >= 0 || r.spec_backoff_next != 1 ||
      spec_accepted_share_ < 0 ||
      spec_accepted_share_ >= step_cost_.row_share(std::max(decoding, 1)))
    return false;
  r.spec_backoff = r.spec_backoff_next = kMaxSpecBackoff;
  return true;
}

void EngineCore::propose_drafts() {
  const SpeculativeConfig& sc = config_.speculative;
  if (!sc.enabled()) return;
  const std::vector<Request*>& running = scheduler_->running();
  const bool off = too_many_decoding_to_propose();
  const int32_t decoding = decoding_running();
  for (Request* r : running) {
    r->draft.clear();
    if (off || r->num_tokens() - r->num_computed_tokens != 1 || r->num_output_tokens() == 0)
      continue;
    if (r->spec_backoff > 0 || first_proposal_waits(*r, decoding)) {
      --r->spec_backoff;
      continue;
    }
    // Every proposal kept must still leave room for the token sampled after them.
    const SamplingParams& p = r->group->params;
    int32_t k = std::min({sc.num_speculative_tokens, p.max_tokens - r->num_output_tokens() - 1,
                          config_.max_model_len - r->num_tokens()});
    // A draft runs the known tokens, then k - 1 proposals after them: positions up to
    // num_tokens + k - 2, which must stay inside its context.
    if (draft_context_ > 0) k = std::min(k, draft_context_ - r->num_tokens() + 1);
    if (k <= 0 || k < sc.draft_min) continue;
    // A hidden-state proposer proposes for a sequence its last step observed.
    if (proposer_->needs_hidden() && r->hidden_proposal.at_tokens != r->num_tokens()) continue;
    if (!proposer_->reserve(r->seq_id)) continue;
    proposer_->plan(r->tokens, k, r->draft);
  }
}

bool EngineCore::samples_its_proposals(const Request& r) const {
  // A seeded request's proposals stay point masses: its tokens are then plain decoding's
  // whatever was proposed (spec/rejection.h), and so reproducible for its seed.
  const SamplingParams& params = r.group->params;
  return proposer_->samples() && !params.is_greedy() &&
         (!params.seed.has_value() || rule_for_seeded_);
}

Status EngineCore::fill_drafts(const SchedulerOutput& so) {
  if (!proposer_) return Status::ok();
  // The sampling drafts' distributions of this step, a vocabulary per proposal, in one buffer
  // whose size the memory plan counts (sized first: pointers into it follow).
  const size_t n_vocab = static_cast<size_t>(model_->config().n_vocab);
  size_t q_rows = 0;
  for (const ScheduledSeq& s : so.seqs)
    if (s.num_draft > 0 && samples_its_proposals(*s.req)) q_rows += s.req->draft.size();
  if (step_draft_probs_.size() < q_rows * n_vocab) step_draft_probs_.resize(q_rows * n_vocab);
  float* q_next = step_draft_probs_.data();
  draft_seqs_.clear();
  for (const ScheduledSeq& s : so.seqs) {
    if (s.num_draft == 0) continue;
    Request& r = *s.req;
    const std::vector<int32_t>& table = kv_manager_->block_table(r.seq_id);
    draft_seqs_.push_back({r.tokens, table.data(), static_cast<int32_t>(table.size()), r.seq_id,
                           &r.draft_computed, &r.draft, &r.hidden_proposal});
    r.draft_probs = {};
    if (samples_its_proposals(r)) {
      draft_seqs_.back().sampling = &r.group->params;
      draft_seqs_.back().rng = &r.rng;
      draft_seqs_.back().draft_probs = q_next;
      r.draft_probs = {q_next, r.draft.size() * n_vocab};
      q_next += r.draft.size() * n_vocab;
    }
  }
  return proposer_->fill(draft_seqs_);
}

void EngineCore::shorten_cut_drafts(SchedulerOutput& so) {
  const size_t n_vocab = static_cast<size_t>(model_->config().n_vocab);
  for (ScheduledSeq& s : so.seqs) {
    Request& r = *s.req;
    int32_t k = static_cast<int32_t>(r.draft.size());
    if (s.num_draft == 0 || k >= s.num_draft) continue;
    if (k < config_.speculative.draft_min) k = 0;
    r.draft.resize(k);
    if (!r.draft_probs.empty()) r.draft_probs = r.draft_probs.first(k * n_vocab);
    so.num_tokens -= s.num_draft - k;
    s.num_draft = k;
    kv_manager_->truncate(r.seq_id, r.num_computed_tokens + s.num_new + k);
  }
}

void EngineCore::settle_draft_snapshots(const SchedulerOutput& so) {
  // snapshots_[k] is batch_.state_snapshots[k]'s (build_batch): a sequence's are in order.
  auto seq_of = [&](size_t k) { return batch_.state_snapshots[k].seq; };
  auto kept = [&](size_t k) {
    const Request& r = *so.seqs[seq_of(k)].req;
    return !r.finished() && snapshots_[k].n_tokens <= r.num_computed_tokens;
  };
  for (size_t k = 0; k < snapshots_.size(); ++k) {
    if (!snapshots_[k].provisional) continue;
    const bool next_kept = k + 1 < snapshots_.size() && snapshots_[k + 1].provisional &&
                           seq_of(k + 1) == seq_of(k) && kept(k + 1);
    kv_manager_->settle_snapshot(so.seqs[seq_of(k)].req->seq_id, snapshots_[k], kept(k),
                                 kept(k) && !next_kept);
  }
}

Status EngineCore::observe_rows(const SchedulerOutput& so) {
  const int64_t E = model_->config().n_embd;
  observed_.clear();
  // The next step's propose_drafts sees the running set this step leaves (new requests wait).
  const bool batch_off = too_many_decoding_to_propose();
  // batch_.sequences[i] is so.seqs[i]'s (build_batch).
  for (size_t i = 0; i < so.seqs.size(); ++i) {
    Request& r = *so.seqs[i].req;
    // One that finished in this step, aborted too, still holds its blocks (defer_frees_), which
    // entered the prefix cache when they were allocated: the module's K/V goes in them too.
    // Pooling requests never propose, and finish (blocks freed) before frees are deferred.
    if (r.group->pooling) continue;
    const BatchSequence& bs = batch_.sequences[i];
    // Rows kept (a verify's rejected ones were rolled back) whose next token is known.
    const int32_t n_rows = std::min(r.num_computed_tokens, r.num_tokens() - 1) - bs.n_past;
    if (n_rows <= 0) continue;
    const std::vector<int32_t>& table = kv_manager_->block_table(r.seq_id);
    // A proposal (the module's LM head, most of its cost) only for a sequence that decodes
    // next and is not pausing its proposals, in a batch small enough to speculate
    // (propose_drafts skips it otherwise anyway).
    const bool proposes_next = !batch_off && !r.finished() &&
                               r.num_computed_tokens == r.num_tokens() - 1 && r.spec_backoff == 0 &&
                               !first_proposal_waits(r, decoding_in_step_);
    observed_.push_back({r.tokens, table.data(), static_cast<int32_t>(table.size()), bs.n_past,
                         n_rows, &residual_[static_cast<size_t>(bs.row_begin) * E],
                         proposes_next ? &r.hidden_proposal : nullptr});
    if (proposes_next && samples_its_proposals(r)) {
      observed_.back().sampling = &r.group->params;
      observed_.back().rng = &r.rng;
    }
  }
  return proposer_->observe(observed_);
}

int32_t EngineCore::judge_rest(Request& r, size_t entry, int32_t first_row, int32_t num_draft,
                               int32_t kept) {
  // A grammar's matcher ended with the request: its masks for later rows are not known.
  if (r.matcher || r.group->aborted) return kept;
  RequestGroup& g = *r.group;
  const int32_t n_vocab = model_->config().n_vocab;
  for (int32_t j = kept; j < num_draft; ++j) {
    std::span<const float> row(logits_.data() + static_cast<size_t>(first_row + j) * n_vocab,
                               n_vocab);
    SampleOutput sample;
    bool draft_kept = false;
    if (!sample_row(r, row, j, {}, {}, &sample, &draft_kept).is_ok() || !draft_kept) return j;
    // The next row was computed after this token: penalties see it as emitted.
    if (g.params.has_penalties()) r.penalties.add_output(sample.token);
  }
  return num_draft;
}

}  // namespace loom
