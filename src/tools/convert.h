// `loom convert`: a Hugging Face checkpoint directory (config.json + safetensors) → one GGUF
// file with GGUF tensor names and metadata keys, readable by loom and llama.cpp-style readers.
// llama-family Q/K rows are permuted for interleaved-pair RoPE as GGUF `llama` readers expect;
// qwen2/qwen3 keep HF's halves layout (their GGUF readers use neox RoPE).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "format/dtype.h"

namespace loom {

struct ConvertOptions {
  Dtype type = Dtype::kF32;  // of 2-D weight matrices (f32, f16, bf16, q8_0); 1-D stay f32
};

struct ConvertReport {
  std::string arch;
  int n_tensors = 0;
  uint64_t n_bytes = 0;            // tensor data written
  std::vector<std::string> notes;  // fallbacks and skipped parts
  // The most bytes that tensors made on lookup (stacked experts, dequantized FP8, derived
  // tensors) held at once: about the largest of them, not their sum.
  uint64_t peak_made_bytes = 0;
};

Status convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path,
                          const ConvertOptions& options, ConvertReport* report = nullptr);

// Row order of a Q or K projection for GGUF `llama` files: GGUF row h*D + 2i + j holds HF row
// h*D + j*D/2 + i (i < D/2, j in {0, 1}). Returns the HF row for each GGUF row.
int64_t rope_permuted_source_row(int64_t gguf_row, int64_t head_dim);

}  // namespace loom
