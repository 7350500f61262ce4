// Malformed and hostile GGUF files: every one must be a returned error naming the problem,
// never a crash, a huge allocation or an out-of-bounds read (test_format_asan runs these
// under AddressSanitizer).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "format_test_util.h"

namespace loom {
namespace {

using test::Bytes;
using test::share;
using testing::HasSubstr;

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kTypeU32 = 4, kTypeString = 8, kTypeArray = 9;

Status parse(const std::vector<uint8_t>& bytes) {
  auto r = GgufFile::parse_bytes(share(bytes));
  return r.is_ok() ? Status::ok() : r.status();
}

// A small valid file with metadata of several kinds and three tensors.
struct ValidFile {
  std::vector<std::vector<uint8_t>> data;
  std::vector<uint8_t> bytes;
  uint64_t last_tensor_end = 0;  // absolute
  uint64_t data_offset = 0;
};

ValidFile make_valid() {
  std::mt19937_64 rng(1234);
  ValidFile v;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set("tokenizer.ggml.tokens", GgufValue::of_string_array({"<s>", "", "hello", "\xE2\x96\x81x"}));
  w.set("tokenizer.ggml.scores", GgufValue::of_float_array(GgufType::kF32, {0.5, -1, 2, 3}));
  w.set("tokenizer.ggml.token_type", GgufValue::of_int_array(GgufType::kI32, {3, 1, 1, 1}));
  w.set_bool("flag", true);
  v.data.push_back(test::random_bytes(rng, 4 * 8 * 2));
  v.data.push_back(test::random_bytes(rng, 34 * 2));
  v.data.push_back(test::random_bytes(rng, 2 * 16));
  EXPECT_TRUE(
      w.add_tensor("blk.0.attn_q.weight", Dtype::kF32, {8, 2}, v.data[0].data(), 64).is_ok());
  EXPECT_TRUE(
      w.add_tensor("blk.0.ffn_up.weight", Dtype::kQ8_0, {64}, v.data[1].data(), 68).is_ok());
  EXPECT_TRUE(w.add_tensor("output_norm.weight", Dtype::kF16, {16}, v.data[2].data(), 32).is_ok());
  v.bytes = w.to_bytes();
  auto f = GgufFile::parse_bytes(share(v.bytes));
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  v.data_offset = f->data_offset();
  for (const auto& t : f->tensors())
    v.last_tensor_end = std::max(v.last_tensor_end, v.data_offset + t.offset + t.view.nbytes);
  return v;
}

TEST(GgufMalformed, TruncatedAtEveryByte) {
  const ValidFile v = make_valid();
  ASSERT_GT(v.last_tensor_end, v.data_offset);
  for (uint64_t n = 0; n < v.last_tensor_end; ++n) {
    std::vector<uint8_t> cut(v.bytes.begin(), v.bytes.begin() + n);
    Status s = parse(cut);
    ASSERT_FALSE(s.is_ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(s.code(), StatusCode::kInvalidFile) << n << ": " << s.message();
    if (n >= v.data_offset) {
      EXPECT_THAT(s.message(), HasSubstr("exceeds file size")) << n;
    }
  }
  // Only the trailing padding may go.
  std::vector<uint8_t> cut(v.bytes.begin(), v.bytes.begin() + v.last_tensor_end);
  EXPECT_TRUE(parse(cut).is_ok());
}

TEST(GgufMalformed, BadMagicAndVersions) {
  EXPECT_THAT(parse({}).message(), HasSubstr("not a GGUF file"));
  EXPECT_THAT(parse({'G', 'G', 'U'}).message(), HasSubstr("not a GGUF file"));
  std::vector<uint8_t> b = make_valid().bytes;
  b[0] = 'X';
  EXPECT_THAT(parse(b).message(), HasSubstr("bad magic"));

  auto with_version = [](uint32_t v) { return parse(test::gguf_header(0, 0, v).bytes()); };
  EXPECT_TRUE(with_version(2).is_ok());
  EXPECT_TRUE(with_version(3).is_ok());
  Status v1 = with_version(1);
  EXPECT_EQ(v1.code(), StatusCode::kUnsupported);
  EXPECT_THAT(v1.message(), HasSubstr("version 1 is not supported"));
  EXPECT_THAT(with_version(4).message(), HasSubstr("version 4 is not supported"));
  EXPECT_THAT(with_version(0x03000000).message(), HasSubstr("big-endian"));
  EXPECT_FALSE(with_version(0).is_ok());
}

TEST(GgufMalformed, HugeCounts) {
  const uint64_t huge = 1ull << 60;
  EXPECT_THAT(parse(test::gguf_header(huge, 0).bytes()).message(), HasSubstr("tensors"));
  EXPECT_THAT(parse(test::gguf_header(0, huge).bytes()).message(), HasSubstr("metadata entries"));
  EXPECT_FALSE(parse(test::gguf_header(~0ull, ~0ull).bytes()).is_ok());

  {  // key length
    Bytes b = test::gguf_header(0, 1);
    b.u64(huge).zeros(16);
    EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("exceeds the"));
  }
  {  // string value length
    Bytes b = test::gguf_header(0, 1);
    b.str("k").u32(kTypeString).u64(~0ull - 3).zeros(16);
    Status s = parse(b.bytes());
    EXPECT_THAT(s.message(), HasSubstr("metadata key 'k'"));
    EXPECT_THAT(s.message(), HasSubstr("string length"));
  }
  {  // array of 2^60 strings
    Bytes b = test::gguf_header(0, 1);
    b.str("k").u32(kTypeArray).u32(kTypeString).u64(huge).str("a").str("b");
    EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("cannot fit"));
  }
  {  // array of 2^62 u64: count * 8 would overflow
    Bytes b = test::gguf_header(0, 1);
    b.str("k").u32(kTypeArray).u32(10).u64(1ull << 62).u64(1);
    EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("cannot fit"));
  }
  {  // array of strings whose later element claims a huge length
    Bytes b = test::gguf_header(0, 1);
    b.str("k").u32(kTypeArray).u32(kTypeString).u64(3).str("a").u64(huge).zeros(8);
    Status s = parse(b.bytes());
    EXPECT_THAT(s.message(), HasSubstr("array element 1"));
  }
  {  // tensor name length
    Bytes b = test::gguf_header(1, 0);
    b.u64(huge).zeros(40);
    EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("tensor name length"));
  }
}

Status parse_with_alignment(Bytes align_kv) {
  Bytes b = test::gguf_header(1, 1);
  b.raw(align_kv.bytes());
  test::gguf_tensor_info(b, "t", {4}, kF32, 0);
  b.pad_to(64).zeros(64);
  return parse(b.bytes());
}

TEST(GgufMalformed, Alignment) {
  auto kv = [](uint32_t a) {
    Bytes b;
    b.str("general.alignment").u32(kTypeU32).u32(a);
    return b;
  };
  EXPECT_TRUE(parse_with_alignment(kv(8)).is_ok());
  EXPECT_TRUE(parse_with_alignment(kv(1)).is_ok());
  EXPECT_THAT(parse_with_alignment(kv(0)).message(), HasSubstr("not a power of two"));
  EXPECT_THAT(parse_with_alignment(kv(3)).message(), HasSubstr("general.alignment 3"));
  EXPECT_THAT(parse_with_alignment(kv(48)).message(), HasSubstr("not a power of two"));
  Bytes str;
  str.str("general.alignment").u32(kTypeString).str("32");
  EXPECT_THAT(parse_with_alignment(str).message(), HasSubstr("must be an unsigned integer"));
  Bytes neg;
  neg.str("general.alignment").u32(5).put<int32_t>(-32);
  EXPECT_FALSE(parse_with_alignment(neg).is_ok());
  // An alignment so large the data section offset cannot be represented.
  Bytes big;
  big.str("general.alignment").u32(10).u64(1ull << 63);
  EXPECT_FALSE(parse_with_alignment(big).is_ok());
}

// One file with the given tensor infos (f32, default alignment) and `data_bytes` of data.
Status parse_tensors(
    const std::vector<std::tuple<std::string, std::vector<uint64_t>, uint32_t, uint64_t>>& ts,
    size_t data_bytes) {
  Bytes b = test::gguf_header(ts.size(), 0);
  for (const auto& [name, ne, type, off] : ts) test::gguf_tensor_info(b, name, ne, type, off);
  b.pad_to(32).zeros(data_bytes);
  return parse(b.bytes());
}

TEST(GgufMalformed, TensorRanges) {
  EXPECT_TRUE(parse_tensors({{"a", {8}, kF32, 0}, {"b", {8}, kF32, 32}}, 64).is_ok());
  Status s = parse_tensors({{"blk.0.attn_q.weight", {8}, kF32, 64}}, 64);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'blk.0.attn_q.weight': data range ["));
  EXPECT_THAT(s.message(), HasSubstr("exceeds file size"));
  EXPECT_THAT(parse_tensors({{"a", {8}, kF32, 16}}, 64).message(),
              HasSubstr("not a multiple of the alignment 32"));
  s = parse_tensors({{"a", {16}, kF32, 0}, {"b", {8}, kF32, 32}}, 128);
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
  EXPECT_THAT(parse_tensors({{"a", {8}, kF32, 0}, {"b", {8}, kF32, 0}}, 64).message(),
              HasSubstr("overlap"));
  EXPECT_THAT(parse_tensors({{"a", {8}, kF32, ~0ull - 31}}, 64).message(), HasSubstr("overflow"));
  EXPECT_THAT(parse_tensors({{"a", {8}, kF32, 0}, {"a", {8}, kF32, 32}}, 64).message(),
              HasSubstr("duplicate tensor 'a'"));
}

TEST(GgufMalformed, TensorShapesAndTypes) {
  Status s = parse_tensors({{"a", {8}, 4, 0}}, 64);  // 4 was Q4_2, removed from ggml
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("unknown ggml type id 4"));
  EXPECT_THAT(parse_tensors({{"a", {8}, 0xFFFFFFFF, 0}}, 64).message(),
              HasSubstr("unknown ggml type"));
  EXPECT_THAT(parse_tensors({{"a", {}, kF32, 0}}, 64).message(), HasSubstr("n_dims 0"));
  EXPECT_THAT(parse_tensors({{"a", {1, 1, 1, 1, 1}, kF32, 0}}, 64).message(),
              HasSubstr("n_dims 5"));
  EXPECT_THAT(parse_tensors({{"a", {8, 0}, kF32, 0}}, 64).message(), HasSubstr("ne[1] = 0"));
  EXPECT_THAT(parse_tensors({{"a", {48}, kQ8_0, 0}}, 128).message(), HasSubstr("block size 32"));
  EXPECT_THAT(parse_tensors({{"a", {1ull << 40, 1ull << 40}, kF32, 0}}, 64).message(),
              HasSubstr("overflows"));
  EXPECT_THAT(parse_tensors({{"a", {1ull << 62}, kF32, 0}}, 64).message(), HasSubstr("overflows"));
  EXPECT_THAT(parse_tensors({{"a", {1ull << 63}, kF32, 0}}, 64).message(),
              HasSubstr("out of range"));
  {  // huge n_dims must be rejected before reading any ne
    Bytes b = test::gguf_header(1, 0);
    b.str("a").u32(0xFFFFFFFF).zeros(64);
    EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("out of range"));
  }
}

TEST(GgufMalformed, MetadataTypes) {
  auto one_kv = [](const Bytes& kv) {
    Bytes b = test::gguf_header(0, 1);
    b.raw(kv.bytes()).zeros(8);
    return parse(b.bytes());
  };
  Bytes unknown;
  unknown.str("k").u32(13).u32(0);
  EXPECT_THAT(one_kv(unknown).message(), HasSubstr("metadata key 'k': unknown value type id 13"));
  Bytes unknown2;
  unknown2.str("k").u32(0xFFFFFFFF).u32(0);
  EXPECT_THAT(one_kv(unknown2).message(), HasSubstr("unknown value type id"));
  Bytes bad_elem;
  bad_elem.str("k").u32(kTypeArray).u32(99).u64(1).u32(0);
  EXPECT_THAT(one_kv(bad_elem).message(), HasSubstr("unknown element type id 99"));
  Bytes nested;
  nested.str("k").u32(kTypeArray).u32(kTypeArray).u64(1).u32(kTypeU32).u64(0);
  Status s = one_kv(nested);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("arrays of arrays"));
  Bytes bad_bool;
  bad_bool.str("k").u32(7).u8(2);
  EXPECT_THAT(one_kv(bad_bool).message(), HasSubstr("must be 0 or 1"));

  Bytes b = test::gguf_header(0, 2);
  b.str("dup").u32(kTypeU32).u32(1).str("dup").u32(kTypeU32).u32(2);
  EXPECT_THAT(parse(b.bytes()).message(), HasSubstr("duplicate metadata key 'dup'"));
}

// Keys follow the specification: ASCII, at most 65,535 bytes, no empty segment; a key that
// breaks it is refused with the entry's index and the key's bytes escaped.
TEST(GgufMalformed, KeysFollowTheSpecification) {
  auto with_key = [](const std::string& key) {
    Bytes b = test::gguf_header(0, 1);
    b.str(key).u32(kTypeU32).u32(1).zeros(8);
    return parse(b.bytes());
  };
  EXPECT_TRUE(with_key("general.name").is_ok());
  EXPECT_TRUE(with_key("Tokenizer.GGML.Model").is_ok());  // upper case is read as is
  struct Case {
    std::string key;
    const char* says;
  };
  const Case cases[] = {
      {"", "metadata entry 0: the key '' is empty"},
      {"general..name", "has an empty segment"},
      {".general", "has an empty segment"},
      {"general.", "has an empty segment"},
      {std::string("gen\0eral", 8), "'gen\\x00eral' has byte 0x00 at 3"},
      {"caf\xc3\xa9", "has byte 0xc3 at 3, not printable ASCII"},
      {"tab\tkey", "has byte 0x09"},
      {std::string(65536, 'k'), "is 65536 bytes long"},
  };
  for (const Case& c : cases) {
    Status s = with_key(c.key);
    ASSERT_FALSE(s.is_ok()) << c.says;
    EXPECT_THAT(s.message(), HasSubstr(c.says));
    EXPECT_THAT(s.message(), HasSubstr("GGUF keys are dot-separated ASCII"));
  }
}

// Random byte flips of a valid file: any outcome but a crash (or an ASan report) is fine, and
// whatever parses must have views inside the buffer.
TEST(GgufMalformed, MutationFuzz) {
  const ValidFile v = make_valid();
  std::mt19937_64 rng(20261129);
  int accepted = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> b = v.bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the header, where the structure lives.
      const uint64_t span = (rng() % 8 == 0) ? b.size() : v.data_offset;
      const size_t pos = rng() % span;
      switch (rng() % 3) {
        case 0:
          b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          b[pos] = static_cast<uint8_t>(rng());
          break;
        default:
          b[pos] = (rng() % 2) ? 0xFF : 0x00;
          break;
      }
    }
    if (rng() % 10 == 0) b.resize(rng() % b.size());
    auto shared = share(std::move(b));
    auto f = GgufFile::parse_bytes(shared);
    if (!f.is_ok()) {
      EXPECT_FALSE(f.status().message().empty());
      continue;
    }
    ++accepted;
    for (const auto& t : f->tensors()) {
      const auto* p = static_cast<const uint8_t*>(t.view.data);
      ASSERT_GE(p, shared->data());
      ASSERT_LE(p + t.view.nbytes, shared->data() + shared->size());
      volatile uint8_t sink = 0;
      for (uint64_t i = 0; i < t.view.nbytes; ++i) sink = sink ^ p[i];  // ASan checks the range
    }
    for (const auto& kv : f->metadata()) (void)kv.second.to_display_string();
  }
  // Flips inside string bytes or tensor data leave a valid file: the fuzz must exercise both.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 4000);
}

}  // namespace
}  // namespace loom
