#include "tools/quantize_model.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/thread_pool.h"
#include "format/file_type.h"
#include "model/tensor_names.h"
#include "tools/gguf_build.h"
#include "tools/synth.h"

namespace loom {
namespace {

struct TargetRow {
  std::string_view name;
  Dtype base;
  bool mix_m;
  std::string_view file_type;  // general.file_type, by its llama_ftype name (format/file_type.h)
};

constexpr TargetRow kTargets[] = {
    {"F32", Dtype::kF32, false, "F32"},
    {"F16", Dtype::kF16, false, "F16"},
    {"BF16", Dtype::kBF16, false, "BF16"},
    {"Q8_0", Dtype::kQ8_0, false, "Q8_0"},
    {"Q4_0", Dtype::kQ4_0, false, "Q4_0"},
    {"Q4_K", Dtype::kQ4_K, false, "Q4_K_S"},
    {"Q5_K", Dtype::kQ5_K, false, "Q5_K_S"},
    {"Q6_K", Dtype::kQ6_K, false, "Q6_K"},
    {"Q4_K_M", Dtype::kQ4_K, true, "Q4_K_M"},
    {"Q5_K_M", Dtype::kQ5_K, true, "Q5_K_M"},
    // llama.cpp's MXFP4_MOE: the experts' matrices MXFP4, every other matrix Q8_0.
    {"MXFP4_MOE", Dtype::kMXFP4, false, "MXFP4_MOE"},
    {"IQ4_NL", Dtype::kIQ4_NL, false, "IQ4_NL"},
    {"IQ4_XS", Dtype::kIQ4_XS, false, "IQ4_XS"},
    // llama.cpp's ternary types: the layer matrices ternary, token_embd Q4_K, the output Q6_K.
    {"TQ1_0", Dtype::kTQ1_0, false, "TQ1_0"},
    {"TQ2_0", Dtype::kTQ2_0, false, "TQ2_0"},
};

bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<int64_t> dims(const TensorView& v) {
  return {v.ne.begin(), v.ne.begin() + v.n_dims};
}

struct Prepared {
  std::vector<QuantizedTensor> decisions;
  std::vector<PlannedTensor> plan;
  GgufWriter meta;
  std::vector<std::string> notes;
};

Result<Prepared> prepare(const GgufFile& in, const QuantizeTarget& target,
                         const QuantizeOptions& o) {
  Prepared p;
  LOOM_ASSIGN_OR_RETURN(p.decisions, plan_quantization(in, target, o, &p.notes));
  for (const auto& d : p.decisions) {
    LOOM_ASSIGN_OR_RETURN(PlannedTensor t, plan_tensor(d.name, d.to, d.ne));
    p.plan.push_back(std::move(t));
  }
  p.meta.set_alignment(in.alignment());
  for (const auto& [k, v] : in.metadata()) p.meta.set(k, v);
  p.meta.set_u32(std::string(names::kGeneralFileType), target.file_type);
  if (dtype_info(target.base).quantized) p.meta.set_u32("general.quantization_version", 2);
  return p;
}

TensorFillFn make_fill(const GgufFile& in, const Prepared& p, ThreadPool& pool) {
  return [&in, &p, &pool](size_t i, uint8_t* dst) -> Status {
    const GgufTensorInfo* src = in.find_tensor(p.plan[i].name);
    LOOM_CHECK(src != nullptr);
    const TensorView& v = src->view;
    const Dtype to = p.plan[i].dtype;
    if (v.dtype == to) {
      std::copy_n(static_cast<const uint8_t*>(v.data), v.nbytes, dst);
      return Status::ok();
    }
    const int64_t cols = v.cols(), rows = v.rows();
    const uint64_t in_rb = v.row_stride(), out_rb = p.plan[i].nbytes / static_cast<uint64_t>(rows);
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
    return parallel_row_chunks(pool, rows, cols, [&](int64_t, int64_t r0, int64_t nr, int thread) {
      std::vector<float>& buf = scratch[static_cast<size_t>(thread)];
      buf.resize(static_cast<size_t>(nr * cols));
      decode_rows(v.dtype, static_cast<const uint8_t*>(v.data) + r0 * in_rb, buf.data(), nr, cols);
      return encode_rows(to, buf.data(), dst + r0 * out_rb, nr, cols);
    });
  };
}

void fill_report(const Prepared& p, const GgufFile& in, uint64_t bytes_out,
                 QuantizeReport* report) {
  if (!report) return;
  report->tensors = p.decisions;
  report->notes = p.notes;
  report->bytes_in = 0;
  for (const auto& t : in.tensors()) report->bytes_in += t.view.nbytes;
  report->bytes_out = bytes_out;
}

}  // namespace

Result<QuantizeTarget> parse_quantize_target(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& r : kTargets)
    if (r.name == upper)
      return QuantizeTarget{std::string(r.name), r.base, r.mix_m,
                            static_cast<uint32_t>(file_type_value(r.file_type).value())};
  return invalid_argument("unknown quantization type '" + std::string(name) +
                          "' (choose one of: " + quantize_target_names() + ")");
}

std::string quantize_target_names() {
  std::string s;
  for (const auto& r : kTargets) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

Result<std::vector<QuantizedTensor>> plan_quantization(const GgufFile& in,
                                                       const QuantizeTarget& target,
                                                       const QuantizeOptions& o,
                                                       std::vector<std::string>* notes) {
  int n_attn_v = 0, n_ffn_down = 0;
  bool has_output = false;
  for (const auto& t : in.tensors()) {
    auto l = names::parse_layer_tensor(t.name);
    if (l && l->suffix == names::kAttnV) ++n_attn_v;
    if (l && (l->suffix == names::kFfnDown || l->suffix == names::kFfnDownExps)) ++n_ffn_down;
    if (t.name == names::kOutput) has_output = true;
  }
  std::vector<QuantizedTensor> out;
  FallbackNotes fallbacks;
  int i_attn_v = 0;
  for (const auto& t : in.tensors()) {
    const TensorView& v = t.view;
    QuantizedTensor q{t.name, v.dtype, v.dtype, dims(v)};
    const auto layer = names::parse_layer_tensor(t.name);
    // MoE routers stay as they are, as llama.cpp leaves them: small, and every token's choice
    // of experts depends on them.
    const bool router =
        layer && (layer->suffix == names::kFfnGateInp || layer->suffix == names::kFfnGateInpShexp);
    // A Gated DeltaNet layer's convolution taps ({K, C}) stay F32, as llama.cpp leaves them.
    const bool conv = layer && layer->suffix == names::kSsmConv1d;
    const bool matrix = v.n_dims >= 2 && ends_with(t.name, ".weight") && !router && !conv;
    if (!matrix) {
      // Norms and biases stay full precision: they are tiny and every token reads them.
      if (v.dtype == Dtype::kF16 || v.dtype == Dtype::kBF16) q.to = Dtype::kF32;
      out.push_back(std::move(q));
      continue;
    }
    if (dtype_info(v.dtype).quantized && !o.allow_requantize)
      return invalid_argument("tensor " + t.name + " is already quantized (" +
                              std::string(dtype_name(v.dtype)) +
                              "); quantize from an F32/F16/BF16 GGUF, or allow requantizing "
                              "(--allow-requantize) and accept the extra error");
    if (!dtype_info(v.dtype).quantized && v.dtype != Dtype::kF32 && v.dtype != Dtype::kF16 &&
        v.dtype != Dtype::kBF16)
      return unsupported("tensor " + t.name + " has type " + std::string(dtype_name(v.dtype)) +
                         ", which loom does not quantize");
    Dtype want = target.base;
    if (want == Dtype::kMXFP4) want = matrix_type_for(want, v.n_dims == 3);
    if (want == Dtype::kTQ1_0 || want == Dtype::kTQ2_0) {
      if (t.name == names::kOutput || (!has_output && t.name == names::kTokenEmbd))
        want = Dtype::kQ6_K;
      else if (t.name == names::kTokenEmbd)
        want = Dtype::kQ4_K;
    }
    if (target.mix_m) {
      auto l = names::parse_layer_tensor(t.name);
      const bool is_output =
          t.name == names::kOutput || (!has_output && t.name == names::kTokenEmbd);
      if (is_output) {
        want = Dtype::kQ6_K;
      } else if (l && l->suffix == names::kAttnV) {
        if (use_more_bits(i_attn_v, n_attn_v)) want = Dtype::kQ6_K;
        ++i_attn_v;
      } else if (l && (l->suffix == names::kFfnDown || l->suffix == names::kFfnDownExps)) {
        if (use_more_bits(l->layer, n_ffn_down)) want = Dtype::kQ6_K;
      }
    }
    q.to = fit_matrix_type(want, v.cols());
    if (q.to != want) fallbacks.add(v.cols(), want, q.to);
    out.push_back(std::move(q));
  }
  if (notes)
    for (auto& line : fallbacks.lines()) notes->push_back(std::move(line));
  return out;
}

Status quantize_model_file(const std::string& in_path, const std::string& out_path,
                           const QuantizeTarget& target, const QuantizeOptions& options,
                           QuantizeReport* report) {
  std::error_code ec;
  if (std::filesystem::exists(out_path, ec) && std::filesystem::equivalent(in_path, out_path, ec))
    return invalid_argument("output " + out_path + " is the input file; write to a new file");
  LOOM_ASSIGN_OR_RETURN(GgufFile in, GgufFile::open(in_path));
  LOOM_ASSIGN_OR_RETURN(Prepared p, prepare(in, target, options));
  ThreadPool pool(options.n_threads);
  LOOM_RETURN_IF_ERROR(
      build_gguf_file(std::move(p.meta), p.plan, make_fill(in, p, pool), out_path));
  uint64_t out_bytes = 0;
  for (const auto& t : p.plan) out_bytes += t.nbytes;
  fill_report(p, in, out_bytes, report);
  return Status::ok();
}

Result<std::shared_ptr<std::vector<uint8_t>>> quantize_model_bytes(const GgufFile& in,
                                                                   const QuantizeTarget& target,
                                                                   const QuantizeOptions& options,
                                                                   QuantizeReport* report) {
  LOOM_ASSIGN_OR_RETURN(Prepared p, prepare(in, target, options));
  ThreadPool pool(options.n_threads);
  LOOM_ASSIGN_OR_RETURN(auto bytes,
                        build_gguf_bytes(std::move(p.meta), p.plan, make_fill(in, p, pool)));
  uint64_t out_bytes = 0;
  for (const auto& t : p.plan) out_bytes += t.nbytes;
  fill_report(p, in, out_bytes, report);
  return bytes;
}

}  // namespace loom
