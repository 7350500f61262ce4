// gpt-oss as OpenAI publishes it on Hugging Face: each layer's expert matrices as MXFP4, U8
// `NAME_blocks` [X][R][G][16] and `NAME_scales` [X][R][G] (R output rows, G blocks of 32),
// which transformers dequantizes as FP4 code of element 2i in the low nibble of byte i and of
// 2i + 1 in the high one, times 2^(scale - 127). The tiny gpt_oss fixture's F32 experts are
// written in that layout here (quantized with loom's MXFP4 quantizer); loom must load the
// checkpoint, build expert matrices that dequantize exactly to transformers' reading of those
// bytes, compute what its twin does (the same checkpoint with those values in F32), and
// convert it to a GGUF that keeps those MXFP4 bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/hf_cases.h"
#include "model/hf_shards.h"
#include "model/hf_tensors.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "tools/convert.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// E2M1 codes as transformers' FP4_VALUES reads them.
constexpr float kFp4[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

using Tensor = test::CheckpointTensor;
using test::write_safetensors;

Tensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  Tensor t{"F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// One expert matrix given as its output rows ([X][R][C] floats): quantized with loom's MXFP4
// quantizer, then laid out as the HF checkpoint's blocks and scales; `dequantized` gets
// transformers' reading of those bytes, in the same [X][R][C] order.
void to_hf_mxfp4(const std::vector<float>& rows, int64_t X, int64_t R, int64_t C, Tensor* blocks,
                 Tensor* scales, std::vector<float>* dequantized) {
  const int64_t G = C / 32;
  *blocks = {"U8", {X, R, G, 16}, std::vector<uint8_t>(X * R * G * 16, 0)};
  *scales = {"U8", {X, R, G}, std::vector<uint8_t>(X * R * G)};
  dequantized->assign(X * R * C, 0.0f);
  std::vector<kernels::BlockMxfp4> q(G);
  for (int64_t xr = 0; xr < X * R; ++xr) {
    ASSERT_TRUE(kernels::quantize_row(Dtype::kMXFP4, &rows[xr * C], q.data(), C).is_ok());
    for (int64_t g = 0; g < G; ++g) {
      scales->bytes[xr * G + g] = q[g].e;
      for (int k = 0; k < 32; ++k) {  // GGUF: element k in qs[k % 16], low nibble first
        const uint8_t code = k < 16 ? q[g].qs[k] & 0x0F : q[g].qs[k - 16] >> 4;
        blocks->bytes[(xr * G + g) * 16 + k / 2] |= static_cast<uint8_t>(code << (k % 2 ? 4 : 0));
      }
      for (int k = 0; k < 32; ++k) {  // transformers: lut[lo] at 2i, lut[hi] at 2i + 1
        const uint8_t byte = blocks->bytes[(xr * G + g) * 16 + k / 2];
        const uint8_t code = k % 2 ? byte >> 4 : byte & 0x0F;
        (*dequantized)[xr * C + g * 32 + k] =
            std::ldexp(kFp4[code], static_cast<int>(q[g].e) - 127);
      }
    }
  }
}

TEST(GptOssHfMxfp4, LoadsAsTransformersReadsIt) {
  const std::string src = test::fixture("gpt_oss");
  auto st = SafetensorsModel::open(src);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  auto cfg = config_from_hf_dir(src);
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  const int64_t X = cfg->moe.n_expert, E = cfg->n_embd, F = cfg->moe.n_ff_exp;

  std::map<std::string, Tensor> quantized, twin;
  // Expected GGUF rows per expert matrix: [X][rows][cols] floats.
  std::map<std::string, std::vector<float>> want;
  for (const auto& [name, v] : st->tensors()) {
    ASSERT_EQ(v.dtype, Dtype::kF32) << name;
    const auto* f = static_cast<const float*>(v.data);
    std::vector<float> values(f, f + v.numel());
    std::vector<int64_t> shape;
    for (int d = v.n_dims - 1; d >= 0; --d) shape.push_back(v.ne[d]);
    const bool gate_up = name.ends_with("mlp.experts.gate_up_proj");
    const bool down = name.ends_with("mlp.experts.down_proj");
    if (!gate_up && !down) {
      quantized[name] = twin[name] = f32_tensor(shape, values);
      continue;
    }
    // gate_up_proj [X][E][2F] and down_proj [X][F][E]: inputs first; the blocks hold rows.
    const int64_t in = gate_up ? E : F, out = gate_up ? 2 * F : E;
    std::vector<float> rows(X * out * in), deq;
    for (int64_t x = 0; x < X; ++x)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          rows[(x * out + o) * in + i] = values[(x * in + i) * out + o];
    Tensor blocks, scales;
    to_hf_mxfp4(rows, X, out, in, &blocks, &scales, &deq);
    quantized[name + "_blocks"] = std::move(blocks);
    quantized[name + "_scales"] = std::move(scales);
    std::vector<float> back(values.size());  // the twin: dequantized, in the F32 layout
    for (int64_t x = 0; x < X; ++x)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) back[(x * in + i) * out + o] = deq[(x * out + o) * in + i];
    twin[name] = f32_tensor(shape, back);
    const std::string layer = name.substr(0, name.find(".mlp."));
    const std::string blk = "blk." + layer.substr(layer.rfind('.') + 1);
    if (down) {
      want[blk + ".ffn_down_exps.weight"] = deq;
      continue;
    }
    std::vector<float> g(X * F * E), u(X * F * E);  // gate rows even, up rows odd
    for (int64_t x = 0; x < X; ++x)
      for (int64_t r = 0; r < F; ++r)
        for (int64_t i = 0; i < E; ++i) {
          g[(x * F + r) * E + i] = deq[(x * 2 * F + 2 * r) * E + i];
          u[(x * F + r) * E + i] = deq[(x * 2 * F + 2 * r + 1) * E + i];
        }
    want[blk + ".ffn_gate_exps.weight"] = g;
    want[blk + ".ffn_up_exps.weight"] = u;
  }
  ASSERT_EQ(want.size(), 3u * cfg->n_layer);

  const fs::path root =
      fs::temp_directory_path() / ("loom_gpt_oss_mxfp4_" + std::to_string(::getpid()));
  const std::string qdir = (root / "mxfp4").string(), tdir = (root / "twin").string();
  for (const std::string& d : {qdir, tdir}) {
    fs::create_directories(d);
    fs::copy_file(src + "/config.json", d + "/config.json");
  }
  write_safetensors(qdir + "/model.safetensors", quantized);
  write_safetensors(tdir + "/model.safetensors", twin);

  // The expert matrices loom builds: GGUF's MXFP4, reading back as transformers reads them.
  auto hf = HfTensors::open(qdir, *find_arch(cfg->arch), *cfg);
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  for (const auto& [gguf, rows] : want) {
    const TensorView* t = (*hf)->find(gguf);
    ASSERT_NE(t, nullptr) << gguf;
    EXPECT_EQ(t->dtype, Dtype::kMXFP4);
    const int64_t cols = t->cols();
    ASSERT_EQ(t->numel(), static_cast<int64_t>(rows.size())) << gguf;
    std::vector<float> got(cols);
    int64_t differ = 0;
    for (int64_t r = 0; r < t->rows(); ++r) {
      kernels::dequantize_row(Dtype::kMXFP4, t->row(r), got.data(), cols);
      for (int64_t c = 0; c < cols; ++c) differ += got[c] != rows[r * cols + c];
    }
    EXPECT_EQ(differ, 0) << gguf;
  }

  // The model on those experts computes what its F32 twin does (up to its int8 activations;
  // a wrong nibble or row would move every row far, as in hf_reference_test's MXFP4 twin).
  auto m = Model::load(qdir, {2});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto t = Model::load(tdir, {2});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const int64_t V = (*m)->config().n_vocab;
  int close = 0, rows = 0;
  for (const test::HfCase& c : test::read_cases(src)) {
    auto kv = KvCache::create((*m)->config(), 4, 16, Dtype::kF32).value();
    auto kv2 = KvCache::create((*t)->config(), 4, 16, Dtype::kF32).value();
    auto got = test::run_sequence(**m, *kv, c.tokens, 64);
    auto ref = test::run_sequence(**t, *kv2, c.tokens, 64);
    ASSERT_TRUE(got.is_ok() && ref.is_ok());
    for (size_t r = 0; r * V < got->size(); ++r, ++rows)
      close += test::rel_err(&(*got)[r * V], &(*ref)[r * V], V) < 0.02;
  }
  EXPECT_GE(close, rows / 2) << close << " of " << rows;

  // loom convert keeps the experts' MXFP4 bytes (as llama.cpp's converter does): the GGUF,
  // F32 elsewhere, computes exactly what the checkpoint does.
  const std::string gguf = (root / "converted.gguf").string();
  ConvertOptions opts;
  opts.type = Dtype::kF32;
  const Status cs = convert_hf_to_gguf(qdir, gguf, opts);
  ASSERT_TRUE(cs.is_ok()) << cs.message();
  auto g = Model::load(gguf, {2});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  for (const test::HfCase& c : test::read_cases(src)) {
    auto kv = KvCache::create((*m)->config(), 4, 16, Dtype::kF32).value();
    auto kv2 = KvCache::create((*g)->config(), 4, 16, Dtype::kF32).value();
    auto from_hf = test::run_sequence(**m, *kv, c.tokens, 64);
    auto from_gguf = test::run_sequence(**g, *kv2, c.tokens, 64);
    ASSERT_TRUE(from_hf.is_ok() && from_gguf.is_ok());
    EXPECT_EQ(*from_gguf, *from_hf);
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace loom
