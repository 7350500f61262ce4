// Public engine API: continuous batching over a paged KV cache (vLLM's design in C++).
//
//   Engine       synchronous: add_request(), then step() until has_unfinished() is false.
//                Each step runs ONE forward pass over a flat batch mixing prefill chunks and
//                decode tokens of many requests, and returns the outputs it produced.
//   AsyncEngine  an engine thread looping over step(); any thread may submit() (getting a
//                per-request RequestStream to read outputs from) or abort().
//
// Requests stop on EOS (unless ignore_eos), stop token ids, stop strings (never leaked into the
// text, even when split across tokens), max_tokens, or the context limit. A request that can
// never fit (prompt + max_tokens over max_model_len or over the whole KV cache) is rejected by
// add_request/submit with an error instead of waiting forever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/dtype.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace loom {

class Model;
class Tokenizer;
class EngineCore;

// Speculative decoding (vLLM's --speculative-config): each decoding sequence gets up to
// num_speculative_tokens proposed tokens, verified as k + 1 tokens of one normal step; the
// accepted prefix is kept, so the output is exactly what decoding without it gives (greedy:
// the same tokens; sampled: the same distribution, and the same tokens for the same seed).
struct SpeculativeConfig {
  // kMtp: the target's own multi-token prediction layers (DeepSeek-V3's MTP; vLLM's "mtp",
  // formerly "deepseek_mtp") propose from its hidden states.
  enum class Method { kNone, kNgram, kDraftModel, kMtp };
  Method method = Method::kNone;
  // kDraftModel: the draft (a GGUF, HF directory or synth:PRESET) with the target's
  // vocabulary; it proposes its greedy continuation.
  std::string model;
  int32_t num_speculative_tokens = 0;
  // n-gram (prompt lookup): match the last n tokens, prompt_lookup_max >= n >= prompt_lookup_min,
  // against the sequence so far and propose what followed the latest earlier match.
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // No proposals in a step with at least this many decoding sequences (vLLM's option).
  // 0, the default: no fixed bound; each sequence's proposals must keep, on average, more
  // tokens than their rows cost in a step-time model the engine fits as it runs
  // (engine/step_cost.h): a few of 4 proposals in a memory-bound step, nearly all once the
  // batch makes steps compute-bound (on 2 CPU cores a 5-token verify of 16 sequences costs
  // 4.3x their decode step, of one sequence 1.2-1.45x).
  int32_t disable_by_batch_size = 0;
  // llama-server's --draft-min: a proposal shorter than this is not verified.
  int32_t draft_min = 0;
  // llama-server's --spec-draft-p-min (kDraftModel, kMtp): a sequence's proposals of a step
  // end where the proposer's probability of its best token, over its 10 best at temperature 1
  // (llama.cpp's draft sampler), is below this. 0: never. Outputs stay what they would be.
  float draft_p_min = 0.0f;
  // For tests: every decoding sequence proposes every step, however few proposals it keeps
  // (no back-off, whose decisions follow measured step times), so proposals are reproducible.
  bool always_propose = false;
  bool enabled() const { return method != Method::kNone && num_speculative_tokens > 0; }
};

struct EngineConfig {
  int32_t block_size = 16;  // tokens per KV block
  // KV cache size. If kv_cache_memory_gib > 0 the pool gets that many GiB; otherwise it is
  // sized to hold max_num_seqs sequences of max_model_len tokens.
  double kv_cache_memory_gib = 0.0;
  // Longest sequence (prompt + output). 0 = the model's context length (and never more).
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 256;          // sequences running at once
  int32_t max_num_batched_tokens = 0;  // tokens per step; 0 = backend default (CPU: 2048)
  // Prompt tokens per step while more than one request is running or waiting; -1 = backend
  // default (CPU: 256), 0 = only max_num_batched_tokens limits them. On CPU a step's time grows
  // with its tokens, so a burst of prompts prefilled in one step would hold every first token
  // (and every running decode) until the whole burst is done.
  int32_t shared_prefill_tokens = -1;
  bool enable_prefix_caching = true;
  // Hybrid models (recurrent layers, e.g. Qwen3.5): with prefix caching, the recurrent state is
  // snapshotted every state_snapshot_every KV blocks of a sequence and at its newest block
  // boundary, so that a request sharing a prefix resumes from the deepest snapshot. The
  // snapshots take at most state_cache_memory_gib (0 = 1 GiB, and at most 8 snapshots per
  // max_num_seqs), the least recently used evicted first.
  int32_t state_snapshot_every = 8;
  double state_cache_memory_gib = 0.0;
  Dtype kv_dtype = Dtype::kF16;  // f32, f16 or bf16
  int n_threads = 0;             // CPU threads for Engine::load; 0 = physical cores
  // Full attention in every layer, also where the model slides a window (vLLM's
  // --disable-sliding-window); applies to Engine::load.
  bool disable_sliding_window = false;
  // The KV cache's pages are committed, and (Engine::load) the weights' kernel-ready copies
  // made, on background threads while the engine already serves (a server is ready at once);
  // false waits for them at creation (benchmarks that must not time page faults or run on the
  // file's layout).
  bool commit_kv_in_background = true;
  SpeculativeConfig speculative;
};

enum class FinishReason { kNone, kStop, kLength, kAbort };
// "stop", "length", "abort" (OpenAI finish_reason spelling); "" for kNone.
const char* finish_reason_name(FinishReason r);

// Logprobs use the sampler's PositionLogprobs: the sampled token's logprob and rank, plus the
// top-k most likely tokens (raw logits, before penalties and temperature, as vLLM).

// One of the n samples of a request; fields are deltas since the previous output unless noted.
struct CompletionOutput {
  int32_t index = 0;                       // which of the n samples
  std::vector<int32_t> token_ids;          // new tokens this step
  std::string text;                        // new text (stop strings held back / cut)
  std::vector<PositionLogprobs> logprobs;  // one per new token, if requested
  int32_t num_output_tokens = 0;           // total generated so far
  FinishReason finish_reason = FinishReason::kNone;
  // What stopped it: the stop string, or the stop token id as text ("" if EOS / length).
  std::string stop_reason;
  std::optional<int32_t> stop_token;  // set when a stop_token_id (or EOS) ended it
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct RequestOutput {
  std::string request_id;
  std::vector<CompletionOutput> outputs;  // samples that changed this step
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;  // prompt tokens served by the prefix cache
  bool finished = false;          // every sample finished
  // Timing for metrics (seconds): arrival → first scheduled (queue), arrival → first token.
  double queue_time_s = 0.0;
  double time_to_first_token_s = 0.0;  // 0 until the first token exists
  double elapsed_s = 0.0;              // arrival → this output
  std::string error;                   // set if the engine failed this request
  // A pooling request's result, on its final output: the pooled hidden state (n_embd floats),
  // or the requested logits, or the classifier's outputs.
  std::vector<float> pooled;
  // SamplingParams::prompt_logprobs >= 0: once, on the first output after the whole prompt
  // ran, one entry per prompt token from the second (the first has none): its logprob given
  // the tokens before it, and the top prompt_logprobs tokens there (raw logits, as vLLM's).
  std::vector<PositionLogprobs> prompt_logprobs;
};

// One KV layer group (full attention, or one sliding window).
struct KvGroupMetrics {
  int32_t window = 0;  // 0: full attention
  int32_t num_blocks = 0;
  int32_t num_used_blocks = 0;
  int64_t num_window_released_blocks = 0;  // released as sequences outgrew the window (total)
};

struct EngineMetrics {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  double kv_cache_usage = 0.0;  // 0..1, over every group's memory
  int32_t num_kv_blocks = 0;    // blocks of the largest group (full attention where there is one)
  uint64_t kv_cache_bytes = 0;  // memory of every group's blocks
  uint64_t state_cache_bytes = 0;  // recurrent-state slots (hybrid models), live and snapshots
  std::vector<KvGroupMetrics> kv_groups;
  int64_t prefix_cache_queries = 0;    // tokens looked up
  int64_t prefix_cache_hits = 0;       // tokens found
  int64_t prompt_tokens = 0;           // prompt tokens of admitted requests (totals)
  int64_t prompt_tokens_computed = 0;  // tokens actually run through the model for prefill
  int64_t generation_tokens = 0;
  int64_t num_preemptions = 0;
  // Hybrid models: recurrent state slots held by running sequences, prefix snapshots cached
  // now, and snapshots taken since start-up.
  int32_t num_state_slots_live = 0;
  int32_t num_state_snapshots = 0;
  int64_t state_snapshots_taken = 0;
  int64_t num_steps = 0;
  int64_t num_finished = 0;
  double forward_seconds = 0;  // time in the model's forward passes (the target's)
  // Steps that ran no prompt token (decodes and verifies): their whole time (proposers, a
  // draft model, the forward pass, sampling) and the tokens they emitted, so a decode rate can
  // be read apart from prefill, which speculation leaves as it is.
  double decode_step_seconds = 0;
  int64_t decode_step_tokens = 0;
  // Speculative decoding (vLLM's spec_decode metrics): proposals verified, tokens proposed,
  // tokens accepted, and accepted tokens by position in the proposal.
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  double spec_draft_seconds = 0;  // time in a draft model's (or MTP module's) forward passes
  // Time in the proposers (n-gram lookups; a draft model's or MTP module's passes included),
  // so the cost of speculation that finds nothing can be read directly.
  double spec_proposer_seconds = 0;
};

// An embedding or scoring request: no sampling. The prompt runs through the model (prefill
// only, scheduled, batched and chunked like any other request) and the final output carries
// RequestOutput::pooled. Hidden states are the final-norm ones (what the LM head would read).
struct PoolingParams {
  enum class Mode {
    kLast,  // the last token's hidden state (Qwen3-Embedding)
    kMean,  // the mean over every position (never served from the prefix cache)
    kCls,   // the first token's
  };
  Mode mode = Mode::kLast;
  bool normalize = true;  // L2-normalise the pooled vector (embeddings' default)
  // Score instead of embed: these tokens' logits at the last position (a Qwen3-Reranker's
  // "yes" and "no"), in this order. Then mode must be kLast and normalize is ignored.
  std::vector<int32_t> logit_tokens;
  // Score instead of embed: the model's classifier head (cls.output) on the last token's
  // hidden state, its n_cls_out raw outputs.
  bool classify = false;
};

struct GenerateRequest {
  std::string request_id;       // unique among unfinished requests
  std::vector<int32_t> prompt;  // token ids (non-empty)
  SamplingParams params;
  // Set: a pooling request (params are then unused, except that n must stay 1).
  std::optional<PoolingParams> pooling;
  int32_t priority = 0;     // lower runs first; ties FCFS
  uint64_t cache_salt = 0;  // separates prefix caches (e.g. per tenant / LoRA)
};

class Engine {
 public:
  // Loads the model (GGUF path, HF dir or "synth:PRESET[:TYPE]") and, where the file has one,
  // its tokenizer.
  static Result<std::unique_ptr<Engine>> load(const std::string& model_spec,
                                              const EngineConfig& config);
  // With a model already loaded; tokenizer may be null (then outputs have no text and stop
  // strings are rejected). `model_spec`: where the model came from, if known (a draft model
  // naming the same file then runs on the target's weights instead of loading them again).
  static Result<std::unique_ptr<Engine>> create(std::unique_ptr<Model> model,
                                                std::unique_ptr<Tokenizer> tokenizer,
                                                const EngineConfig& config,
                                                const std::string& model_spec = "");
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Status add_request(GenerateRequest request);
  // The checks add_request makes that do not depend on engine state (everything but the id
  // being unused). Thread-safe: reads only immutable configuration.
  Status validate(const GenerateRequest& request) const;
  // Frees everything the request holds at once; its final output (finish reason abort) comes
  // from the next step(). Unknown ids are ignored (the request may just have finished).
  void abort(const std::string& request_id);
  // One scheduling + forward + sampling round. Returns outputs of requests that changed.
  Result<std::vector<RequestOutput>> step();
  bool has_unfinished() const;

  EngineMetrics metrics() const;
  const EngineConfig& config() const;  // with defaults resolved (max_model_len, pool size)
  const Model& model() const;
  const Tokenizer* tokenizer() const;  // null if none

  // For tests: logits of the rows sampled in the last step, keyed by request id
  // (only kept while keep_logits(true)).
  void keep_logits(bool on);
  const std::vector<std::pair<std::string, std::vector<float>>>& last_logits() const;
  // For tests: the proposals each verify of the last step checked, keyed by request id (only
  // kept while keep_logits(true)).
  const std::vector<std::pair<std::string, std::vector<int32_t>>>& last_drafts() const;
  // For tests: "" when every KV block is free, else a description. Also checks pool invariants.
  std::string check_kv_drained() const;

 private:
  explicit Engine(std::unique_ptr<EngineCore> core);
  std::unique_ptr<EngineCore> core_;
};

class RequestStream;

// A background engine thread. Submitting and aborting are thread-safe; outputs of each request
// arrive on its own RequestStream.
class AsyncEngine {
 public:
  explicit AsyncEngine(std::unique_ptr<Engine> engine);
  ~AsyncEngine();  // aborts what is left and joins the engine thread
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Validation errors are returned here; the request is then never started.
  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request);
  void abort(const std::string& request_id);
  EngineMetrics metrics() const;                     // snapshot taken after the latest step
  const Engine& engine() const { return *engine_; }  // config / tokenizer / model (read-only)

 private:
  struct State;
  void loop();
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<State> state_;
};

// Outputs of one request, in order; the last one has finished == true.
class RequestStream {
 public:
  // Blocks until an output is available; nullopt once the final output was read.
  std::optional<RequestOutput> next();
  // Like next() but gives up after `timeout` (nullopt: nothing yet, or done — see done()).
  std::optional<RequestOutput> next_for(std::chrono::milliseconds timeout);
  bool done() const;  // the final output was read
  const std::string& request_id() const { return request_id_; }

  // Engine side.
  explicit RequestStream(std::string request_id) : request_id_(std::move(request_id)) {}
  void push(RequestOutput output);

 private:
  std::string request_id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool final_pushed_ = false;
  bool final_read_ = false;
};

}  // namespace loom
