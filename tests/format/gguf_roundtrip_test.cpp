// GGUF writer -> reader round trips (every metadata type, several tensor dtypes, custom
// alignment, write() to disk) and a hand-built file read per the spec.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "format/gguf.h"
#include "format_test_util.h"

namespace loom {
namespace {

using test::Bytes;
using test::share;

Result<GgufFile> roundtrip(const GgufWriter& w) {
  return GgufFile::parse_bytes(share(w.to_bytes()));
}

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.set("u8", GgufValue::of_uint(GgufType::kU8, 255));
  w.set("i8", GgufValue::of_int(GgufType::kI8, -128));
  w.set("u16", GgufValue::of_uint(GgufType::kU16, 65535));
  w.set("i16", GgufValue::of_int(GgufType::kI16, -32768));
  w.set("u32", GgufValue::of_uint(GgufType::kU32, 4000000000u));
  w.set("i32", GgufValue::of_int(GgufType::kI32, std::numeric_limits<int32_t>::min()));
  w.set("u64", GgufValue::of_uint(GgufType::kU64, std::numeric_limits<uint64_t>::max()));
  w.set("i64", GgufValue::of_int(GgufType::kI64, std::numeric_limits<int64_t>::min()));
  w.set("f32", GgufValue::of_float(GgufType::kF32, 3.14159274101257324));  // exact in f32
  w.set("f64", GgufValue::of_float(GgufType::kF64, -2.718281828459045));
  w.set_bool("bool_t", true);
  w.set_bool("bool_f", false);
  w.set_string("str", "h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80");
  w.set_string("empty", "");
  w.set_string("nul", std::string("a\0b", 3));
  auto f = roundtrip(w);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->metadata().size(), 15u);
  const char* order[] = {"u8",  "i8",  "u16",    "i16",    "u32", "i32",   "u64", "i64",
                         "f32", "f64", "bool_t", "bool_f", "str", "empty", "nul"};
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(f->metadata()[i].first, order[i]);

  EXPECT_EQ(f->find("u8")->type(), GgufType::kU8);
  EXPECT_EQ(f->find("u8")->as_uint(), 255u);
  EXPECT_EQ(f->find("i8")->type(), GgufType::kI8);
  EXPECT_EQ(f->get_int("i8"), -128);
  EXPECT_EQ(f->find("u16")->type(), GgufType::kU16);
  EXPECT_EQ(f->get_int("u16"), 65535);
  EXPECT_EQ(f->find("i16")->type(), GgufType::kI16);
  EXPECT_EQ(f->get_int("i16"), -32768);
  EXPECT_EQ(f->find("u32")->type(), GgufType::kU32);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->find("i32")->type(), GgufType::kI32);
  EXPECT_EQ(f->get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->find("u64")->type(), GgufType::kU64);
  EXPECT_EQ(f->find("u64")->as_uint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->get_int("u64"), std::nullopt);  // not representable: no silent wrap
  EXPECT_EQ(f->find("i64")->type(), GgufType::kI64);
  EXPECT_EQ(f->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->find("i64")->as_uint(), std::nullopt);
  EXPECT_EQ(f->find("f32")->type(), GgufType::kF32);
  EXPECT_EQ(f->get_float("f32"), 3.14159274101257324);
  EXPECT_EQ(f->find("f64")->type(), GgufType::kF64);
  EXPECT_EQ(f->get_float("f64"), -2.718281828459045);
  EXPECT_EQ(f->get_bool("bool_t"), true);
  EXPECT_EQ(f->get_bool("bool_f"), false);
  EXPECT_EQ(f->get_bool("u8"), std::nullopt);
  EXPECT_EQ(f->get_string("str"), "h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_EQ(f->get_string("nul"), std::string("a\0b", 3));
  EXPECT_EQ(f->get_string("u8"), std::nullopt);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_EQ(f->find("f32")->as_int(), std::nullopt);  // floats never convert to ints
}

TEST(GgufRoundTrip, ArraysOfEveryType) {
  std::mt19937_64 rng(42);
  GgufWriter w;
  struct IntCase {
    GgufType t;
    int64_t lo, hi;
  };
  const IntCase cases[] = {
      {GgufType::kU8, 0, 255},
      {GgufType::kI8, -128, 127},
      {GgufType::kU16, 0, 65535},
      {GgufType::kI16, -32768, 32767},
      {GgufType::kU32, 0, 4294967295ll},
      {GgufType::kI32, INT32_MIN, INT32_MAX},
      {GgufType::kI64, INT64_MIN, INT64_MAX},
  };
  std::vector<std::vector<int64_t>> expect;
  for (const IntCase& c : cases) {
    std::uniform_int_distribution<int64_t> d(c.lo, c.hi);
    std::vector<int64_t> v(37);
    for (auto& x : v) x = d(rng);
    v[0] = c.lo;
    v[1] = c.hi;
    expect.push_back(v);
    w.set("arr." + std::string(gguf_type_name(c.t)), GgufValue::of_int_array(c.t, v));
  }
  // u64 beyond INT64_MAX is kept as its bit pattern.
  std::vector<int64_t> u64s = {0, 1, static_cast<int64_t>(0xFFFFFFFFFFFFFFFFull),
                               static_cast<int64_t>(0x8000000000000001ull)};
  w.set("arr.u64", GgufValue::of_int_array(GgufType::kU64, u64s));
  std::vector<double> f32s, f64s;
  std::normal_distribution<double> nd(0, 100);
  for (int i = 0; i < 29; ++i) {
    f32s.push_back(static_cast<float>(nd(rng)));
    f64s.push_back(nd(rng));
  }
  w.set("arr.f32", GgufValue::of_float_array(GgufType::kF32, f32s));
  w.set("arr.f64", GgufValue::of_float_array(GgufType::kF64, f64s));
  std::vector<bool> bools = {true, false, false, true, true};
  w.set("arr.bool", GgufValue::of_bool_array(bools));
  std::vector<std::string> strs = {
      "",      "a", "", "\xE4\xB8\xAD\xE6\x96\x87", std::string(300, 'x'), std::string("\0\xff", 2),
      " space"};
  w.set("arr.str", GgufValue::of_string_array(strs));
  w.set("arr.empty", GgufValue::of_string_array({}));
  w.set("arr.empty_i32", GgufValue::of_int_array(GgufType::kI32, {}));

  auto f = roundtrip(w);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  for (size_t i = 0; i < std::size(cases); ++i) {
    const GgufValue* v = f->find("arr." + std::string(gguf_type_name(cases[i].t)));
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->type(), GgufType::kArray);
    EXPECT_EQ(v->array_type(), cases[i].t);
    EXPECT_EQ(v->array_size(), 37u);
    ASSERT_NE(v->as_int_array(), nullptr);
    EXPECT_EQ(*v->as_int_array(), expect[i]) << gguf_type_name(cases[i].t);
    EXPECT_EQ(v->as_string_array(), nullptr);
    EXPECT_EQ(v->as_int(), std::nullopt);
  }
  EXPECT_EQ(f->find("arr.u64")->array_type(), GgufType::kU64);
  EXPECT_EQ(*f->find("arr.u64")->as_int_array(), u64s);
  EXPECT_EQ(f->find("arr.f32")->array_type(), GgufType::kF32);
  EXPECT_EQ(*f->find("arr.f32")->as_float_array(), f32s);
  EXPECT_EQ(f->find("arr.f64")->array_type(), GgufType::kF64);
  EXPECT_EQ(*f->find("arr.f64")->as_float_array(), f64s);
  EXPECT_EQ(f->find("arr.bool")->array_type(), GgufType::kBool);
  EXPECT_EQ(*f->find("arr.bool")->as_int_array(), (std::vector<int64_t>{1, 0, 0, 1, 1}));
  EXPECT_EQ(f->find("arr.str")->array_type(), GgufType::kString);
  EXPECT_EQ(*f->find("arr.str")->as_string_array(), strs);
  EXPECT_EQ(f->find("arr.empty")->array_size(), 0u);
  EXPECT_EQ(f->find("arr.empty")->array_type(), GgufType::kString);
  EXPECT_EQ(f->find("arr.empty_i32")->array_size(), 0u);
  EXPECT_EQ(f->find("arr.empty_i32")->array_type(), GgufType::kI32);

  // Re-serializing what was read reproduces the file byte for byte.
  GgufWriter again;
  for (const auto& [k, v] : f->metadata()) again.set(k, v);
  EXPECT_EQ(again.to_bytes(), w.to_bytes());
}

TEST(GgufRoundTrip, SetReplacesInPlace) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_u32("a", 2);
  auto f = roundtrip(w);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(f->get_int("a"), 2);
}

struct TensorCase {
  std::string name;
  Dtype dtype;
  std::vector<int64_t> ne;
};

void check_tensors(uint64_t alignment) {
  std::mt19937_64 rng(alignment);
  const std::vector<TensorCase> cases = {
      {"tok_embd.weight", Dtype::kF32, {7, 3}},
      {"blk.0.attn_q.weight", Dtype::kF16, {16, 5}},
      {"blk.0.ffn_up.weight", Dtype::kQ8_0, {64, 3}},
      {"blk.0.ffn_down.weight", Dtype::kQ4_K, {256, 2}},
      {"blk.0.attn_norm.weight", Dtype::kF32, {13}},
      {"positions", Dtype::kI32, {5}},
      {"blk.0.attn_k.weight", Dtype::kBF16, {3, 2, 2, 2}},
      {"blk.0.q4", Dtype::kQ4_0, {32, 1, 3}},
      {"blk.0.q6", Dtype::kQ6_K, {512}},
  };
  std::vector<std::vector<uint8_t>> data;
  GgufWriter w;
  if (alignment != 32) w.set_alignment(alignment);
  w.set_string("general.architecture", "llama");
  for (const TensorCase& c : cases) {
    uint64_t nb = *row_bytes(c.dtype, c.ne[0]);
    for (size_t d = 1; d < c.ne.size(); ++d) nb *= c.ne[d];
    data.push_back(test::random_bytes(rng, nb));
    ASSERT_TRUE(w.add_tensor(c.name, c.dtype, c.ne, data.back().data(), nb).is_ok());
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto shared = share(bytes);
  auto f = GgufFile::parse_bytes(shared);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), alignment);
  if (alignment != 32) {
    ASSERT_NE(f->find("general.alignment"), nullptr);
    EXPECT_EQ(f->find("general.alignment")->type(), GgufType::kU32);
    EXPECT_EQ(f->get_int("general.alignment"), static_cast<int64_t>(alignment));
  } else {
    EXPECT_EQ(f->find("general.alignment"), nullptr);
  }
  EXPECT_EQ(f->data_offset() % alignment, 0u);
  EXPECT_EQ(f->file_size(), bytes.size());
  ASSERT_EQ(f->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.view.dtype, cases[i].dtype);
    EXPECT_EQ(t.view.n_dims, static_cast<int>(cases[i].ne.size()));
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(t.view.ne[d], d < static_cast<int>(cases[i].ne.size()) ? cases[i].ne[d] : 1);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(t.view.nbytes, data[i].size());
    // Zero copy: the view points into the shared buffer at data_offset + offset.
    EXPECT_EQ(static_cast<const uint8_t*>(t.view.data),
              shared->data() + f->data_offset() + t.offset);
    EXPECT_EQ(std::memcmp(t.view.data, data[i].data(), data[i].size()), 0);
    EXPECT_EQ(f->find_tensor(cases[i].name), &t);
  }
  EXPECT_EQ(f->find_tensor("nope"), nullptr);

  // The writer's layout: the same file's metadata, tensor table and size, its data zeros.
  auto layout = w.layout();
  ASSERT_TRUE(layout.is_ok()) << layout.status().message();
  EXPECT_EQ(layout->file_size(), f->file_size());
  EXPECT_EQ(layout->data_offset(), f->data_offset());
  EXPECT_EQ(layout->get_string("general.architecture").value_or(""), "llama");
  ASSERT_EQ(layout->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& a = layout->tensors()[i];
    const GgufTensorInfo& b = f->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.view.dtype, b.view.dtype);
    EXPECT_EQ(a.view.nbytes, b.view.nbytes);
    const auto* d = static_cast<const uint8_t*>(a.view.data);
    EXPECT_TRUE(std::all_of(d, d + a.view.nbytes, [](uint8_t x) { return x == 0; })) << a.name;
  }
}

TEST(GgufRoundTrip, TensorsDefaultAlignment) {
  check_tensors(32);
}
TEST(GgufRoundTrip, TensorsAlignment1) {
  check_tensors(1);
}
TEST(GgufRoundTrip, TensorsAlignment64) {
  check_tensors(64);
}
TEST(GgufRoundTrip, TensorsAlignment4096) {
  check_tensors(4096);
}

TEST(GgufRoundTrip, WriteToDiskMatchesToBytesAndMmaps) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> a = test::random_bytes(rng, 4 * 40), b = test::random_bytes(rng, 34 * 4);
  GgufWriter w;
  w.set_alignment(128);
  w.set_string("general.architecture", "qwen3");
  w.set_f32("x.eps", 1e-6f);
  ASSERT_TRUE(w.add_tensor("a", Dtype::kF32, {10, 4}, a.data(), a.size()).is_ok());
  ASSERT_TRUE(w.add_tensor("b", Dtype::kQ8_0, {128}, b.data(), b.size()).is_ok());
  test::TempDir dir;
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(w.write(path).is_ok());
  EXPECT_EQ(test::read_file(path), w.to_bytes());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f->get_float("x.eps"), static_cast<double>(1e-6f));
  ASSERT_NE(f->find_tensor("b"), nullptr);
  EXPECT_EQ(std::memcmp(f->find_tensor("b")->view.data, b.data(), b.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->find_tensor("b")->view.data) % 128, 0u);

  auto missing = GgufFile::open(dir.file("nope.gguf"));
  EXPECT_FALSE(missing.is_ok());
  EXPECT_THAT(missing.status().message(), testing::HasSubstr("nope.gguf"));
}

TEST(GgufWriter, RejectsBadTensors) {
  std::vector<uint8_t> buf(4096, 1);
  GgufWriter w;
  EXPECT_TRUE(w.add_tensor("ok", Dtype::kF32, {4}, buf.data(), 16).is_ok());
  EXPECT_FALSE(w.add_tensor("ok", Dtype::kF32, {4}, buf.data(), 16).is_ok());  // duplicate
  EXPECT_FALSE(w.add_tensor("", Dtype::kF32, {4}, buf.data(), 16).is_ok());
  EXPECT_FALSE(w.add_tensor("n", Dtype::kF32, {4}, buf.data(), 12).is_ok());  // wrong size
  auto s = w.add_tensor("q", Dtype::kQ4_0, {48}, buf.data(), 36);
  EXPECT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), testing::HasSubstr("block size"));
  EXPECT_FALSE(w.add_tensor("d5", Dtype::kF32, {1, 1, 1, 1, 1}, buf.data(), 4).is_ok());
  EXPECT_FALSE(w.add_tensor("d0", Dtype::kF32, {}, buf.data(), 0).is_ok());
  EXPECT_FALSE(w.add_tensor("neg", Dtype::kF32, {-4}, buf.data(), 16).is_ok());
  test::TempDir dir;
  GgufWriter bad;
  bad.set_alignment(48);
  EXPECT_FALSE(bad.write(dir.file("x.gguf")).is_ok());
}

// A file assembled byte by byte from the spec (not by GgufWriter) reads as expected.
TEST(GgufReader, ReadsHandBuiltFile) {
  Bytes b = test::gguf_header(2, 4, /*version=*/2);
  b.str("general.architecture").u32(8).str("gpt2");
  b.str("general.alignment").u32(4).u32(16);
  b.str("ctx").u32(10).u64(4096);
  b.str("toks").u32(9).u32(8).u64(2).str("ab").str("");
  test::gguf_tensor_info(b, "w", {2, 3}, /*f32*/ 0, 0);
  test::gguf_tensor_info(b, "v", {32}, /*q8_0*/ 8, 32);
  b.pad_to(16);
  const size_t data_start = b.size();
  std::vector<uint8_t> w_bytes(24), v_bytes(34);
  for (size_t i = 0; i < w_bytes.size(); ++i) w_bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < v_bytes.size(); ++i) v_bytes[i] = static_cast<uint8_t>(i * 5 + 3);
  b.raw(w_bytes).zeros(8).raw(v_bytes);
  auto f = GgufFile::parse_bytes(share(b.bytes()));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 16u);
  EXPECT_EQ(f->data_offset(), data_start);
  EXPECT_EQ(f->get_string("general.architecture"), "gpt2");
  EXPECT_EQ(f->get_int("ctx"), 4096);
  EXPECT_EQ(*f->find("toks")->as_string_array(), (std::vector<std::string>{"ab", ""}));
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[0].view.ne[0], 2);
  EXPECT_EQ(f->tensors()[0].view.ne[1], 3);
  EXPECT_EQ(f->tensors()[0].view.nbytes, 24u);
  EXPECT_EQ(std::memcmp(f->tensors()[0].view.data, w_bytes.data(), 24), 0);
  EXPECT_EQ(f->tensors()[1].view.dtype, Dtype::kQ8_0);
  EXPECT_EQ(f->tensors()[1].view.nbytes, 34u);
  EXPECT_EQ(std::memcmp(f->tensors()[1].view.data, v_bytes.data(), 34), 0);
}

TEST(GgufValue, DisplayString) {
  EXPECT_EQ(GgufValue::of_string("a\"b\n").to_display_string(), "\"a\\\"b\\x0a\"");
  EXPECT_EQ(GgufValue::of_int(GgufType::kI32, -5).to_display_string(), "-5");
  EXPECT_EQ(GgufValue::of_bool(true).to_display_string(), "true");
  EXPECT_EQ(GgufValue::of_int_array(GgufType::kI32, {1, 2, 3}).to_display_string(2),
            "[1, 2, ...] (3 x i32)");
  EXPECT_EQ(GgufValue::of_string_array({"x"}).to_display_string(), "[\"x\"] (1 x string)");
}

}  // namespace
}  // namespace loom
