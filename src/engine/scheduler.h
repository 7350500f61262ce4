// Scheduler: decides, each step, which sequences run and how many tokens each computes.
// Running sequences first (those needing one token, i.e. decodes, before partial prompts),
// then waiting ones in FCFS order (lower priority value first), all within a token budget.
// While sequences share the engine, prompt tokens get a smaller budget of their own
// (shared_prefill_tokens), so that a step stays short: a burst of new prompts is prefilled
// over a few steps, first come first done, beside the decodes of those already generating.
// When the KV pool has no room, the most recently admitted running sequence is preempted:
// its blocks are freed and it goes back to the head of the waiting queue to be recomputed.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/request.h"
#include "kv/kv_coordinator.h"

namespace loom {

// The engine's SchedulerConfig::prompt_logits_tokens: prompt logprobs' rows per step.
inline constexpr int32_t kPromptLogprobsTokensPerStep = 256;

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  // Prompt tokens (chunks of running prompts and admissions) per step while more than one
  // sequence is running or waiting; 0 = only the token budget limits them.
  int32_t shared_prefill_tokens = 0;
  // Prompt tokens of the requests whose prompt rows need logits (Request::prompt_needs_logits:
  // prompt logprobs), all of them together, per step; 0 = no bound of their own. A step's
  // logits rows (a vocabulary each) stay within this many plus the sampled rows, what the
  // memory plan counts.
  int32_t prompt_logits_tokens = 0;
  // Speculative verifies: a draft the token budget would cut below this many proposals is not
  // verified (the sequence decodes one token); llama-server's --draft-min.
  int32_t draft_min = 0;
};

struct ScheduledSeq {
  Request* req;
  int32_t num_new;  // tokens [num_computed_tokens, num_computed_tokens + num_new) run this step
  // Of req->draft, how many run after those num_new tokens (speculative verify: the step
  // computes num_new + num_draft positions and gives logits for the last num_draft + 1).
  int32_t num_draft = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  std::vector<Request*> preempted;  // preempted during this schedule() call
  int32_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCoordinator& kv) : config_(config), kv_(kv) {}

  void add_waiting(Request* r);
  // A sequence that already holds KV blocks (an n > 1 fork) joins the running set directly.
  void add_running(Request* r);
  SchedulerOutput schedule();
  // Removes a sequence from whichever queue holds it and frees its blocks (unless the caller
  // frees them later itself).
  void remove(Request* r, bool free_blocks = true);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  bool empty() const { return running_.empty() && waiting_.empty(); }
  const std::vector<Request*>& running() const { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }

 private:
  bool allocate(Request* r, int32_t num_new, SchedulerOutput& out, int32_t& budget);
  // Room for r's one decode token and its draft, without preempting anyone: a proposal is
  // only worth running when it is free to. Drops the draft (returns 0) when there is none.
  int32_t allocate_draft(Request* r, int32_t budget);
  void preempt(Request* victim, SchedulerOutput& out, int32_t& budget);
  Request* pick_victim() const;
  void insert_waiting(Request* r, bool at_head_of_class);

  SchedulerConfig config_;
  KvCoordinator& kv_;
  std::vector<Request*> running_;  // in admission order
  std::deque<Request*> waiting_;   // sorted by priority, FCFS within one priority
  uint64_t next_admit_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace loom
