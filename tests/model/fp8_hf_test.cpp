// FP8 checkpoints as DeepSeek-V3 and Qwen3's "-FP8" releases are published: every linear
// weight as F8_E4M3 codes with a float scale per block (`NAME_scale_inv`, multiplied despite
// its name), config.json's quantization_config {"quant_method": "fp8", "weight_block_size"}.
// The fixtures' F32 projections are quantized here (blocks of 16 x 24, which divide neither
// dimension of most matrices, so a transposed or misplaced scale shows), and loom must compute
// exactly what the BF16 twin computes: the same checkpoint holding each weight's value, code
// times scale, rounded to BF16 (what loom dequantizes to, as a BF16 release would hold). The
// codes' values and the rounding are computed here independently of loom.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "format/safetensors.h"
#include "model/bind.h"
#include "model/hf_cases.h"
#include "model/hf_fp8.h"
#include "model/hf_shards.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "tools/convert.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBlockRows = 16, kBlockCols = 24;

// E4M3: (8 + m) * 2^(e - 10) for e > 0, m * 2^-9 for e = 0; S.1111.111 is NaN.
float e4m3_value(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                         : std::ldexp(static_cast<float>(8 + m), e - 10);
  return code & 0x80 ? -v : v;
}

uint8_t nearest_e4m3(float x) {
  uint8_t best = 0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // NaN
    if (std::fabs(e4m3_value(static_cast<uint8_t>(c)) - x) < std::fabs(e4m3_value(best) - x))
      best = static_cast<uint8_t>(c);
  }
  return best;
}

uint16_t round_to_bf16(float f) {  // round to nearest, ties to even
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

using Tensor = test::CheckpointTensor;
using test::write_safetensors;

void write_config(const std::string& src, const std::string& dir,
                  const nlohmann::json& quantization) {
  std::ifstream in(src + "/config.json");
  nlohmann::json c = nlohmann::json::parse(in);
  if (!quantization.is_null()) c["quantization_config"] = quantization;
  std::ofstream(dir + "/config.json") << c.dump(2);
}

// The fixture as an FP8 checkpoint (`fp8`) and its BF16 twin.
void quantize_fixture(const std::string& src, std::map<std::string, Tensor>* fp8,
                      std::map<std::string, Tensor>* twin) {
  auto st = SafetensorsModel::open(src);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  for (const auto& [name, v] : st->tensors()) {
    ASSERT_EQ(v.dtype, Dtype::kF32) << name;
    const auto* f = static_cast<const float*>(v.data);
    std::vector<int64_t> shape;
    for (int d = v.n_dims - 1; d >= 0; --d) shape.push_back(v.ne[d]);
    Tensor plain{"F32", shape, std::vector<uint8_t>(v.nbytes)};
    std::memcpy(plain.bytes.data(), f, v.nbytes);
    // The releases quantize the linear layers (attention and expert projections), not the
    // embeddings, the output, norms or the router.
    if (v.n_dims != 2 || (!name.ends_with("_proj.weight") && !name.ends_with("_mqa.weight"))) {
      (*fp8)[name] = (*twin)[name] = plain;
      continue;
    }
    const int64_t R = shape[0], C = shape[1];
    const int64_t SR = (R + kBlockRows - 1) / kBlockRows, SC = (C + kBlockCols - 1) / kBlockCols;
    std::vector<float> scale(SR * SC, 0.0f);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        float& s = scale[(r / kBlockRows) * SC + c / kBlockCols];
        s = std::max(s, std::fabs(f[r * C + c]) / 448.0f);
      }
    Tensor codes{"F8_E4M3", shape, std::vector<uint8_t>(R * C)};
    Tensor values{"BF16", shape, std::vector<uint8_t>(R * C * 2)};
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const float s = scale[(r / kBlockRows) * SC + c / kBlockCols];
        const uint8_t q = nearest_e4m3(s > 0 ? f[r * C + c] / s : 0.0f);
        codes.bytes[r * C + c] = q;
        const uint16_t b = round_to_bf16(e4m3_value(q) * s);
        std::memcpy(&values.bytes[(r * C + c) * 2], &b, 2);
      }
    Tensor scales{"F32", {SR, SC}, std::vector<uint8_t>(scale.size() * 4)};
    std::memcpy(scales.bytes.data(), scale.data(), scales.bytes.size());
    (*fp8)[name] = std::move(codes);
    (*fp8)[name + "_scale_inv"] = std::move(scales);
    (*twin)[name] = std::move(values);
  }
}

std::vector<float> logits_of(Model& m, const std::vector<int32_t>& tokens) {
  auto kv = KvCache::create(m.config(), 4, 16, Dtype::kF32).value();
  auto out = test::run_sequence(m, *kv, tokens, 64);
  EXPECT_TRUE(out.is_ok());
  return out.is_ok() ? *out : std::vector<float>();
}

class Fp8Checkpoint : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    src_ = test::fixture(GetParam());
    root_ =
        fs::temp_directory_path() / ("loom_fp8_" + GetParam() + "_" + std::to_string(::getpid()));
    // The same directory name: convert names the model after it.
    fp8_dir_ = (root_ / "fp8" / "model").string();
    twin_dir_ = (root_ / "twin" / "model").string();
    for (const std::string& d : {fp8_dir_, twin_dir_}) fs::create_directories(d);
    quantize_fixture(src_, &fp8_, &twin_);
    write_safetensors(fp8_dir_ + "/model.safetensors", fp8_);
    write_safetensors(twin_dir_ + "/model.safetensors", twin_);
    write_config(src_, fp8_dir_, quantization_);
    write_config(src_, twin_dir_, nullptr);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string src_, fp8_dir_, twin_dir_;
  fs::path root_;
  std::map<std::string, Tensor> fp8_, twin_;
  nlohmann::json quantization_ = {{"quant_method", "fp8"},
                                  {"weight_block_size", {kBlockRows, kBlockCols}},
                                  {"activation_scheme", "dynamic"},
                                  {"fmt", "e4m3"}};
};

TEST_P(Fp8Checkpoint, ComputesWhatItsBf16TwinDoes) {
  int quantized = 0;
  for (const auto& [name, t] : fp8_) quantized += t.dtype == "F8_E4M3";
  ASSERT_GT(quantized, 10);
  ModelLoadOptions background;
  background.n_threads = 2;
  background.repack_in_background = true;
  auto m = Model::load(fp8_dir_, background);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto t = Model::load(twin_dir_, {2});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  // Loading dequantizes every linear weight, held by the loader until the kernel-ready copies
  // replace it (made in the background: the model above may have freed some already).
  auto bound = bind_hf_dir(fp8_dir_);
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  const uint64_t made = bound->weights.loader_made_bytes();
  uint64_t dequantized = 0;
  for (const auto& [name, t] : twin_)
    if (fp8_.at(name).dtype == "F8_E4M3") dequantized += t.bytes.size();
  EXPECT_GE(made, dequantized);
  // Once the copies are done, the views read them and the loader's are freed: the weights are
  // not held twice.
  for (int i = 0; i < 500 && (*m)->memory_use().loader_made > 0; ++i) {
    logits_of(**m, {1, 2});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*m)->memory_use().loader_made, 0u) << "of " << made;
  const int64_t V = (*m)->config().n_vocab;
  for (const test::HfCase& c : test::read_cases(src_)) {
    const std::vector<float> got = logits_of(**m, c.tokens), want = logits_of(**t, c.tokens);
    EXPECT_EQ(got, want);
    // And near the F32 model transformers ran (FP8 keeps 4 significant bits; a tiny random
    // model amplifies their error, but a scale used as a divisor would be far off).
    EXPECT_LT(test::row_rel_err(got, c.logits, V), 1.0);
  }
  // loom convert writes the dequantized weights: the GGUF of the BF16 twin, byte for byte.
  auto convert = [&](const std::string& dir, const std::string& name) {
    const std::string out = (root_ / name).string();
    ConvertOptions opts;
    opts.type = Dtype::kBF16;
    const Status cs = convert_hf_to_gguf(dir, out, opts);
    EXPECT_TRUE(cs.is_ok()) << cs.message();
    std::ifstream in(out, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string from_fp8 = convert(fp8_dir_, "fp8.gguf");
  EXPECT_GT(from_fp8.size(), 1000u);
  EXPECT_TRUE(from_fp8 == convert(twin_dir_, "twin.gguf"));
}

TEST_P(Fp8Checkpoint, BadQuantizationIsNamed) {
  auto load_error = [&](const nlohmann::json& q) {
    write_config(src_, fp8_dir_, q);
    auto m = Model::load(fp8_dir_, {1});
    return m.is_ok() ? std::string("loaded") : m.status().message();
  };
  std::string msg = load_error({{"quant_method", "gptq"}, {"bits", 4}});
  EXPECT_NE(msg.find("quant_method 'gptq' is not supported"), std::string::npos) << msg;
  // No weight_block_size: 128 x 128, as transformers, which these scales do not fit.
  msg = load_error({{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}});
  EXPECT_NE(msg.find("_scale_inv' must be F32 or BF16 of shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(blocks of 128 x 128"), std::string::npos) << msg;
  msg = load_error(nullptr);
  EXPECT_NE(msg.find("is F8_E4M3, but config.json declares no"), std::string::npos) << msg;
  // A scale of the wrong shape (the block size the file was not written with).
  msg = load_error({{"quant_method", "fp8"}, {"weight_block_size", {kBlockCols, kBlockRows}}});
  EXPECT_NE(msg.find("_scale_inv' must be F32 or BF16 of shape"), std::string::npos) << msg;
  // A missing scale tensor.
  write_config(src_, fp8_dir_, quantization_);
  for (auto it = fp8_.begin(); it != fp8_.end(); ++it)
    if (it->first.ends_with("_scale_inv")) {
      fp8_.erase(it);
      break;
    }
  write_safetensors(fp8_dir_ + "/model.safetensors", fp8_);
  auto m = Model::load(fp8_dir_, {1});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("has no '"), std::string::npos) << m.status().message();
  // A config that still says fp8 over a checkpoint of plain tensors: loads as it is.
  write_config(src_, twin_dir_, quantization_);
  auto twin = Model::load(twin_dir_, {1});
  EXPECT_TRUE(twin.is_ok()) << twin.status().message();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8Checkpoint, ::testing::Values("deepseek_v3", "qwen3_moe"));

// A Llama-shaped FP8 checkpoint large enough that its copies take a few forward calls
// (16 layers of width 512: 67M weights, 134 MB dequantized): random codes, one scale per
// 128 x 128 block.
void write_random_fp8_llama(const std::string& dir) {
  constexpr int64_t E = 512, F = 2048, L = 16, V = 512, D = 64, H = 8, KV = 4;
  fs::create_directories(dir);
  nlohmann::json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", E},
      {"intermediate_size", F},
      {"num_hidden_layers", L},
      {"num_attention_heads", H},
      {"num_key_value_heads", KV},
      {"head_dim", D},
      {"vocab_size", V},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"max_position_embeddings", 256},
      {"tie_word_embeddings", false},
      {"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}};
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::mt19937 rng(11);
  auto plain = [&](std::vector<int64_t> shape, bool ones) {
    const int64_t n = shape.size() == 1 ? shape[0] : shape[0] * shape[1];
    std::vector<float> v(n);
    std::normal_distribution<float> d(0.0f, 0.1f);
    for (float& x : v) x = ones ? 1.0f : d(rng);
    Tensor t{"F32", shape, std::vector<uint8_t>(n * 4)};
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  };
  std::map<std::string, Tensor> tensors;
  auto fp8 = [&](const std::string& name, int64_t rows, int64_t cols) {
    Tensor codes{"F8_E4M3", {rows, cols}, std::vector<uint8_t>(rows * cols)};
    for (uint8_t& c : codes.bytes) {
      c = static_cast<uint8_t>(rng());
      if ((c & 0x7F) == 0x7F) c ^= 1;  // not NaN
    }
    tensors[name] = std::move(codes);
    const int64_t n = ((rows + 127) / 128) * ((cols + 127) / 128);
    Tensor scales{"F32", {(rows + 127) / 128, (cols + 127) / 128}, std::vector<uint8_t>(n * 4)};
    const std::vector<float> s(n, 0.1f / 448.0f);
    std::memcpy(scales.bytes.data(), s.data(), scales.bytes.size());
    tensors[name + "_scale_inv"] = std::move(scales);
  };
  tensors["model.embed_tokens.weight"] = plain({V, E}, false);
  tensors["lm_head.weight"] = plain({V, E}, false);
  tensors["model.norm.weight"] = plain({E}, true);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    tensors[p + "input_layernorm.weight"] = plain({E}, true);
    tensors[p + "post_attention_layernorm.weight"] = plain({E}, true);
    fp8(p + "self_attn.q_proj.weight", H * D, E);
    fp8(p + "self_attn.k_proj.weight", KV * D, E);
    fp8(p + "self_attn.v_proj.weight", KV * D, E);
    fp8(p + "self_attn.o_proj.weight", E, H * D);
    fp8(p + "mlp.gate_proj.weight", F, E);
    fp8(p + "mlp.up_proj.weight", F, E);
    fp8(p + "mlp.down_proj.weight", E, F);
  }
  write_safetensors(dir + "/model.safetensors", tensors);
}

// The checkpoint above, loaded with its copies made in the background.
class Fp8Load : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("loom_fp8_llama_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_random_fp8_llama(dir_.string());
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result<std::unique_ptr<Model>> load_in_background() {
    ModelLoadOptions o;
    o.n_threads = 2;
    o.repack_in_background = true;
    return Model::load(dir_.string(), o);
  }
  fs::path dir_;
};

// What the loader dequantized is freed matrix by matrix as the background copies replace it,
// not all at once after the last copy: a load peaks near the larger of the two, not at both.
TEST_F(Fp8Load, LoaderMemoryShrinksAsTheCopiesAreMade) {
  // How many different amounts the loader holds between forward calls while the copies are
  // made: the whole, some partial ones, none. A loaded machine may pause this thread for all
  // of the copying; a few tries.
  size_t most = 0;
  for (int attempt = 0; attempt < 4 && most < 3; ++attempt) {
    auto m = load_in_background();
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    std::vector<uint64_t> seen = {(*m)->memory_use().loader_made};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (seen.back() > 0 && std::chrono::steady_clock::now() < deadline) {
      logits_of(**m, {1});
      const uint64_t now = (*m)->memory_use().loader_made;
      EXPECT_LE(now, seen.back()) << "the loader's memory grew";
      if (now != seen.back()) seen.push_back(now);
    }
    EXPECT_EQ(seen.back(), 0u) << "never freed";
    most = std::max(most, seen.size());
  }
  EXPECT_GE(most, 3u) << "freed all at once";
}

// An idle model (a server before its first request) frees it too: the repacker switches the
// views itself between steps, so no forward call is needed.
TEST_F(Fp8Load, IdleModelFreesLoaderMemoryWithoutAStep) {
  auto m = load_in_background();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const uint64_t made = (*m)->memory_use().loader_made;  // less if copies were switched already
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((*m)->memory_use().loader_made > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ((*m)->memory_use().loader_made, 0u) << "of " << made;
  EXPECT_TRUE((*m)->weight_copies_made()());
  // And it computes what an up-front load does.
  auto up_front = Model::load(dir_.string(), {2});
  ASSERT_TRUE(up_front.is_ok()) << up_front.status().message();
  EXPECT_EQ(logits_of(**m, {1, 2, 3}), logits_of(**up_front, {1, 2, 3}));
}

TEST(Fp8E4M3, KnownValues) {
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);  // the largest
  EXPECT_EQ(e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x3C), 1.5f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7F) != 0x7F) {
      EXPECT_EQ(e4m3_to_float(c), e4m3_value(c)) << c;
    }
}

}  // namespace
}  // namespace loom
