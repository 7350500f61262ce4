// `loom quantize`: rewrite a GGUF model (F32/F16/BF16 weights) with quantized weight matrices,
// either one type throughout or a llama.cpp-style mix (Q4_K_M, Q5_K_M).
//
// Which type each tensor gets:
//   - 1-D tensors (norms, biases, rope_freqs) and tensors not named *.weight: F32, unchanged.
//   - every other tensor: the base type, except in the _M mixes (following llama-quantize's
//     rule for dense models):
//       output.weight (token_embd.weight when the embeddings are tied) → Q6_K;
//       attn_v.weight of layer i and ffn_down.weight of layer i → Q6_K when
//       use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, i.e. the first and
//       last eighth of the layers and every third layer in between.
//   - a row length that does not fit the chosen block size (256 for K-quants, 32 for Q8_0 /
//     Q4_0) falls back to Q8_0 when it fits, F16 otherwise; the report says so.
// Already-quantized input tensors are refused unless allow_requantize is set, in which case
// they are dequantized and quantized again (accumulating both errors, as llama.cpp warns).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/dtype.h"
#include "format/gguf.h"

namespace loom {

struct QuantizeTarget {
  std::string name;  // "Q4_K_M", "Q8_0", ...
  Dtype base = Dtype::kQ8_0;
  bool mix_m = false;      // the _M upgrades above
  uint32_t file_type = 7;  // general.file_type (llama_ftype)
};

// Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_K_M, Q5_K_M, F16, BF16, F32 (case-insensitive).
Result<QuantizeTarget> parse_quantize_target(std::string_view name);
std::string quantize_target_names();  // for help and errors

struct QuantizeOptions {
  bool allow_requantize = false;
  int n_threads = 0;  // 0 = physical cores
};

struct QuantizedTensor {
  std::string name;
  Dtype from = Dtype::kF32;
  Dtype to = Dtype::kF32;
  std::vector<int64_t> ne;
};

struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;
  std::vector<std::string> notes;  // fallbacks
  uint64_t bytes_in = 0;           // tensor data
  uint64_t bytes_out = 0;
};

// The per-tensor decisions alone (no data touched); errors for refused inputs.
Result<std::vector<QuantizedTensor>> plan_quantization(const GgufFile& in,
                                                       const QuantizeTarget& target,
                                                       const QuantizeOptions& options,
                                                       std::vector<std::string>* notes);

Status quantize_model_file(const std::string& in_path, const std::string& out_path,
                           const QuantizeTarget& target, const QuantizeOptions& options = {},
                           QuantizeReport* report = nullptr);
Result<std::shared_ptr<std::vector<uint8_t>>> quantize_model_bytes(
    const GgufFile& in, const QuantizeTarget& target, const QuantizeOptions& options = {},
    QuantizeReport* report = nullptr);

}  // namespace loom
