#include "model/hf_fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/fp16.h"

namespace loom {
namespace {

using json = nlohmann::json;

constexpr std::string_view kScaleSuffix = "_scale_inv";

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// quantization_config from config.json, or null when there is none (or no config.json).
Result<json> quantization_config(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in) return json();
  std::stringstream ss;
  ss << in.rdbuf();
  json config = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  // config_from_hf_dir reports a malformed config.json; nothing to add here.
  if (!config.is_object()) return json();
  auto q = config.find("quantization_config");
  return q == config.end() ? json() : *q;
}

// transformers' FineGrainedFP8Config: 128 x 128 blocks unless the config says otherwise.
Result<Fp8BlockSize> block_size_of(const json& q) {
  auto b = q.find("weight_block_size");
  if (b == q.end() || b->is_null()) return Fp8BlockSize{};
  if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_unsigned() ||
      !(*b)[1].is_number_unsigned() || (*b)[0].get<int64_t>() < 1 || (*b)[1].get<int64_t>() < 1)
    return invalid_file(
        "config.json: quantization_config.weight_block_size must be two positive "
        "integers, not " +
        b->dump());
  return Fp8BlockSize{(*b)[0].get<int64_t>(), (*b)[1].get<int64_t>()};
}

}  // namespace

Result<std::optional<Fp8BlockSize>> read_fp8_quantization(const std::string& dir,
                                                          const SafetensorsModel& st) {
  LOOM_ASSIGN_OR_RETURN(json q, quantization_config(dir));
  std::optional<Fp8BlockSize> block;
  if (q.is_object()) {
    auto m = q.find("quant_method");
    const std::string method = m != q.end() && m->is_string() ? m->get<std::string>() : "";
    if (method == "fp8") {
      // A checkpoint without F8_E4M3 tensors (dequantized, the config kept) reads as it is.
      if (st.f8_e4m3_names().empty()) return block;
      LOOM_ASSIGN_OR_RETURN(Fp8BlockSize b, block_size_of(q));
      block = b;
    } else if (method != "mxfp4") {  // gpt-oss: its experts' _blocks / _scales say it all
      return unsupported("config.json: quantization_config.quant_method " +
                         (method.empty() ? std::string("(none)") : "'" + method + "'") +
                         " is not supported; loom reads unquantized (F32, F16, BF16), fp8 "
                         "(block-scaled) and mxfp4 checkpoints");
    }
  }
  for (const std::string& name : st.f8_e4m3_names()) {
    if (!block)
      return unsupported("tensor '" + name +
                         "' is F8_E4M3, but config.json declares no block-scaled \"fp8\" "
                         "quantization_config");
    if (name.ends_with(kScaleSuffix)) return invalid_file("scale tensor '" + name + "' is F8_E4M3");
    const TensorView& w = *st.find(name);
    const std::string scale_name = name + std::string(kScaleSuffix);
    const TensorView* s = st.find(scale_name);
    if (!s)
      return unsupported("F8_E4M3 tensor '" + name + "' has no '" + scale_name +
                         "': loom reads block-scaled FP8 (one scale per tensor is not supported)");
    const int64_t want_cols = ceil_div(w.ne[0], block->cols);
    const int64_t want_rows = ceil_div(w.ne[1], block->rows);
    if (w.n_dims != 2 || s->n_dims != 2 || s->ne[0] != want_cols || s->ne[1] != want_rows ||
        (s->dtype != Dtype::kF32 && s->dtype != Dtype::kBF16))
      return invalid_file("'" + scale_name + "' must be F32 or BF16 of shape [" +
                          std::to_string(want_rows) + ", " + std::to_string(want_cols) +
                          "] (blocks of " + std::to_string(block->rows) + " x " +
                          std::to_string(block->cols) + " of the 2-D '" + name + "')");
  }
  return block;
}

float e4m3_to_float(uint8_t code) {
  const bool negative = code & 0x80;
  const int exponent = (code >> 3) & 0x0F;
  const int mantissa = code & 0x07;
  float v;
  if (exponent == 0x0F && mantissa == 0x07)
    v = std::nanf("");
  else if (exponent == 0)
    v = std::ldexp(static_cast<float>(mantissa) / 8.0f, -6);  // subnormal
  else
    v = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return negative ? -v : v;
}

void dequantize_fp8_blocks(const TensorView& codes, const TensorView& scales, Fp8BlockSize block,
                           std::vector<uint8_t>* bytes, TensorView* view) {
  float table[256];
  for (int c = 0; c < 256; ++c) table[c] = e4m3_to_float(static_cast<uint8_t>(c));
  const int64_t C = codes.ne[0], R = codes.ne[1], scale_cols = scales.ne[0];
  const auto* in = static_cast<const uint8_t*>(codes.data);
  auto scale = [&](int64_t r, int64_t c) {
    const int64_t i = (r / block.rows) * scale_cols + c / block.cols;
    return scales.dtype == Dtype::kF32 ? static_cast<const float*>(scales.data)[i]
                                       : bf16_to_f32(static_cast<const uint16_t*>(scales.data)[i]);
  };
  bytes->resize(static_cast<size_t>(R * C) * sizeof(uint16_t));
  auto* out = reinterpret_cast<uint16_t*>(bytes->data());
  // One scale lookup per block of columns. (Loading a 1.7 GB FP8 checkpoint is dominated by the
  // kernel zeroing the 3.2 GB of fresh pages this writes, not by this loop.)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c0 = 0; c0 < C; c0 += block.cols) {
      const float s = scale(r, c0);
      const int64_t end = std::min(C, c0 + block.cols);
      const uint8_t* row_in = in + r * C;
      uint16_t* row_out = out + r * C;
      for (int64_t c = c0; c < end; ++c) row_out[c] = f32_to_bf16(table[row_in[c]] * s);
    }
  *view = codes;
  view->dtype = Dtype::kBF16;
  view->nbytes = bytes->size();
}

}  // namespace loom
