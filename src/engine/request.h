// Request: one sequence's state inside the engine. A user request with n > 1 samples becomes n
// sequences (one Request each) that share the prompt's KV blocks; RequestGroup ties them
// together. There are no prefill/decode phases: a sequence has num_tokens() known tokens, of
// which num_computed_tokens have K/V in the cache, and each step lets it catch up.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/engine.h"
#include "sampling/penalty_state.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"
#include "spec/proposer.h"
#include "structured/matcher.h"

namespace loom {

enum class RequestStatus { kWaiting, kRunning, kPreempted, kFinished };

struct RequestGroup;

struct Request {
  int64_t seq_id = 0;  // engine-wide unique (KV manager key)
  RequestGroup* group = nullptr;
  int32_t index = 0;            // sample index within the group
  std::vector<int32_t> tokens;  // prompt then output
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;
  int32_t priority = 0;
  uint64_t cache_salt = 0;
  uint64_t arrival_order = 0;  // FCFS tie-break
  uint64_t admit_order = 0;    // when it last became running (newest is preempted first)
  RequestStatus status = RequestStatus::kWaiting;
  bool ever_scheduled = false;
  int32_t num_cached_tokens = 0;  // prefix-cache hit at first admission
  // Every position must run through the model (mean / CLS pooling needs each hidden state),
  // so the prefix cache is not read for it.
  bool skip_prefix_cache = false;
  // Each of its prompt rows needs the model's logits (prompt logprobs): its prompt chunks come
  // out of the step's SchedulerConfig::prompt_logits_tokens.
  bool prompt_needs_logits = false;

  // Speculative decoding: tokens proposed to follow `tokens`, verified in this step (empty
  // when none). They are not part of `tokens` until accepted.
  std::vector<int32_t> draft;
  // The distributions a sampling draft drew them from (Proposer::samples(): one row of n_vocab
  // per proposal, for the rejection rule), in the engine's buffer for this step; empty for
  // point-mass proposals.
  std::span<const float> draft_probs;
  // Back-off: proposals kept per verify, averaged over the last few (exponentially; the first
  // verify sets it, -1 before); when it falls below what the proposals' rows cost in the step
  // (engine/step_cost.h), the request skips proposals for spec_backoff steps (doubling, up to
  // a bound, while it stays low), so that a sequence whose proposals keep failing costs
  // nothing.
  float spec_kept_avg = -1.0f;
  int32_t spec_backoff = 0;
  int32_t spec_backoff_next = 1;
  // Tokens whose K/V a draft model has written in this sequence's blocks (spec/draft_model.h);
  // back to 0 when a preemption takes the blocks.
  int32_t draft_computed = 0;
  // A hidden-state proposer's (MTP) proposal from the last step (spec/proposer.h).
  spec::HiddenProposal hidden_proposal;

  Rng rng;
  // The rejection rule's draws for a sampling draft's proposals (spec/rejection.h): a stream
  // of its own, so that rng gives each position one draw, as in plain decoding.
  Rng accept_rng;
  PenaltyState penalties;  // only fed when the params have penalties
  // Where the output is in params.grammar (null when unconstrained). Survives preemption:
  // recomputing K/V does not change the accepted tokens.
  std::unique_ptr<structured::GrammarMatcher> matcher;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  bool finished() const { return status == RequestStatus::kFinished; }
};

}  // namespace loom
