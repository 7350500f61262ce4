// Random-weight models of an exact preset shape (tiny test models up to Llama-3.1-8B), as
// GGUF bytes in memory or a GGUF file. Weights are deterministic in the seed and scaled so a
// real forward pass gives finite, non-degenerate logits; they are not a trained model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/dtype.h"
#include "format/gguf.h"
#include "tools/gguf_build.h"

namespace loom {

struct SynthOptions {
  std::string arch = "llama";   // a registry architecture (synth_presets.h): tensors, metadata
  std::string preset = "tiny";  // see synth_presets.h
  Dtype type = Dtype::kF32;     // of 2-D weight matrices; 1-D tensors stay f32
  uint64_t seed = 42;
  std::string vocab_path;  // tokenizer.* metadata source; "" = the preset's default
};

// What was built, for the command line and logs.
struct SynthReport {
  uint64_t n_params = 0;
  uint64_t n_bytes = 0;  // whole GGUF
  int32_t n_vocab = 0;
  std::string vocab_source;
  std::vector<std::string> notes;  // type fallbacks, placeholder vocabulary, ...
};

// The dtypes synth (and quantize) can write for weight matrices.
bool is_synth_weight_type(Dtype t);

Result<std::shared_ptr<std::vector<uint8_t>>> synth_model_bytes(const SynthOptions& options,
                                                                SynthReport* report = nullptr);
Status synth_model_file(const SynthOptions& options, const std::string& path,
                        SynthReport* report = nullptr);

// What synth would write, without generating any weights: metadata in file order and the
// tensor list (name, dtype, shape, bytes). For checking large presets' shapes cheaply.
struct SynthLayout {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<PlannedTensor> tensors;
  SynthReport report;  // n_bytes is 0: the header size is only known once written
};
Result<SynthLayout> synth_layout(const SynthOptions& options);
// The GGUF synth would write, parsed, with every tensor's data zeros that cost no memory
// (GgufWriter::layout): its metadata, shapes and types for planning memory (loom plan) in no
// time, where generating a 30B preset's weights takes minutes and its size in RAM.
Result<GgufFile> synth_layout_gguf(const SynthOptions& options);

// "synth:PRESET[:TYPE]" → options; the arch is implied by the preset (qwen3-* → qwen3, others
// llama), the type defaults to f32.
Result<SynthOptions> parse_synth_spec(std::string_view spec);

// llama3-style rope scaling as divisors of each of the head_dim/2 rotary frequencies (the
// values converted Llama 3.1 files keep in rope_freqs.weight): 1 for short wavelengths,
// `factor` for long ones, a smooth blend in between.
std::vector<float> llama3_rope_freq_divisors(int head_dim, float theta, float factor,
                                             float low_freq_factor, float high_freq_factor,
                                             int original_context);

// GGUF general.file_type (llama_ftype) for a model whose matrices are all of type t; for
// MXFP4, llama.cpp's MOSTLY_MXFP4_MOE (38): see matrix_type_for.
uint32_t gguf_file_type_for(Dtype t);

// The type a weight matrix gets in a file of `file_type`: that type, except MXFP4, which (as
// llama.cpp's gpt-oss files and its MXFP4_MOE quantization) only the experts' matrices
// (ffn_{gate,up,down}_exps) take, the others Q8_0.
Dtype matrix_type_for(Dtype file_type, bool expert);

// The type a matrix of `cols` columns gets when `want` does not fit its rows (K-quants and
// IQ4_XS and TQ1_0 / TQ2_0 need multiples of 256, the 32-blocks 32), as llama-quantize falls
// back: IQ4_XS to IQ4_NL, the ternary types to Q4_0, then Q8_0, then F16.
Dtype fit_matrix_type(Dtype want, int64_t cols);

}  // namespace loom
