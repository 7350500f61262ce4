// Scheduler on tiny pools (8-16 blocks of 4 tokens), like vLLM's tests/v1/core: token budget,
// decode-first order, chunked prefill, FCFS/priority, preemption of the newest sequence, and
// prefix-cache admission. The "model" here just marks scheduled tokens computed.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

namespace loom {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void make(int32_t num_blocks, int32_t budget, int32_t max_seqs = 16, bool caching = true,
            int32_t shared_prefill = 0, int32_t prompt_logits = 0, int32_t draft_min = 0) {
    kv_ = std::make_unique<KvCoordinator>(num_blocks, 4, caching);
    sched_ = std::make_unique<Scheduler>(
        SchedulerConfig{max_seqs, budget, shared_prefill, prompt_logits, draft_min}, *kv_);
  }
  Request* add(int32_t prompt_len, uint32_t seed, int32_t priority = 0) {
    auto r = std::make_unique<Request>();
    r->seq_id = next_id_++;
    r->arrival_order = r->seq_id;
    std::mt19937 rng(seed);
    for (int i = 0; i < prompt_len; ++i) r->tokens.push_back(static_cast<int32_t>(rng() % 1000));
    r->num_prompt_tokens = prompt_len;
    r->priority = priority;
    reqs_.push_back(std::move(r));
    sched_->add_waiting(reqs_.back().get());
    return reqs_.back().get();
  }
  // Plays the model: computed tokens catch up; a sequence that reached its end samples one.
  SchedulerOutput step() {
    SchedulerOutput out = sched_->schedule();
    for (auto& s : out.seqs) {
      s.req->num_computed_tokens += s.num_new;
      if (s.req->num_computed_tokens == s.req->num_tokens()) s.req->tokens.push_back(7);
    }
    EXPECT_EQ(kv_->check_invariants(), "");
    return out;
  }
  int32_t scheduled(const SchedulerOutput& out, const Request* r) {
    for (auto& s : out.seqs)
      if (s.req == r) return s.num_new;
    return 0;
  }

  std::unique_ptr<KvCoordinator> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<Request>> reqs_;
  int64_t next_id_ = 0;
};

TEST_F(SchedulerTest, ChunksPromptsWithinTokenBudget) {
  make(16, 8);
  Request* a = add(10, 1);
  Request* b = add(5, 2);
  auto o1 = step();
  EXPECT_EQ(scheduled(o1, a), 8);
  EXPECT_EQ(scheduled(o1, b), 0);
  EXPECT_EQ(o1.num_tokens, 8);
  auto o2 = step();  // a finishes its prompt (2), b starts (6 left in budget, needs 5)
  EXPECT_EQ(scheduled(o2, a), 2);
  EXPECT_EQ(scheduled(o2, b), 5);
  EXPECT_EQ(a->num_output_tokens(), 1);
  auto o3 = step();  // both decode
  EXPECT_EQ(scheduled(o3, a), 1);
  EXPECT_EQ(scheduled(o3, b), 1);
}

// Prompts whose rows need logits (prompt logprobs) share one bound per step, whoever runs
// them: the step's logits rows stay within it. Others in line wait their turn (FCFS).
TEST_F(SchedulerTest, PromptsNeedingLogitsShareOneBoundPerStep) {
  make(64, 32, 16, true, 0, 10);
  Request* a = add(20, 1);
  Request* b = add(20, 2);
  Request* c = add(5, 3);
  a->prompt_needs_logits = b->prompt_needs_logits = true;
  auto o1 = step();
  EXPECT_EQ(scheduled(o1, a), 10);
  EXPECT_EQ(scheduled(o1, b), 0);
  EXPECT_EQ(scheduled(o1, c), 0);
  auto o2 = step();  // a's second chunk takes the bound again
  EXPECT_EQ(scheduled(o2, a), 10);
  EXPECT_EQ(scheduled(o2, b), 0);
  auto o3 = step();  // a decodes (not a prompt row), b's first chunk, then c whole
  EXPECT_EQ(scheduled(o3, a), 1);
  EXPECT_EQ(scheduled(o3, b), 10);
  EXPECT_EQ(scheduled(o3, c), 5);
  auto o4 = step();
  EXPECT_EQ(scheduled(o4, b), 10);
  EXPECT_EQ(scheduled(o4, c), 1);
}

TEST_F(SchedulerTest, DecodeTokenIsNotStarvedByEarlierPartialPrompt) {
  make(64, 4);
  Request* b = add(30, 2);
  step();  // b: 4 of 30; running = [b]
  // a joins the running set behind b with one token left to compute (a decode).
  auto a = std::make_unique<Request>();
  a->seq_id = 99;
  a->tokens = {1, 2, 3, 4, 5};
  a->num_prompt_tokens = 4;
  ASSERT_TRUE(kv_->allocate_slots(a->seq_id, a->tokens, 0, 4, 0));
  a->num_computed_tokens = 4;
  sched_->add_running(a.get());
  auto o = step();
  EXPECT_EQ(scheduled(o, a.get()), 1);  // first, although b comes earlier in running order
  EXPECT_EQ(scheduled(o, b), 3);
  sched_->remove(a.get());
}

// A decoding sequence's proposals run after its token, within the token budget: cut to what
// the budget leaves, and not verified at all when that is below draft_min (--draft-min).
TEST_F(SchedulerTest, DraftsAreCutToTheBudgetButNotBelowDraftMin) {
  for (const int32_t draft_min : {0, 4}) {
    reqs_.clear();
    make(64, 3, 16, true, 0, 0, draft_min);
    Request* r = add(3, 5);
    step();  // the prompt; the request samples a token and decodes next
    r->draft = {11, 12, 13, 14};
    auto o = step();
    ASSERT_EQ(o.seqs.size(), 1u);
    EXPECT_EQ(o.seqs[0].num_new, 1);
    // The budget of 3 leaves room for 2 proposals after the decoded token.
    EXPECT_EQ(o.seqs[0].num_draft, draft_min == 0 ? 2 : 0) << "draft_min " << draft_min;
    EXPECT_EQ(r->draft.size(), draft_min == 0 ? 2u : 0u);
  }
}

TEST_F(SchedulerTest, RespectsMaxNumSeqs) {
  make(64, 100, /*max_seqs=*/2);
  add(4, 1);
  add(4, 2);
  Request* c = add(4, 3);
  auto o = step();
  EXPECT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(scheduled(o, c), 0);
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerTest, PriorityOrdersWaitingThenFcfs) {
  make(64, 4, /*max_seqs=*/1);
  Request* a = add(4, 1, /*priority=*/1);
  Request* b = add(4, 2, /*priority=*/0);
  Request* c = add(4, 3, /*priority=*/0);
  EXPECT_EQ(sched_->waiting()[0], b);
  EXPECT_EQ(sched_->waiting()[1], c);
  EXPECT_EQ(sched_->waiting()[2], a);
}

TEST_F(SchedulerTest, PreemptsNewestAndRequeuesAtHead) {
  // 8 blocks of 4 = 32 token slots. Two sequences of 12-token prompts (3 blocks each) grow by
  // decoding until the pool runs out: the newer one is preempted.
  make(8, 64);
  Request* a = add(12, 1);
  Request* b = add(12, 2);
  step();
  EXPECT_EQ(kv_->group(0).num_free_blocks(), 2);
  bool preempted = false;
  for (int i = 0; i < 10 && !preempted; ++i) {
    auto o = step();
    if (!o.preempted.empty()) {
      preempted = true;
      EXPECT_EQ(o.preempted[0], b);
      EXPECT_EQ(b->status, RequestStatus::kPreempted);
      EXPECT_EQ(b->num_computed_tokens, 0);
      EXPECT_EQ(sched_->waiting().front(), b);
      EXPECT_EQ(scheduled(o, a), 1);
      EXPECT_EQ(scheduled(o, b), 0);
      EXPECT_FALSE(kv_->has_blocks(b->seq_id));
    }
  }
  EXPECT_TRUE(preempted);
  // The preempted sequence later resumes with all its tokens (prompt + output) recomputed.
  sched_->remove(a);
  // Blocks it had filled may still be in the prefix cache; the rest is recomputed.
  const int32_t b_tokens = b->num_tokens();
  const int64_t hits_before = kv_->prefix_hit_tokens();
  auto o = step();
  const int64_t hit = kv_->prefix_hit_tokens() - hits_before;
  EXPECT_EQ(hit % 4, 0);
  EXPECT_GE(hit, 4);  // at least its first prompt block survived (a needed few blocks)
  EXPECT_EQ(scheduled(o, b), b_tokens - hit);
  sched_->remove(b);
  EXPECT_EQ(kv_->group(0).num_free_blocks(), 8);
}

TEST_F(SchedulerTest, PreemptsItselfWhenNewest) {
  make(4, 64);
  Request* a = add(8, 1);  // 2 blocks
  Request* b = add(7, 2);  // 2 blocks
  step();
  EXPECT_EQ(kv_->group(0).num_free_blocks(), 0);
  // a needs a third block at its 9th token: b (newest) is preempted, a continues.
  auto o = step();
  EXPECT_EQ(o.preempted.size(), 1u);
  EXPECT_EQ(o.preempted[0], b);
  EXPECT_EQ(scheduled(o, a), 1);
  EXPECT_EQ(scheduled(o, b), 0);
  // Only a runs now; b waits until a is removed.
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(b->status, RequestStatus::kPreempted);
  sched_->remove(a);
  step();
  EXPECT_EQ(b->status, RequestStatus::kRunning);
}

TEST_F(SchedulerTest, PrefixHitSkipsCachedTokens) {
  make(16, 64);
  Request* a = add(13, 1);
  step();
  sched_->remove(a);
  auto r = std::make_unique<Request>();
  r->seq_id = 100;
  r->tokens.assign(a->tokens.begin(), a->tokens.begin() + 13);
  r->tokens.push_back(5);
  r->tokens.push_back(6);
  r->num_prompt_tokens = 15;
  sched_->add_waiting(r.get());
  auto o = step();
  EXPECT_EQ(r->num_cached_tokens, 12);
  EXPECT_EQ(scheduled(o, r.get()), 3);
  EXPECT_EQ(kv_->prefix_hit_tokens(), 12);
  EXPECT_EQ(kv_->prefix_query_tokens(), 13 + 15);
  sched_->remove(r.get());
}

TEST_F(SchedulerTest, WaitingHeadBlocksQueueWhenNoRoom) {
  make(4, 64);
  Request* a = add(12, 1);  // 3 blocks
  Request* b = add(8, 2);   // 2 blocks: does not fit
  Request* c = add(2, 3);   // 1 block: would fit, but FCFS keeps it behind b
  auto o = step();
  EXPECT_EQ(scheduled(o, a), 12);
  EXPECT_EQ(scheduled(o, b), 0);
  EXPECT_EQ(scheduled(o, c), 0);
}

// A burst of prompts while others share the engine: prompt tokens get their own smaller budget
// per step (FCFS, the head's chunk first), decodes are not counted against it.
TEST_F(SchedulerTest, SharedPrefillBudgetSpreadsABurstOverSteps) {
  make(64, 100, 16, true, /*shared_prefill=*/8);
  Request* a = add(5, 1);
  Request* b = add(5, 2);
  Request* c = add(5, 3);
  Request* d = add(5, 4);
  auto o1 = step();
  EXPECT_EQ(scheduled(o1, a), 5);
  EXPECT_EQ(scheduled(o1, b), 3);  // a partial chunk fills the prompt budget
  EXPECT_EQ(scheduled(o1, c), 0);
  EXPECT_EQ(o1.num_tokens, 8);
  auto o2 = step();
  EXPECT_EQ(scheduled(o2, a), 1);  // a decodes, outside the prompt budget
  EXPECT_EQ(scheduled(o2, b), 2);  // b's rest first (running), then the queue in order
  EXPECT_EQ(scheduled(o2, c), 5);
  EXPECT_EQ(scheduled(o2, d), 1);
  EXPECT_EQ(o2.num_tokens, 9);
  auto o3 = step();
  EXPECT_EQ(scheduled(o3, a), 1);
  EXPECT_EQ(scheduled(o3, b), 1);
  EXPECT_EQ(scheduled(o3, c), 1);
  EXPECT_EQ(scheduled(o3, d), 4);
  EXPECT_EQ(a->num_output_tokens(), 3);
  EXPECT_EQ(d->num_output_tokens(), 1);
}

TEST_F(SchedulerTest, LoneSequenceTakesTheWholeBudget) {
  make(64, 100, 16, true, /*shared_prefill=*/8);
  Request* a = add(40, 1);
  auto o1 = step();
  EXPECT_EQ(scheduled(o1, a), 40);  // nobody to share with: no smaller chunks
  Request* b = add(30, 2);
  auto o2 = step();  // now shared: a decodes, b's prompt comes in chunks of 8
  EXPECT_EQ(scheduled(o2, a), 1);
  EXPECT_EQ(scheduled(o2, b), 8);
  auto o3 = step();
  EXPECT_EQ(scheduled(o3, b), 8);
}

TEST_F(SchedulerTest, ManyDecodesAndTheSharedPrefillBudget) {
  // 12 sequences decoding and a new prompt: every decode runs, plus 4 prompt tokens, within
  // a token budget of 16 the decodes alone nearly fill.
  make(64, 16, 16, true, /*shared_prefill=*/6);
  std::vector<Request*> decoding;
  for (int i = 0; i < 12; ++i) decoding.push_back(add(2, 10 + i));
  step();
  step();
  step();  // the 12 prompts of 2 tokens: 3 per step
  step();
  for (Request* r : decoding) ASSERT_GE(r->num_output_tokens(), 1);
  Request* p = add(20, 99);
  auto o = step();
  for (Request* r : decoding) EXPECT_EQ(scheduled(o, r), 1);
  EXPECT_EQ(scheduled(o, p), 4);  // what the budget of 16 leaves
  auto o2 = step();
  EXPECT_EQ(scheduled(o2, p), 4);
}

}  // namespace
}  // namespace loom
