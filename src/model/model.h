// Model: a loaded transformer (config + weights) that runs one flat Batch per call, reading
// and writing K/V through per-sequence block tables (paged KV cache).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "format/dtype.h"
#include "format/gguf.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/forward_profile.h"

namespace loom {

struct BoundModel;  // model/bind.h

// Which layers share block tables: layer l's K/V live in the blocks of group layer_group[l],
// which has num_blocks[g] of them (the engine's KvCoordinator has one manager per group).
struct KvLayout {
  std::vector<int32_t> layer_group;  // [n_layer]
  std::vector<int32_t> num_blocks;   // [groups], at most kMaxKvGroups
  // Recurrent-state slots (models with Gated DeltaNet layers): one per running sequence plus
  // the prefix snapshots; each holds every recurrent layer's state (state_bytes_per_slot).
  int32_t num_state_slots = 0;
  // How many of a step's last tokens a sequence may take back afterwards (the rejected
  // proposals of a speculative verify; 0 = none). Recurrent states then keep what a rollback of
  // that many tokens needs (backend/cpu/gated_deltanet.h), which makes each slot larger.
  int32_t state_rollback_tokens = 0;
  // Every layer in one group of num_blocks blocks.
  static KvLayout single(int32_t n_layer, int32_t num_blocks) {
    return {std::vector<int32_t>(n_layer, 0), {num_blocks}};
  }
};

// The backend whose memory a KvCache is (its forward pass reads that storage directly).
enum class KvBackend { kCpu };

// K and V storage for every layer: blocks of block_size tokens. Which block belongs to which
// sequence is decided by the engine's block pool; this class only holds the memory.
class KvCache {
 public:
  // One group: every layer's K/V in num_blocks blocks (and, for a model with recurrent layers,
  // one state slot: one sequence's, slot 0).
  static Result<std::unique_ptr<KvCache>> create(const ModelConfig& config, int32_t num_blocks,
                                                 int32_t block_size, Dtype dtype);
  // commit_when: the background commit waits until it returns true (the engine passes
  // Model::weight_copies_made: see there); null: it starts at once.
  static Result<std::unique_ptr<KvCache>> create(const ModelConfig& config, const KvLayout& layout,
                                                 int32_t block_size, Dtype dtype,
                                                 std::function<bool()> commit_when = nullptr);
  virtual ~KvCache() = default;
  // Blocks of group 0 (of the whole cache when it has one group).
  int32_t num_blocks() const { return layout_.num_blocks[0]; }
  int num_groups() const { return static_cast<int>(layout_.num_blocks.size()); }
  int32_t num_blocks(int group) const { return layout_.num_blocks[group]; }
  int32_t group_of(int layer) const { return layout_.layer_group[layer]; }
  int32_t block_size() const { return block_size_; }
  Dtype dtype() const { return dtype_; }
  KvBackend backend() const { return backend_; }
  // Bytes one block takes over all layers, K and V (for sizing the pool from a memory budget).
  static uint64_t bytes_per_block(const ModelConfig& config, int32_t block_size, Dtype dtype);
  // Elements one token takes in `layer`: K and V of every KV head, or an MLA layer's one
  // latent row (kv_lora_rank + qk_rope_head_dim, shared by every head).
  static uint64_t layer_elems_per_token(const ModelConfig& config, int layer);
  // Bytes of one recurrent-state slot over every recurrent layer (0 for a model without), in a
  // cache whose layout has state_rollback_tokens = rollback.
  static uint64_t state_bytes_per_slot(const ModelConfig& config, int32_t rollback = 0);
  // Ok unless `config` has recurrent layers and `rollback` (the proposals a verify may take
  // back) is more than they can take back (kRecurrentChunk - 1), an error naming
  // num_speculative_tokens.
  static Status check_state_rollback(const ModelConfig& config, int64_t rollback);
  int32_t num_state_slots() const { return layout_.num_state_slots; }
  int32_t state_rollback_tokens() const { return layout_.state_rollback_tokens; }
  // Copies recurrent-state slot src into dst (every recurrent layer).
  virtual void copy_state(int32_t src, int32_t dst) = 0;
  // The cache's memory is committed in the background after creation (start-up does not wait
  // for it); this blocks until it is, for measurements that must not include page faults.
  virtual void wait_committed() {}
  // Memory of every group's blocks as allocated (what the memory plan's KV line predicts).
  virtual uint64_t bytes() const = 0;
  // Memory of the recurrent-state slots as allocated (the memory plan's "recurrent states").
  virtual uint64_t state_bytes() const = 0;

 protected:
  KvLayout layout_;
  KvBackend backend_ = KvBackend::kCpu;
  int32_t block_size_ = 0;
  Dtype dtype_ = Dtype::kF32;
};

struct ModelLoadOptions {
  int n_threads = 0;  // 0 = physical cores
  // Every layer attends over the whole sequence even where the architecture slides a window
  // (vLLM's --disable-sliding-window): for measuring what the windows save, or for checkpoints
  // whose window was only a training detail.
  bool disable_sliding_window = false;
  // The longest sequence this model will run (the engine's max_model_len); 0: the model's
  // context length. LongRoPE picks its long factors when this exceeds the original context,
  // as llama.cpp does from its context size (transformers switches per sequence length).
  int32_t max_context = 0;
  // Multi-head Latent Attention: a sequence computing at least this many rows in one step
  // (a prompt chunk) attends with each head's K and V decompressed from its cached latent
  // rows instead of in the absorbed form decode uses: fewer operations per query-key pair for
  // long prompts, but a row's bits then depend on how its prompt was chunked (the two forms
  // round differently). 0: always absorbed, chunk- and batch-invariant.
  int32_t mla_decompress_rows = 0;
  // The weights' kernel-ready copies are made on a background thread while the model already
  // runs on the file's layout (a server is ready in about the time it takes to map the file);
  // forward calls switch to the copies between two steps once they are all made. false: the
  // constructor makes them (benchmarks, tests).
  bool repack_in_background = false;
  // Run on this pool instead of starting one (not owned; it must outlive the model). A draft
  // model runs on its target's: it only runs between the target's steps, and a pool of its own
  // would add workers that spin between kernels on the same cores. (Measured on 2 vCPUs,
  // llama-0.5b Q4_0 as its own draft: target-time 317-324 vs 314-322 tok/s, no difference.)
  ThreadPool* thread_pool = nullptr;
};

class Model {
 public:
  // spec: a GGUF file or a Hugging Face directory (config.json + *.safetensors). The loaders
  // are defined by the backend (src/backend/cpu/load.cpp); tools::load_model (tools/model_spec.h)
  // also takes "synth:PRESET[:TYPE]" (random weights built in memory).
  static Result<std::unique_ptr<Model>> load(const std::string& spec,
                                             const ModelLoadOptions& options = {});
  // From an already parsed GGUF (file or in-memory bytes); the views stay valid because the
  // model keeps `file`'s mapping alive.
  static Result<std::unique_ptr<Model>> from_gguf(GgufFile file,
                                                  const ModelLoadOptions& options = {});
  // From a Hugging Face directory (config.json + model.safetensors or its index).
  static Result<std::unique_ptr<Model>> from_hf_dir(const std::string& dir,
                                                    const ModelLoadOptions& options = {});
  // From weights already bound (model/bind.h): the backend makes its kernel-ready copies.
  static Result<std::unique_ptr<Model>> from_bound(BoundModel bound,
                                                   const ModelLoadOptions& options = {});
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  // Runs every row of the batch; writes logits for batch.logits_rows, in that order, to
  // `logits` ([logits_rows.size()][n_vocab]). New K/V land in `kv` at each row's position.
  // `hidden` ([hidden_rows.size()][n_embd]) gets the final-norm hidden states of
  // batch.hidden_rows (may be null when there are none); they cost no LM head.
  // `residual` (may be null): every row's hidden state before the final norm, or after it
  // where ModelConfig::mtp_hidden_after_norm says so ([n_rows][n_embd]): what a multi-token
  // prediction module reads (Batch::prev_hidden).
  virtual Status forward(const Batch& batch, KvCache& kv, float* logits, float* hidden,
                         float* residual) = 0;
  Status forward(const Batch& batch, KvCache& kv, float* logits, float* hidden) {
    return forward(batch, kv, logits, hidden, nullptr);
  }
  Status forward(const Batch& batch, KvCache& kv, float* logits) {
    return forward(batch, kv, logits, nullptr, nullptr);
  }
  // Multi-token prediction module `index` (< config().n_mtp_layers) as a model of its own:
  // one block, ModelConfig::mtp_module set, its input rows in Batch::prev_hidden, logits
  // through the module's head. It shares this model's weights (views into the same file and
  // copies), so it must not outlive this model. Its KvCache is its own (one layer).
  virtual Result<std::unique_ptr<Model>> mtp_module(int index) {
    return unsupported("this backend has no multi-token prediction modules");
  }
  // The classifier head (cls.output, config().n_cls_out outputs) on one final hidden state
  // (n_embd floats): out[j] = cls_out[j] · hidden (+ bias). An error when the model has none.
  virtual Status classify(const float* hidden, float* out) const = 0;
  virtual ThreadPool& thread_pool() = 0;
  virtual uint64_t weight_bytes() const = 0;  // bytes of weights read per forward token
  // All weights (a MoE model's every expert), and the matrix parameters, all and per token.
  struct WeightStats {
    uint64_t total_bytes = 0;
    uint64_t total_params = 0;
    uint64_t active_params = 0;
  };
  virtual WeightStats weight_stats() const = 0;
  // What the forward calls so far have read of the weights, cumulative (take differences):
  // the matrices outside the routed experts once a call, one embedding row per token, and
  // each routed expert once per call that routes any of its rows to it, so a batch reads
  // the experts its sequences share once. A one-token call reads weight_bytes(). Zeros
  // where the backend does not count.
  struct WeightReads {
    uint64_t bytes = 0;
    uint64_t calls = 0;
    uint64_t moe_layer_runs = 0;  // Mixture-of-Experts layers run, one per such layer a call
    uint64_t experts_read = 0;    // distinct routed experts read, summed over those runs
  };
  virtual WeightReads weight_reads() const { return {}; }
  // Memory the backend holds beside the file mapping: its kernel-ready weight copies and its
  // scratch (activations), as allocated now (what `loom plan` predicts; tests compare them).
  struct MemoryUse {
    uint64_t weight_copies = 0;
    uint64_t scratch = 0;
    // Tensors the loader made in memory (a Hugging Face checkpoint's dequantized FP8,
    // gpt-oss's transposed experts) and still holds: freed as the kernel-ready copies replace it.
    uint64_t loader_made = 0;
  };
  virtual MemoryUse memory_use() const = 0;
  // Whether the kernel-ready weight copies are all made (ModelLoadOptions::
  // repack_in_background makes them while the model runs): callable from any thread, for as
  // long as the function lives (past the model too). The engine's KV cache commits its memory
  // only then: while copies are made, the file's pages not yet copied are still read, and a
  // model whose file and KV cache only just fit would otherwise have the KV cache take the
  // page cache those reads need (a 17 GB file, 16.5 GiB of copies and 5.9 GiB of KV on 23.5).
  virtual std::function<bool()> weight_copies_made() const {
    return [] { return true; };
  }

  // Forward calls from now on add their phases' wall time to `profile` (nullptr: stop).
  void set_profile(ForwardProfile* profile) { profile_ = profile; }

 protected:
  ForwardProfile* profile_ = nullptr;
};

}  // namespace loom
