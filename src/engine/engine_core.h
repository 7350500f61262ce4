// EngineCore: what Engine (include/loom/engine.h) runs on. Owns the model, the KV storage and
// its block bookkeeping, the scheduler and the sampler; one step() = schedule → build one flat
// Batch → Model::forward → sample the rows that reached their end → process outputs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/mask_worker.h"
#include "engine/output_processor.h"
#include "engine/pooling.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/step_cost.h"
#include "kv/kv_coordinator.h"
#include "loom/engine.h"
#include "loom/tokenizer.h"
#include "model/batch.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "spec/draft_model.h"
#include "spec/proposer.h"
#include "spec/rejection.h"

namespace loom {

// A user request: its n sequences and what the client has been told so far.
struct RequestGroup {
  std::string id;
  SamplingParams params;
  int32_t num_prompt_tokens = 0;
  int32_t priority = 0;
  std::chrono::steady_clock::time_point arrival;
  double queue_time_s = -1.0;  // arrival → first scheduled
  double ttft_s = 0.0;
  bool forked = false;  // n > 1: the other samples exist
  int32_t num_finished = 0;
  std::vector<std::unique_ptr<Request>> seqs;
  std::vector<std::unique_ptr<SeqTextState>> text;  // per sequence index
  std::vector<CompletionOutput> pending;            // per sequence index: unsent delta
  std::vector<bool> dirty;                          // pending has something to send
  bool aborted = false;
  // Pooling requests (GenerateRequest::pooling): the hidden states gathered so far and, once
  // the prompt is through, the result for the final output.
  std::optional<PoolingParams> pooling;
  std::unique_ptr<SeqPooler> pooler;
  std::vector<float> pooled;
  // SamplingParams::prompt_logprobs: what the prompt's rows gave so far (prompt position 1
  // on), sent on the first output once all are in.
  std::vector<PositionLogprobs> prompt_logprobs;
  bool prompt_logprobs_sent = false;
};

class EngineCore {
 public:
  // `model_spec`: where `model` was loaded from, if known; a draft model naming the same file
  // then runs on `model` itself (draft_shares_target).
  static Result<std::unique_ptr<EngineCore>> create(std::unique_ptr<Model> model,
                                                    std::unique_ptr<Tokenizer> tokenizer,
                                                    const EngineConfig& config,
                                                    const std::string& model_spec = "");

  Status add_request(GenerateRequest request);
  Status validate(const GenerateRequest& request) const;
  void abort(const std::string& request_id);
  Result<std::vector<RequestOutput>> step();
  bool has_unfinished() const { return !groups_.empty(); }
  EngineMetrics metrics() const;

  const EngineConfig& config() const { return config_; }
  const Model& model() const { return *model_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  void keep_logits(bool on) { keep_logits_ = on; }
  const std::vector<std::pair<std::string, std::vector<float>>>& last_logits() const {
    return last_logits_;
  }
  const std::vector<std::pair<std::string, std::vector<int32_t>>>& last_drafts() const {
    return last_drafts_;
  }
  std::string check_kv_drained() const;
  // For tests: the step-time model proposals are weighed with (StepCostModel::hold fixes it).
  StepCostModel& step_cost() { return step_cost_; }
  // For tests: the rule a sampling draft's proposals are verified with (a broken one shows
  // that a statistical test of the outputs can fail), applied to seeded requests too, which
  // otherwise verify point masses (a test needs seeds to be deterministic).
  void set_acceptance_rule(spec::AcceptanceRule rule) {
    accept_rule_ = rule;
    rule_for_seeded_ = true;
  }

 private:
  EngineCore() = default;
  // Speculative decoding: proposals for the running sequences about to decode (Request::draft).
  void propose_drafts();
  // disable_by_batch_size (when set): the running set has too many decoding sequences for
  // proposals.
  bool too_many_decoding_to_propose() const;
  int32_t decoding_running() const;  // running sequences whose next step decodes
  // A sequence that has not verified yet, while the recent verifies of all sequences kept
  // less than their rows cost in a step of `decoding` sequences: its first proposal waits
  // the longest back-off (it is then paused; returns true), so that a proposer that is not
  // paying (a draft that disagrees with the target) costs a few tries per sequence, not one
  // at every new sequence's first step.
  bool first_proposal_waits(Request& r, int32_t decoding);
  // Whether r's proposals are drawn from the proposer's distribution and verified with the
  // rejection rule (a sampling request without a seed, a proposer that samples), not as point
  // masses.
  bool samples_its_proposals(const Request& r) const;
  // The proposer's second call (spec/proposer.h), for the verifies scheduled in `so`.
  Status fill_drafts(const SchedulerOutput& so);
  // Drafts the proposer left shorter than their slots (--spec-draft-p-min): the step verifies
  // what is left (nothing below --draft-min), and the lookahead slots past it go back now.
  void shorten_cut_drafts(SchedulerOutput& so);
  // A hidden-state proposer's third call, after sampling: the rows each sequence kept.
  // Keeps the snapshots taken inside a verify's proposals where the proposals were kept
  // (KvCoordinator::plan_draft_snapshots), drops the others.
  void settle_draft_snapshots(const SchedulerOutput& so);
  Status observe_rows(const SchedulerOutput& so);
  // Samples the rows of one sequence's step in order (one row, or a verify's k + 1), keeping
  // each proposed token the sample agrees with; returns how many proposals it kept.
  int32_t sample_rows(Request& r, size_t entry, int32_t first_row, int32_t num_draft);
  // A verify whose request finished on kept proposal `kept` - 1: samples its later rows (the
  // finished request's own RNG; nothing is emitted) and returns how many proposals in all its
  // acceptance keeps, for the metrics.
  int32_t judge_rest(Request& r, size_t entry, int32_t first_row, int32_t num_draft, int32_t kept);
  // Samples `row` for r's next token into *out; at a proposal's row (j < r.draft.size()) also
  // says whether the proposal is kept (*kept): the token sampled is it, for a point mass; the
  // rejection rule with the draft's distribution, for a sampling draft (the token is then the
  // proposal or its replacement).
  Status sample_row(Request& r, std::span<const float> row, int32_t j,
                    std::span<const int32_t> suppressed, std::span<const uint32_t> mask,
                    SampleOutput* out, bool* kept);
  void build_batch(const SchedulerOutput& so);
  // engine_pooling.cpp: a pooling sequence's rows of this step (hidden states it pools, its
  // last row's logits when it scores with them), and after the forward pass, what they gave;
  // the sequences whose prompt is through finish (their groups are appended to `touched`).
  void add_pooling_rows(Request& r, int32_t num_new);
  void append_pooling_logits_rows();
  void collect_pooling(const SchedulerOutput& so, std::vector<RequestGroup*>& touched);
  Status validate_pooling(const GenerateRequest& req) const;
  // engine_prompt_logprobs.cpp: the rows whose logits give prompt tokens' logprobs (after the
  // sampled rows), what they gave, and handing them to the group's output once complete.
  void add_prompt_logprob_rows(Request& r, int32_t first_row, int32_t num_new);
  void append_prompt_logprob_rows();
  void collect_prompt_logprobs();
  void take_prompt_logprobs(RequestGroup& g, RequestOutput& o);
  // Starts filling the grammar masks of the constrained rows of this step (see masks_).
  void start_masks();
  // Appends a sampled token to `r` and decides whether it stops there.
  void accept_token(Request& r, const SampleOutput& s);
  void finish_seq(Request& r, FinishReason reason);
  void fork_samples(Request& parent);
  RequestOutput make_output(RequestGroup& g);

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<KvCoordinator> kv_manager_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<spec::Proposer> proposer_;               // null without speculation
  const spec::DraftModelProposer* draft_model_ = nullptr;  // proposer_, when a draft model
  // A draft model's context when shorter than max_model_len (0 otherwise): its proposals keep
  // the draft's positions below it.
  int32_t draft_context_ = 0;
  // Speculation: the step-time model its proposals are weighed with, and the sequences of
  // the current step that decode (no prompt rows).
  StepCostModel step_cost_;
  int32_t decoding_in_step_ = 0;
  // Share of proposed tokens kept over the recent verifies of all sequences (-1: none yet).
  double spec_accepted_share_ = -1;
  static constexpr int32_t kMaxSpecBackoff = 16;  // steps a sequence's proposals pause at most
  std::vector<spec::DraftSeq> draft_seqs_;
  // A hidden-state proposer (MTP): every row's hidden state before the final norm of this step
  // ([rows][n_embd]) and what observe() gets of it.
  std::vector<float> residual_;
  std::vector<spec::ObservedSeq> observed_;
  // While a hidden-state proposer has yet to observe a step's rows, sequences finishing in
  // that step keep their blocks (and the proposer its state) until it has: their blocks enter
  // the prefix cache, whose hits must find the proposer's K/V there too.
  bool defer_frees_ = false;
  std::vector<int64_t> deferred_frees_;
  Sampler sampler_;
  std::vector<float> target_probs_;  // a verify row's p, against a sampling draft's q
  // This step's sampling-draft distributions (Request::draft_probs point into it).
  std::vector<float> step_draft_probs_;
  spec::AcceptanceRule accept_rule_ = spec::verify_draft_token;
  bool rule_for_seeded_ = false;
  std::vector<int32_t> eog_ids_;  // end-of-generation ids, sorted

  std::unordered_map<std::string, std::unique_ptr<RequestGroup>> groups_;
  std::vector<std::string> aborted_;  // groups whose final "abort" output is still to be sent
  int64_t next_seq_id_ = 0;
  uint64_t next_arrival_ = 0;

  // Per-step scratch, kept to avoid reallocating every step.
  Batch batch_;
  std::vector<Request*> sample_seqs_;   // sequences that sample this step, in logits-row order
  std::vector<int32_t> sample_drafts_;  // per sample_seqs_ entry: proposals verified (rows - 1)
  std::vector<uint32_t> verify_mask_;   // a verify's masks after its first row
  // Pooling rows of this step: hidden_rows' owners and positions, the sequences scoring with
  // their last row's logits (those rows follow the sampled ones), the hidden states.
  struct HiddenRow {
    Request* req;
    int32_t pos;
  };
  std::vector<HiddenRow> hidden_owner_;
  std::vector<Request*> pooling_logits_seqs_;
  std::vector<int32_t> pooling_logits_batch_rows_;
  // Prompt-logprob rows of this step: whose, which batch row, the prompt token it scores; and
  // where they start in the logits rows.
  struct PromptLogprobRow {
    Request* req;
    int32_t batch_row;
    int32_t token;
  };
  std::vector<PromptLogprobRow> prompt_lp_rows_;
  size_t prompt_lp_first_ = 0;
  std::vector<float> hidden_;
  std::vector<float> logits_;
  std::vector<int32_t> suppressed_;
  std::vector<PlannedSnapshot> snapshots_;  // the recurrent-state snapshots of this step
  // Grammar masks of the rows in sample_seqs_ (bitmask_words(n_vocab) words per row; empty
  // span for unconstrained rows), filled by mask_worker_ during the forward pass.
  std::vector<uint32_t> masks_;
  std::vector<std::span<const uint32_t>> row_masks_;
  std::vector<MaskWorker::Job> mask_jobs_;
  MaskWorker mask_worker_;

  bool keep_logits_ = false;
  std::vector<std::pair<std::string, std::vector<float>>> last_logits_;
  std::vector<std::pair<std::string, std::vector<int32_t>>> last_drafts_;

  EngineMetrics totals_;
};

}  // namespace loom
