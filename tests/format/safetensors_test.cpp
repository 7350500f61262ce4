// Safetensors: the real HF fixtures (shapes checked against config.json), sharded
// checkpoints built in a temp dir, and malformed / hostile files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "format_test_util.h"

namespace loom {
namespace {

using nlohmann::json;
using test::share;
using testing::HasSubstr;

// A safetensors file per the spec: u64 header length, JSON header padded with spaces to a
// multiple of 8, data region.
std::vector<uint8_t> make_file(const std::string& header_text, const std::vector<uint8_t>& data) {
  std::string h = header_text;
  while ((8 + h.size()) % 8) h += ' ';
  test::Bytes b;
  b.u64(h.size());
  b.raw(std::vector<uint8_t>(h.begin(), h.end()));
  b.raw(data);
  return b.bytes();
}

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

// Tensors laid out back to back in the given order; returns the file and each tensor's bytes.
std::vector<uint8_t> make_tensors(const std::vector<Entry>& entries, std::mt19937_64& rng,
                                  std::vector<std::vector<uint8_t>>* contents = nullptr) {
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  std::vector<uint8_t> data;
  for (const Entry& e : entries) {
    uint64_t n = e.dtype == "F32" ? 4 : 2;
    for (int64_t d : e.shape) n *= d;
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + n}}};
    std::vector<uint8_t> bytes = test::random_bytes(rng, n);
    if (contents) contents->push_back(bytes);
    data.insert(data.end(), bytes.begin(), bytes.end());
  }
  return make_file(h.dump(), data);
}

Status parse(const std::vector<uint8_t>& bytes) {
  auto r = SafetensorsFile::parse_bytes(share(bytes));
  return r.is_ok() ? Status::ok() : r.status();
}

// ggml order of an HF shape.
std::array<int64_t, 4> ne_of(std::vector<int64_t> hf) {
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  for (size_t i = 0; i < hf.size(); ++i) ne[i] = hf[hf.size() - 1 - i];
  return ne;
}

class HfFixture : public testing::TestWithParam<std::string> {};

TEST_P(HfFixture, ShapesMatchConfig) {
  const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/" + GetParam();
  const json cfg = json::parse(test::read_file(dir + "/config.json"));
  const int64_t hidden = cfg["hidden_size"], inter = cfg["intermediate_size"];
  const int64_t vocab = cfg["vocab_size"], n_layer = cfg["num_hidden_layers"];
  const int64_t n_head = cfg["num_attention_heads"], n_kv = cfg["num_key_value_heads"];
  const int64_t head_dim = cfg.value("head_dim", hidden / n_head);
  const bool tied = cfg.value("tie_word_embeddings", false);
  const bool qkv_bias = GetParam() == "qwen2";
  const bool qk_norm = GetParam() == "qwen3";

  auto m = SafetensorsModel::open(dir);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->num_shards(), 1u);
  std::map<std::string, std::vector<int64_t>> expect;  // HF shapes
  expect["model.embed_tokens.weight"] = {vocab, hidden};
  expect["model.norm.weight"] = {hidden};
  if (!tied) expect["lm_head.weight"] = {vocab, hidden};
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    expect[p + "input_layernorm.weight"] = {hidden};
    expect[p + "post_attention_layernorm.weight"] = {hidden};
    expect[p + "self_attn.q_proj.weight"] = {n_head * head_dim, hidden};
    expect[p + "self_attn.k_proj.weight"] = {n_kv * head_dim, hidden};
    expect[p + "self_attn.v_proj.weight"] = {n_kv * head_dim, hidden};
    expect[p + "self_attn.o_proj.weight"] = {hidden, n_head * head_dim};
    expect[p + "mlp.gate_proj.weight"] = {inter, hidden};
    expect[p + "mlp.up_proj.weight"] = {inter, hidden};
    expect[p + "mlp.down_proj.weight"] = {hidden, inter};
    if (qkv_bias) {
      expect[p + "self_attn.q_proj.bias"] = {n_head * head_dim};
      expect[p + "self_attn.k_proj.bias"] = {n_kv * head_dim};
      expect[p + "self_attn.v_proj.bias"] = {n_kv * head_dim};
    }
    if (qk_norm) {
      expect[p + "self_attn.q_norm.weight"] = {head_dim};
      expect[p + "self_attn.k_norm.weight"] = {head_dim};
    }
  }
  EXPECT_EQ(m->tensors().size(), expect.size());
  for (const auto& [name, shape] : expect) {
    SCOPED_TRACE(name);
    const TensorView* t = m->find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, Dtype::kF32);
    EXPECT_EQ(t->n_dims, static_cast<int>(shape.size()));
    EXPECT_EQ(t->ne, ne_of(shape));
    EXPECT_EQ(t->nbytes, static_cast<uint64_t>(t->numel()) * 4);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 4, 0u);
  }
  // An HF [rows, cols] weight: ne = {cols, rows}, row r = `cols` contiguous floats.
  const TensorView* q = m->find("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q->cols(), hidden);
  EXPECT_EQ(q->rows(), n_head * head_dim);

  // The bytes behind a view are the file's bytes at 8 + header length + data_offsets[0],
  // read here with plain file I/O.
  const std::vector<uint8_t> raw = test::read_file(dir + "/model.safetensors");
  uint64_t hlen;
  std::memcpy(&hlen, raw.data(), 8);
  const json header = json::parse(raw.begin() + 8, raw.begin() + 8 + hlen);
  const uint64_t begin = header["model.norm.weight"]["data_offsets"][0];
  const TensorView* norm = m->find("model.norm.weight");
  EXPECT_EQ(std::memcmp(norm->data, raw.data() + 8 + hlen + begin, norm->nbytes), 0);
  float first;
  std::memcpy(&first, norm->data, 4);
  EXPECT_TRUE(std::isfinite(first));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfFixture, testing::Values("llama", "qwen2", "qwen3"));

TEST(Safetensors, SingleFileAndOrder) {
  std::mt19937_64 rng(3);
  std::vector<std::vector<uint8_t>> contents;
  // F32 first, as the safetensors serializer orders them, so every tensor stays aligned.
  const std::vector<Entry> entries = {
      {"z.first", "F32", {3, 1, 2, 2}}, {"scalar", "F32", {}}, {"a.second", "BF16", {2, 3, 4}},
      {"m.third", "F16", {5}}};
  test::TempDir dir;
  test::write_file(dir.file("x.safetensors"), make_tensors(entries, rng, &contents));
  auto f = SafetensorsFile::open(dir.file("x.safetensors"));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 4u);
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsTensor& t = f->tensors()[i];  // sorted by data offset = file order
    EXPECT_EQ(t.name, entries[i].name);
    EXPECT_EQ(t.shape, entries[i].shape);
    EXPECT_EQ(std::memcmp(t.view.data, contents[i].data(), contents[i].size()), 0);
    EXPECT_EQ(f->find(entries[i].name), &t);
  }
  const TensorView& a = f->find("a.second")->view;
  EXPECT_EQ(a.dtype, Dtype::kBF16);
  EXPECT_EQ(a.n_dims, 3);
  EXPECT_EQ(a.ne, (std::array<int64_t, 4>{4, 3, 2, 1}));
  EXPECT_EQ(f->find("m.third")->view.dtype, Dtype::kF16);
  EXPECT_EQ(f->find("z.first")->view.dtype, Dtype::kF32);
  EXPECT_EQ(f->find("z.first")->view.n_dims, 4);
  EXPECT_EQ(f->find("z.first")->view.ne, (std::array<int64_t, 4>{2, 2, 1, 3}));
  EXPECT_EQ(f->find("scalar")->view.n_dims, 1);
  EXPECT_EQ(f->find("scalar")->view.nbytes, 4u);
  EXPECT_EQ(f->find("missing"), nullptr);

  // SafetensorsModel on a file path works too.
  auto m = SafetensorsModel::open(dir.file("x.safetensors"));
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->tensors().size(), 4u);
}

TEST(Safetensors, ShardedIndex) {
  std::mt19937_64 rng(11);
  test::TempDir dir;
  std::vector<std::vector<uint8_t>> c1, c2;
  const std::vector<Entry> s1 = {{"model.embed_tokens.weight", "BF16", {8, 4}},
                                 {"model.layers.0.mlp.up_proj.weight", "F16", {6, 4}}};
  const std::vector<Entry> s2 = {{"model.layers.0.mlp.down_proj.weight", "F32", {4, 6}},
                                 {"model.norm.weight", "F32", {4}}};
  test::write_file(dir.file("model-00001-of-00002.safetensors"), make_tensors(s1, rng, &c1));
  test::write_file(dir.file("model-00002-of-00002.safetensors"), make_tensors(s2, rng, &c2));
  json index = {{"metadata", {{"total_size", 123}}}, {"weight_map", json::object()}};
  for (const Entry& e : s1) index["weight_map"][e.name] = "model-00001-of-00002.safetensors";
  for (const Entry& e : s2) index["weight_map"][e.name] = "model-00002-of-00002.safetensors";
  test::write_file(dir.file("model.safetensors.index.json"), index.dump(2));

  auto m = SafetensorsModel::open(dir.path());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->num_shards(), 2u);
  ASSERT_EQ(m->tensors().size(), 4u);
  const TensorView* e = m->find("model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->ne, (std::array<int64_t, 4>{4, 8, 1, 1}));
  EXPECT_EQ(std::memcmp(e->data, c1[0].data(), c1[0].size()), 0);
  const TensorView* d = m->find("model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ne, (std::array<int64_t, 4>{6, 4, 1, 1}));
  EXPECT_EQ(std::memcmp(d->data, c2[0].data(), c2[0].size()), 0);
  EXPECT_EQ(std::memcmp(m->find("model.norm.weight")->data, c2[1].data(), 16), 0);

  // The index names a tensor the shard does not hold.
  index["weight_map"]["lm_head.weight"] = "model-00002-of-00002.safetensors";
  test::write_file(dir.file("model.safetensors.index.json"), index.dump());
  auto bad = SafetensorsModel::open(dir.path());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'lm_head.weight'"));

  // A shard that is not in the directory.
  index["weight_map"]["lm_head.weight"] = "model-00003-of-00002.safetensors";
  test::write_file(dir.file("model.safetensors.index.json"), index.dump());
  bad = SafetensorsModel::open(dir.path());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("model-00003-of-00002.safetensors"));

  // Path traversal out of the model directory.
  index["weight_map"]["lm_head.weight"] = "../model-00001-of-00002.safetensors";
  test::write_file(dir.file("model.safetensors.index.json"), index.dump());
  bad = SafetensorsModel::open(dir.path());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a plain file name"));

  // The same tensor stored in two shards.
  index["weight_map"].erase("lm_head.weight");
  test::write_file(dir.file("model-00002-of-00002.safetensors"),
                   make_tensors({{"model.norm.weight", "F32", {4}}, s1[0]}, rng));
  index["weight_map"].erase("model.layers.0.mlp.down_proj.weight");
  test::write_file(dir.file("model.safetensors.index.json"), index.dump());
  bad = SafetensorsModel::open(dir.path());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("more than one shard"));

  for (const std::string text : {"{", "[]", "{\"weight_map\": []}", "{\"weight_map\": {}}",
                                 "{\"weight_map\": {\"a\": 5}}"}) {
    test::write_file(dir.file("model.safetensors.index.json"), std::string(text));
    EXPECT_FALSE(SafetensorsModel::open(dir.path()).is_ok()) << text;
  }

  test::TempDir empty;
  auto none = SafetensorsModel::open(empty.path());
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsMalformed, HeaderLength) {
  EXPECT_THAT(parse({1, 2, 3}).message(), HasSubstr("too short"));
  test::Bytes b;
  b.u64(100).raw({'{', '}'});
  EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("header length 100 exceeds"));
  test::Bytes huge;
  huge.u64(~0ull).zeros(16);
  EXPECT_THAT(parse(huge.bytes()).message(), HasSubstr("exceeds"));
  EXPECT_TRUE(parse(make_file("{}", {})).is_ok());
}

TEST(SafetensorsMalformed, TruncatedAtEveryByte) {
  std::mt19937_64 rng(5);
  const std::vector<uint8_t> good =
      make_tensors({{"a", "F32", {3, 2}}, {"b", "F16", {4}}, {"c", "BF16", {2, 2}}}, rng);
  ASSERT_TRUE(parse(good).is_ok());
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    EXPECT_FALSE(parse(cut).is_ok()) << n;
  }
}

TEST(SafetensorsMalformed, BadHeaders) {
  const std::vector<uint8_t> data(64, 7);
  auto header = [&](const std::string& text) { return parse(make_file(text, data)); };
  EXPECT_TRUE(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})").is_ok());
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", )").message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(header("[1, 2]").message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(header(R"({"a": 5})").message(), HasSubstr("tensor 'a'"));
  Status s = header(R"({"w": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("dtype 'I64'"));
  EXPECT_THAT(header(R"({"a": {"shape": [4], "data_offsets": [0, 16]}})").message(), HasSubstr("dtype"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})").message(),
              HasSubstr("non-negative"));
  EXPECT_FALSE(header(R"({"a": {"dtype": "F32", "shape": [4.5], "data_offsets": [0, 16]}})").is_ok());
  EXPECT_FALSE(header(R"({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})").is_ok());
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [1,1,1,1,4], "data_offsets": [0, 16]}})").message(),
              HasSubstr("rank 5"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}})").message(),
              HasSubstr("zero dimension"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})").message(),
              HasSubstr("overflow"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})").message(),
              HasSubstr("end before"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [60, 76]}})").message(),
              HasSubstr("exceeds the data region of 64 bytes"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}})").message(),
              HasSubstr("needs 16"));
  EXPECT_FALSE(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0]}})").is_ok());
  EXPECT_FALSE(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, -16]}})").is_ok());
  EXPECT_FALSE(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 18446744073709551615]}})").is_ok());
  s = header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                 "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})");
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
  EXPECT_THAT(s.message(), HasSubstr("'b'"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                         "a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}})").message(),
              HasSubstr("duplicate key 'a'"));
  EXPECT_THAT(header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [2, 18]}})").message(),
              HasSubstr("not aligned"));
  // __metadata__ is ignored whatever it holds.
  EXPECT_TRUE(header(R"({"__metadata__": [1, {"x": null}]})").is_ok());
}

TEST(SafetensorsMalformed, MutationFuzz) {
  std::mt19937_64 rng(99);
  const std::vector<uint8_t> good = make_tensors(
      {{"model.a", "F32", {3, 2}}, {"model.b", "F16", {4}}, {"model.c", "BF16", {2, 2}}}, rng);
  uint64_t hlen;
  std::memcpy(&hlen, good.data(), 8);
  int accepted = 0;
  const char kInteresting[] = "0123456789[]{},:\"-eE. FBI";
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % (8 + hlen);
      b[pos] = (rng() % 2) ? static_cast<uint8_t>(kInteresting[rng() % (sizeof kInteresting - 1)])
                           : static_cast<uint8_t>(rng());
    }
    auto shared = share(std::move(b));
    auto f = SafetensorsFile::parse_bytes(shared);
    if (!f.is_ok()) continue;
    ++accepted;
    for (const auto& t : f->tensors()) {
      const auto* p = static_cast<const uint8_t*>(t.view.data);
      ASSERT_GE(p, shared->data());
      ASSERT_LE(p + t.view.nbytes, shared->data() + shared->size());
      volatile uint8_t sink = 0;
      for (uint64_t i = 0; i < t.view.nbytes; ++i) sink = sink ^ p[i];
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

}  // namespace
}  // namespace loom
