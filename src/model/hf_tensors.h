// The tensors of a Hugging Face checkpoint under their GGUF names (model/tensor_names.h), for
// loading and for loom convert. Most are the checkpoint's own views into its mapped
// safetensors files; a GGUF tensor that stacks a layer's experts ({cols, rows, n_expert}) has
// one HF tensor per expert: loading binds those in place (experts()), convert asks for the
// stack (find()), built here once, in memory owned by this object; so are
// the tensors derived from gpt-oss's fused experts (names::kDeriveEvenCols and the like: the
// gate or up columns of gate_up_proj, transposed to GGUF's rows; down_proj transposed).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"
#include "format/tensor.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/hf_fp8.h"

namespace loom {

class HfTensors {
 public:
  // `config` (of the same checkpoint) gives the per-head sizes that split DeepSeek's kv_b_proj
  // (names::kDeriveMlaKeys / kDeriveMlaValues).
  static Result<std::shared_ptr<HfTensors>> open(const std::string& dir, const ArchSpec& arch,
                                                 const ModelConfig& config);

  // The tensor with this GGUF name; nullptr when the checkpoint has none (or its experts'
  // shapes or dtypes disagree, which binding then reports as a missing tensor).
  const TensorView* find(std::string_view gguf_name);
  // The experts of a GGUF name that stacks them, one view each in the checkpoint's mapping (or
  // dequantized from FP8), in expert order: what binding a model reads, with no stacked copy
  // (find() makes one, for a GGUF file's single tensor). Empty for any other name.
  std::vector<const TensorView*> experts(std::string_view gguf_name);
  // Threads for what loading makes (gpt-oss's MXFP4 experts, FP8 dequantization); 1 by
  // default (loom convert makes one tensor at a time).
  void set_load_threads(int n) { load_threads_ = std::max(1, n); }
  // An FP8 checkpoint: dequantizes every F8_E4M3 tensor now, on the load threads, rather than
  // one by one as find() reaches them (loading reads them all; most of the time is the kernel
  // zeroing the fresh pages, which threads share). Nothing for other checkpoints.
  void dequantize_all_fp8();
  // The HF name a GGUF name came from, for messages ("model.layers.0.mlp.experts.{e}...").
  std::string hf_name(std::string_view gguf_name) const;
  // Frees the tensors made here whose views start at one of `copied` (copied elsewhere now)
  // and hold none of `in_use`, and every source a derived tensor was made from. find() makes
  // them again if asked.
  void release(std::span<const void* const> copied, std::span<const void* const> in_use);
  uint64_t made_bytes() const;  // what the tensors made here hold now
  // Whether find() made `view` here (stacked, derived or dequantized), rather than it being a
  // view of the checkpoint's mapped bytes.
  bool made_here(const TensorView* view) const;

 private:
  HfTensors(SafetensorsModel st, const ArchSpec& arch, const ModelConfig& config,
            std::optional<Fp8BlockSize> fp8)
      : st_(std::move(st)),
        fp8_(fp8),
        arch_(arch),
        n_layer_(config.n_layer),
        n_head_(config.n_head),
        mla_(config.mla),
        deltanet_(config.deltanet) {}
  // The checkpoint's tensor of this HF name, also under model.language_model. for
  // vision-language checkpoints (an FP8 one dequantized: model/hf_fp8.h); nullptr when it has
  // none.
  const TensorView* lookup(const std::string& hf);
  const TensorView* find_or_make(std::string_view gguf_name);
  const TensorView* dequantize_fp8(const std::string& hf, const TensorView& codes);
  // The checkpoint's tensors named by `pattern` with kExpertIndex replaced by 0, 1, ... up
  // to the first absent one.
  std::vector<const TensorView*> expert_views(const std::string& pattern);
  const TensorView* stack_experts(const std::string& gguf_name, const std::string& pattern);
  const TensorView* derive(const std::string& gguf_name, const std::string& hf);
  // gpt-oss's MXFP4 experts (`base`_blocks / `base`_scales) as GGUF MXFP4 (hf_tensors.cpp).
  const TensorView* derive_mxfp4(const std::string& gguf_name, const std::string& base,
                                 const std::string& op);

  // fn(first, last) over [0, n) split into load_threads_ ranges, one thread each.
  void parallel_ranges(int64_t n, const std::function<void(int64_t, int64_t)>& fn) const;

  SafetensorsModel st_;
  int load_threads_ = 1;
  std::optional<Fp8BlockSize> fp8_;  // an FP8 checkpoint's scale blocks
  const ArchSpec& arch_;
  int32_t n_layer_;  // blocks from here on are multi-token prediction modules
  int32_t n_head_;
  MlaConfig mla_;
  DeltaNetConfig deltanet_;  // Gated DeltaNet's sizes (model/hf_deltanet.h)
  struct Stacked {
    std::vector<uint8_t> bytes;
    TensorView view;
    bool served = false;  // find() returned it (else only derived tensors were made from it)
  };
  std::map<std::string, std::unique_ptr<Stacked>, std::less<>> stacked_;
  // The FP8 tensor `hf` (its codes) dequantized to BF16, not yet kept (thread-safe).
  std::unique_ptr<Stacked> dequantized(const std::string& hf, const TensorView& codes) const;
};

}  // namespace loom
