// Broken model files: every bad key or tensor is a returned error naming it, never an abort,
// a CHECK failure, a stack overflow or an allocation sized by a hostile number. The GGUF cases
// rewrite a synthesized model with one key (or tensor) changed; the config.json ones mutate a
// small valid config.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "backend/cpu/cpu_model.h"
#include "model/bind.h"
#include "model/config_reader.h"
#include "model/model.h"
#include "model/tensor_names.h"
#include "tools/synth.h"

namespace loom {
namespace {

// The preset's GGUF with `edit` applied to a writer holding its metadata and tensors; keys
// and tensors named in `drop` are left out. The writer reads tensor data when the bytes are
// made, here: what `edit` adds must outlive the call.
std::shared_ptr<std::vector<uint8_t>> mutated(const std::string& preset,
                                              const std::function<void(GgufWriter&)>& edit,
                                              const std::vector<std::string>& drop = {}) {
  auto so = parse_synth_spec("synth:" + preset);  // the preset's own architecture
  EXPECT_TRUE(so.is_ok()) << so.status().message();
  auto bytes = synth_model_bytes(*so);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  GgufWriter w;
  for (const auto& [key, value] : f->metadata())
    if (std::find(drop.begin(), drop.end(), key) == drop.end()) w.set(key, value);
  for (const GgufTensorInfo& t : f->tensors()) {
    if (std::find(drop.begin(), drop.end(), t.name) != drop.end()) continue;
    std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes).is_ok());
  }
  edit(w);
  // The tensors' bytes are copied into the output here, while `bytes` still holds them.
  return std::make_shared<std::vector<uint8_t>>(w.to_bytes());
}

Result<ModelConfig> config_of(const std::shared_ptr<std::vector<uint8_t>>& bytes) {
  LOOM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse_bytes(bytes));
  return config_from_gguf(f);
}

void expect_error(const Status& s, const std::string& fragment) {
  ASSERT_FALSE(s.is_ok()) << "expected an error naming " << fragment;
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

std::string key(std::string_view arch, std::string_view suffix) {
  return names::arch_key(arch, suffix);
}

TEST(GgufKeys, HugeBlockCountIsBoundedByTheTensors) {
  // Sized per-layer tables by it (bad_alloc) before; 0 blamed nextn_predict_layers.
  for (uint32_t n : {2147483647u, 1000000u, 0u}) {
    auto c = config_of(
        mutated("tiny", [&](GgufWriter& w) { w.set_u32(key("llama", names::kBlockCount), n); }));
    expect_error(c.status(), "llama.block_count = " + std::to_string(n));
  }
}

TEST(GgufKeys, PresentButInvalidOptionalKeysAreNamed) {
  const std::string kv = key("llama", names::kHeadCountKv);
  const std::pair<std::string, GgufValue> cases[] = {
      {kv, GgufValue::of_uint(GgufType::kU32, 0xFFFFFFFFu)},
      {kv, GgufValue::of_uint(GgufType::kU32, 0)},
      {key("llama", names::kKeyLength), GgufValue::of_uint(GgufType::kU32, 0xFFFFFFFFu)},
      {key("llama", names::kValueLength), GgufValue::of_string("16")},
      {key("llama", names::kRopeDimensionCount), GgufValue::of_string("16")},
      {key("llama", names::kRopeDimensionCount), GgufValue::of_uint(GgufType::kU32, 0xFFFFFFFFu)},
      {key("llama", names::kContextLength), GgufValue::of_uint(GgufType::kU32, 0)},
      {key("llama", names::kContextLength), GgufValue::of_uint(GgufType::kU32, 0xFFFFFFFFu)},
      {key("llama", names::kContextLength), GgufValue::of_int(GgufType::kI32, -1)},
      {key("llama", names::kContextLength), GgufValue::of_string("4096")},
      {key("llama", names::kRmsEps), GgufValue::of_float(GgufType::kF64, 1e300)},
      {key("llama", names::kRmsEps), GgufValue::of_float(GgufType::kF32, INFINITY)},
      {key("llama", names::kRmsEps), GgufValue::of_string("1e-5")},
      {key("llama", names::kRopeFreqBase), GgufValue::of_float(GgufType::kF32, NAN)},
  };
  for (const auto& [k, v] : cases) {
    auto c = config_of(mutated("tiny", [&](GgufWriter& w) { w.set(k, v); }));
    expect_error(c.status(), "GGUF metadata key " + k);
  }
  // Absent keys keep their defaults: the head count, head_dim from the embedding, and an
  // unknown context length.
  auto c = config_of(
      mutated("tiny", [](GgufWriter&) {},
              {kv, key("llama", names::kKeyLength), key("llama", names::kValueLength),
               key("llama", names::kRopeDimensionCount), key("llama", names::kContextLength)}));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->n_head_kv, c->n_head);
  EXPECT_EQ(c->head_dim, c->n_embd / c->n_head);
  EXPECT_EQ(c->context_length, 0);
}

TEST(GgufKeys, SlidingWindowOutOfRangeIsNamed) {
  // An int32 cast made it -1: a CHECK failure in the KV manager.
  for (auto [preset, arch] : {std::pair{"tiny-swa", "gemma3"}, {"tiny-gpt-oss", "gpt-oss"}}) {
    const std::string k = key(arch, names::kSlidingWindow);
    auto c = config_of(mutated(preset, [&](GgufWriter& w) { w.set_u32(k, 0xFFFFFFFFu); }));
    expect_error(c.status(), "GGUF metadata key " + k + " = 4294967295 is out of range");
    auto ok = config_of(mutated(preset, [&](GgufWriter& w) { w.set_u32(k, 7); }));
    ASSERT_TRUE(ok.is_ok()) << ok.status().message();
    EXPECT_EQ(ok->layers[0].window, 7);
  }
}

// gpt-oss's even layers slide: a file without its window (or a window of 0) is refused, as
// llama.cpp's loader refuses it, rather than run as a model of full-attention layers only.
TEST(GgufKeys, GptOssWithoutItsSlidingWindowIsRefused) {
  const std::string k = key("gpt-oss", names::kSlidingWindow);
  auto synthesized = config_of(mutated("tiny-gpt-oss", [](GgufWriter&) {}));
  ASSERT_TRUE(synthesized.is_ok()) << synthesized.status().message();  // synth writes it
  EXPECT_EQ(synthesized->layers[0].window, 8);
  EXPECT_EQ(synthesized->layers[1].window, 0);
  expect_error(config_of(mutated("tiny-gpt-oss", [](GgufWriter&) {}, {k})).status(), k);
  expect_error(config_of(mutated("tiny-gpt-oss", [&](GgufWriter& w) { w.set_u32(k, 0); })).status(),
               k);
  // Where the window is optional (Gemma 3 reads none as no sliding layers), no error.
  const std::string g = key("gemma3", names::kSlidingWindow);
  auto gemma = config_of(mutated("tiny-swa", [](GgufWriter&) {}, {g}));
  ASSERT_TRUE(gemma.is_ok()) << gemma.status().message();
}

TEST(GgufKeys, UnusedDenseWidthOfAnAllExpertModelSizesNothing) {
  // tiny-moe's every FFN is experts: feed_forward_length sizes no tensor, and once sized two
  // scratch buffers (2 × 2^31 floats a row: bad_alloc, or 21 GB before the OOM killer).
  auto huge = mutated("tiny-moe", [](GgufWriter& w) {
    w.set_u32(key("qwen3moe", names::kFeedForwardLength), 2147483647u);
  });
  auto base = mutated("tiny-moe", [](GgufWriter&) {});
  auto f = GgufFile::parse_bytes(huge);
  ASSERT_TRUE(f.is_ok());
  auto bound = bind_gguf(std::move(*f));
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  auto f0 = GgufFile::parse_bytes(base);
  ASSERT_TRUE(f0.is_ok());
  auto bound0 = bind_gguf(std::move(*f0));
  ASSERT_TRUE(bound0.is_ok()) << bound0.status().message();
  EXPECT_EQ(CpuModel::scratch_bytes(bound->config, 64, 1, 256, 2),
            CpuModel::scratch_bytes(bound0->config, 64, 1, 256, 2));
}

TEST(GgufTensors, MatrixOfATypeNoKernelComputesIsRefusedAtLoad) {
  // Failed a CHECK in the first matmul before; llama.cpp's newer 4-bit and 2-bit types (row
  // blocks of at most 64 here) read, and are refused by name. (The i-quants other than
  // IQ4_NL / IQ4_XS likewise; those two compute.)
  for (Dtype t : {Dtype::kI8, Dtype::kI32, Dtype::kQ8_1, Dtype::kNVFP4, Dtype::kQ2_0}) {
    const std::string name = "blk.0.attn_q.weight";
    const int64_t cols = 64, rows = 64;  // tiny's n_embd × n_head · head_dim
    std::vector<uint8_t> zeros(rows * (cols / dtype_info(t).block_size) *
                               dtype_info(t).block_bytes);
    auto bytes = mutated(
        "tiny",
        [&](GgufWriter& w) {
          ASSERT_TRUE(w.add_tensor(name, t, {cols, rows}, zeros.data(), zeros.size()).is_ok());
        },
        {name});
    auto f = GgufFile::parse_bytes(bytes);
    ASSERT_TRUE(f.is_ok()) << f.status().message();  // the file itself reads (inspect works)
    auto m = Model::from_gguf(std::move(*f));
    expect_error(m.status(), "tensor " + name + " has type " + std::string(dtype_name(t)));
  }
}

// ---- config.json ----

constexpr const char* kConfig = R"({
  "model_type": "llama", "vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "tie_word_embeddings": false})";

Result<ModelConfig> hf_with(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(kConfig);
  edit(j);
  return config_from_hf_json(j.dump(), "m/config.json");
}

TEST(HfConfigKeys, WrongJsonTypesAreNamed) {
  // json::value() threw nlohmann's type_error (an abort) for these.
  expect_error(hf_with([](auto& j) { j["tie_word_embeddings"] = "false"; }).status(),
               "m/config.json: \"tie_word_embeddings\" must be a boolean, got \"false\"");
  expect_error(hf_with([](auto& j) { j["model_type"] = 5; }).status(),
               "m/config.json: \"model_type\" must be a string, got 5");
  expect_error(hf_with([](auto& j) { j["mlp_bias"] = "no"; }).status(),
               "\"mlp_bias\" must be a boolean");
  expect_error(hf_with([](auto& j) { j["hidden_act"] = 3; }).status(),
               "\"hidden_act\" must be a string");
  expect_error(hf_with([](auto& j) {
                 j["rope_scaling"] = {{"rope_type", 7}};
               }).status(),
               "\"rope_type\" must be a string");
  expect_error(hf_with([](auto& j) {
                 j["model_type"] = "qwen2_moe";
                 j["num_experts"] = 4;
                 j["use_sliding_window"] = "no";
               }).status(),
               "\"use_sliding_window\" must be a boolean");
  expect_error(hf_with([](auto& j) { j["bos_token_id"] = 1ll << 40; }).status(),
               "\"bos_token_id\" must be a token id");
}

TEST(HfConfigKeys, OutOfRangeValuesAreNamed) {
  for (const char* v : {R"("x")", "5", "[]"})
    expect_error(hf_with([&](auto& j) { j["rope_scaling"] = nlohmann::json::parse(v); }).status(),
                 "\"rope_scaling\" must be an object");
  expect_error(hf_with([](auto& j) { j["rms_norm_eps"] = 1e300; }).status(),
               "\"rms_norm_eps\" must be in (0, 1]");
  expect_error(hf_with([](auto& j) { j["num_hidden_layers"] = 2147483647; }).status(),
               "\"num_hidden_layers\" 2147483647 is over 4096");
  expect_error(hf_with([](auto& j) { j["max_position_embeddings"] = 0; }).status(),
               "\"max_position_embeddings\" must be > 0");
  // Absent or null: unknown, for the run to be told (--max-model-len).
  auto c = hf_with([](auto& j) { j["max_position_embeddings"] = nullptr; });
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->context_length, 0);
}

TEST(HfConfigKeys, TruncatedJsonIsNotValidJson) {
  const std::string text = kConfig;
  auto c = config_from_hf_json(text.substr(0, text.size() / 2), "m/config.json");
  expect_error(c.status(), "m/config.json: not valid JSON");
  expect_error(c.status(), "line 3");
  EXPECT_EQ(c.status().message().find("json.exception"), std::string::npos) << c.status().message();
  expect_error(config_from_hf_json("[1, 2]", "m/config.json").status(),
               "m/config.json: not a JSON object");
}

// Copying the config or printing a deep value into a message would recurse once per level.
TEST(HfConfigKeys, DeeplyNestedConfigIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = kConfig;
  text.insert(text.rfind('}'), ", \"extra\": " + deep);
  expect_error(config_from_hf_json(text, "m/config.json").status(),
               "m/config.json: nests arrays and objects deeper than 128 levels");
}

}  // namespace
}  // namespace loom
