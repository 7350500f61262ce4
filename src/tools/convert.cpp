// HF → GGUF conversion. Tensors are converted row by row straight into the output file
// (tools/gguf_build.h), so converting never holds a second copy of the model in memory.
#include "tools/convert.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <span>

#include "kernels/quant.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/hf_tensors.h"
#include "model/tensor_names.h"
#include "model/tensor_plan.h"
#include "model/weights.h"
#include "tokenizer/gguf_export.h"
#include "tools/gguf_build.h"
#include "tools/synth.h"  // llama3_rope_freq_divisors

namespace loom {

int64_t rope_permuted_source_row(int64_t gguf_row, int64_t head_dim) {
  const int64_t h = gguf_row / head_dim, r = gguf_row % head_dim;
  const int64_t i = r / 2, j = r % 2;
  return h * head_dim + j * (head_dim / 2) + i;
}

namespace {

// How a planned tensor's bytes come from the checkpoint's tensor of the same GGUF name (looked
// up again when written: one made on lookup was freed since).
struct Source {
  bool permute;   // llama Q/K rows (or bias elements) reordered for interleaved RoPE
  bool plus_one;  // an RMSNorm weight w of x·(1 + w): GGUF stores 1 + w (Gemma)
  const std::vector<float>* computed;  // instead of a view: values computed here (rope_freqs)
};

void write_metadata(GgufWriter& m, const ModelConfig& c, const std::string& name, Dtype type) {
  namespace n = names;
  auto key = [&](std::string_view suffix) { return n::arch_key(c.arch, suffix); };
  m.set_string(std::string(n::kGeneralArchitecture), c.arch);
  m.set_string(std::string(n::kGeneralName), name);
  m.set_u32(std::string(n::kGeneralFileType), gguf_file_type_for(type));
  if (dtype_info(type).quantized) m.set_u32("general.quantization_version", 2);
  m.set_u32(key(n::kVocabSize), c.n_vocab);
  m.set_u32(key(n::kContextLength), c.context_length);
  m.set_u32(key(n::kEmbeddingLength), c.n_embd);
  // The multi-token prediction layers count as blocks after the main ones (llama.cpp).
  m.set_u32(key(n::kBlockCount), c.n_layer + c.n_mtp_layers);
  if (c.n_mtp_layers > 0) m.set_u32(key(n::kNextnPredictLayers), c.n_mtp_layers);
  m.set_u32(key(n::kFeedForwardLength), c.n_ff);
  m.set_u32(key(n::kHeadCount), c.n_head);
  m.set_u32(key(n::kHeadCountKv), c.n_head_kv);
  m.set_u32(key(n::kKeyLength), c.head_dim);
  m.set_u32(key(n::kValueLength), c.head_dim);
  m.set_u32(key(n::kRopeDimensionCount), c.n_rot > 0 ? c.n_rot : c.head_dim);
  m.set_f32(key(n::kRmsEps), c.rms_eps);
  m.set_f32(key(n::kRopeFreqBase), c.rope_theta);
  if (!c.rope_sections.empty()) {  // padded to four, as llama.cpp's converter writes them
    std::vector<int64_t> sections(c.rope_sections.begin(), c.rope_sections.end());
    sections.resize(4, 0);
    m.set(key(n::kRopeDimensionSections), GgufValue::of_int_array(GgufType::kI32, sections));
  }
  const auto& s = c.rope_scaling;
  if (s.type == RopeScalingType::kLinear) {
    m.set_string(key(n::kRopeScalingType), "linear");
    m.set_f32(key(n::kRopeScalingFactor), s.factor);
  }
  if (s.type == RopeScalingType::kYarn) {  // as llama.cpp's converter writes gpt-oss's
    m.set_string(key(n::kRopeScalingType), "yarn");
    m.set_f32(key(n::kRopeScalingFactor), s.factor);
    m.set_u32(key(n::kRopeScalingOrigCtx), s.original_context);
    if (s.beta_fast != 32.0f) m.set_f32(key(n::kRopeScalingYarnBetaFast), s.beta_fast);
    if (s.beta_slow != 1.0f) m.set_f32(key(n::kRopeScalingYarnBetaSlow), s.beta_slow);
    if (s.attn_factor_given) m.set_f32(key(n::kRopeScalingYarnAttnFactor), s.attn_factor);
  }
  if (s.type == RopeScalingType::kLongRope) {  // the factor lists go in as tensors
    m.set_f32(key(n::kRopeScalingAttnFactor), s.attn_factor);
    m.set_u32(key(n::kRopeScalingOrigCtx), s.original_context);
  }
  // llama3 scaling is not written as keys: llama.cpp's files (and so loom's) carry the
  // per-frequency divisors as rope_freqs.weight instead, and llama.cpp aborts on a
  // rope.scaling.type it does not know.
  if (c.bos_token >= 0) m.set_u32(std::string(n::kTokenizerBos), c.bos_token);
  if (c.eos_token >= 0) m.set_u32(std::string(n::kTokenizerEos), c.eos_token);
}

// Where llama.cpp's files of an architecture cannot hold an LM head of its own, the
// checkpoint's must be its embeddings, value for value, to be left out.
Status head_is_embedding(const TensorLookup& find, const ArchSpec& arch) {
  const TensorView* embd = find(names::kTokenEmbd);  // kept: looked up first
  const TensorView* head = find(names::kOutput);
  if (!embd || !head) return internal_error("convert: bound LM head or embedding disappeared");
  const int64_t cols = embd->cols(), rows = embd->rows();
  bool same = head->cols() == cols && head->rows() == rows;
  std::vector<float> a(cols), b(cols);
  for (int64_t r = 0; same && r < rows; ++r) {
    kernels::dequantize_row(embd->dtype, embd->row(r), a.data(), cols);
    kernels::dequantize_row(head->dtype, head->row(r), b.data(), cols);
    same = std::memcmp(a.data(), b.data(), cols * sizeof(float)) == 0;
  }
  if (same) return Status::ok();
  return unsupported("convert: this " + std::string(arch.name) +
                     " checkpoint's lm_head differs from its embeddings (tie_word_embeddings is "
                     "false), and llama.cpp's " +
                     std::string(arch.name) +
                     " files cannot hold a separate LM head: its loader always uses "
                     "token_embd (its converter drops lm_head)");
}

}  // namespace

Status convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path,
                          const ConvertOptions& o, ConvertReport* report) {
  ConvertReport local;
  ConvertReport& rep = report ? *report : local;
  if (o.type != Dtype::kF32 && o.type != Dtype::kF16 && o.type != Dtype::kBF16 &&
      o.type != Dtype::kQ8_0 && o.type != Dtype::kMXFP4)
    return invalid_argument("convert --type must be f32, f16, bf16, q8_0 or mxfp4");
  LOOM_ASSIGN_OR_RETURN(ModelConfig config, config_from_hf_dir(hf_dir));
  const ArchSpec* arch = find_arch(config.arch);
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<HfTensors> st, HfTensors::open(hf_dir, *arch, config));
  // What the checkpoint does not hold as GGUF wants it is made on lookup: experts stacked, FP8
  // dequantized, gpt-oss's and DeepSeek's tensors derived. Holding them all would take the
  // checkpoint's size again in memory (a 60 GB MoE: 60 GB more), so each is freed at the next
  // lookup; whoever looked it up has copied its shape by then (binding) or written it (below).
  // The token embedding stays (binding reads it after other lookups).
  const void* made_last = nullptr;
  auto release_made = [&] {
    if (made_last) st->release(std::span(&made_last, 1), {});
    made_last = nullptr;
  };
  TensorLookup find = [&](std::string_view name) {
    release_made();
    const TensorView* v = st->find(name);
    if (v && st->made_here(v) && name != names::kTokenEmbd) made_last = v->data;
    rep.peak_made_bytes = std::max(rep.peak_made_bytes, st->made_bytes());
    return v;
  };
  // Binding validates every shape and settles tied / bias / qk-norm flags; its views are not
  // used after (they may point at bytes freed since).
  LOOM_RETURN_IF_ERROR(Weights::bind(config, *arch, find).status());
  rep.arch = config.arch;
  if (arch->gguf_head_is_embedding && !config.tied_embeddings) {
    LOOM_RETURN_IF_ERROR(head_is_embedding(find, *arch));
    config.tied_embeddings = true;  // dropped, as llama.cpp's converter drops lm_head
  }
  // Rows are permuted for interleaved RoPE only when the checkpoint rotates halves (DeepSeek's
  // rope_interleave checkpoints are interleaved already).
  const bool permute =
      arch->gguf_rope_style == RopeStyle::kInterleaved && config.rope_style == RopeStyle::kNeox;

  // The tensors to write: the model's tensor plan (llama.cpp's order), with llama3 RoPE
  // scaling as a rope_freqs.weight tensor of divisors, as llama.cpp's converter writes it.
  const auto& rs = config.rope_scaling;
  const bool llama3 = rs.type == RopeScalingType::kLlama3;
  std::vector<float> rope_divisors;
  if (llama3)
    rope_divisors = llama3_rope_freq_divisors(config.n_rot > 0 ? config.n_rot : config.head_dim,
                                              config.rope_theta, rs.factor, rs.low_freq_factor,
                                              rs.high_freq_factor, rs.original_context);
  TensorPlanOptions po;
  po.rope_freqs = llama3;
  std::vector<PlannedTensor> plan;
  std::vector<Source> sources;
  for (const PlannedWeight& t : tensor_plan(config, po)) {
    if (t.kind == TensorKind::kRopeFreqs) {  // computed, or the config's LongRoPE lists
      LOOM_ASSIGN_OR_RETURN(PlannedTensor p, plan_tensor(t.name, Dtype::kF32, t.ne));
      rep.n_bytes += p.nbytes;
      plan.push_back(std::move(p));
      const std::vector<float>* values = t.role == TensorRole::kRopeFactorsLong ? &rs.long_factor
                                         : t.role == TensorRole::kRopeFactorsShort
                                             ? &rs.short_factor
                                             : &rope_divisors;
      sources.push_back({false, false, values});
      continue;
    }
    const std::string& name = t.name;
    const TensorView* v = find(name);
    if (!v) return internal_error("convert: bound tensor " + name + " disappeared");
    // gpt-oss's published experts are MXFP4 already: kept as they are (llama.cpp's converter
    // does the same), whatever the requested type.
    const bool mxfp4_experts =
        v->dtype == Dtype::kMXFP4 && t.kind == TensorKind::kMatrix && t.ne.size() == 3;
    if (v->dtype != Dtype::kF32 && v->dtype != Dtype::kF16 && v->dtype != Dtype::kBF16 &&
        !mxfp4_experts)
      return unsupported("convert: tensor " + st->hf_name(name) + " has dtype " +
                         std::string(dtype_name(v->dtype)) +
                         " (expected F32, F16 or BF16; MXFP4 for experts)");
    // The plan's shape (an HF [1, n] gate vector is GGUF's {n}); matrices in the requested
    // type except routers, which llama.cpp's converter keeps F32.
    Dtype dt = Dtype::kF32;
    const std::vector<int64_t>& ne = t.ne;
    if (mxfp4_experts) {
      dt = Dtype::kMXFP4;
    } else if (t.kind == TensorKind::kMatrix && t.role != TensorRole::kRouter) {
      // mxfp4: the experts only, the rest q8_0 (tools/synth.h matrix_type_for).
      dt = matrix_type_for(o.type, t.ne.size() == 3);
      if (!row_bytes(dt, ne[0])) {
        rep.notes.push_back(name + ": row length " + std::to_string(ne[0]) + " does not fit " +
                            std::string(dtype_name(dt)) + " blocks; written as f16");
        dt = Dtype::kF16;
      }
    }
    LOOM_ASSIGN_OR_RETURN(PlannedTensor p, plan_tensor(name, dt, ne));
    rep.n_bytes += p.nbytes;
    plan.push_back(std::move(p));
    sources.push_back({permute && names::is_rope_permuted_tensor(name),
                       arch->hf_norm_plus_one && t.kind == TensorKind::kNorm, nullptr});
  }
  rep.n_tensors = static_cast<int>(plan.size());

  GgufWriter meta;
  std::string model_name = std::filesystem::path(hf_dir).lexically_normal().filename().string();
  if (model_name.empty())
    model_name = std::filesystem::path(hf_dir).parent_path().filename().string();
  write_metadata(meta, config, model_name, o.type);
  if (arch->write_gguf) LOOM_RETURN_IF_ERROR(arch->write_gguf(meta, config));
  // The tokenizer goes in when loom can express it in GGUF; otherwise the weights are still
  // worth converting, so the reason becomes a note rather than a failure. Its vocabulary may
  // be larger than the model's n_vocab (padded tables, test fixtures): written as is.
  bool tokenizer = false;
  if (std::filesystem::exists(hf_dir + "/tokenizer.json")) {
    auto tok = tok::export_hf_tokenizer(hf_dir, &meta);
    if (!tok.is_ok()) {
      rep.notes.push_back("tokenizer not embedded, the GGUF has no tokenizer: " +
                          tok.status().message());
    } else {
      tokenizer = true;
      for (auto& note : tok->notes) rep.notes.push_back("tokenizer: " + note);
    }
  }
  // Without one, the file says so as llama.cpp reads it (a vocabulary of {arch}.vocab_size
  // placeholder tokens); llama.cpp refuses a file with no tokenizer.ggml.model at all.
  if (!tokenizer) meta.set_string(std::string(names::kTokenizerModel), "none");

  const int64_t D = config.head_dim;
  auto fill = [&](size_t index, uint8_t* dst) -> Status {
    const PlannedTensor& p = plan[index];
    const Source& s = sources[index];
    if (s.computed) return kernels::quantize_row(p.dtype, s.computed->data(), dst, p.ne[0]);
    const TensorView* view = find(p.name);  // made again if it was made (and freed) since
    if (!view) return internal_error("convert: tensor " + p.name + " disappeared");
    const int64_t cols = p.ne[0];
    int64_t rows = 1;  // every row of a matrix, or of each expert's in a stacked tensor
    for (size_t d = 1; d < p.ne.size(); ++d) rows *= p.ne[d];
    const uint64_t out_row = *row_bytes(p.dtype, cols);
    if (view->dtype == p.dtype && !s.permute && !s.plus_one) {  // MXFP4 experts: as they are
      for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * out_row, view->row(r), out_row);
      return Status::ok();
    }
    std::vector<float> row(cols), tmp;
    if (rows == 1 && s.permute) tmp.resize(cols);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src_row = s.permute && rows > 1 ? rope_permuted_source_row(r, D) : r;
      kernels::dequantize_row(view->dtype, view->row(src_row), row.data(), cols);
      if (s.plus_one)
        for (float& x : row) x += 1.0f;
      if (rows == 1 && s.permute) {  // a bias: permute its elements like rows
        for (int64_t i = 0; i < cols; ++i) tmp[i] = row[rope_permuted_source_row(i, D)];
        row.swap(tmp);
      }
      LOOM_RETURN_IF_ERROR(kernels::quantize_row(p.dtype, row.data(), dst + r * out_row, cols));
    }
    return Status::ok();
  };
  Status written = build_gguf_file(std::move(meta), plan, fill, out_path);
  release_made();
  return written;
}

}  // namespace loom
