// Split GGUF models (llama.cpp's gguf-split layout: PREFIX-0000i-of-0000N.gguf with split.no,
// split.count, split.tensors.count) open as one file: parts built by hand from the spec, and
// parts written by write_gguf_split from a random model, compared tensor by tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "format/format_test_util.h"
#include "format/gguf.h"

namespace loom {
namespace {

using test::Bytes;

// One hand-built part with a single f32 tensor `name` of `n` floats.
std::vector<uint8_t> hand_part(int no, int count, int tensors_total, const std::string& name,
                               const std::vector<float>& data, bool with_arch) {
  Bytes b = test::gguf_header(1, with_arch ? 4 : 3);
  if (with_arch) b.str("general.architecture").u32(8).str("llama");
  b.str("split.no").u32(2).put<uint16_t>(static_cast<uint16_t>(no));
  b.str("split.count").u32(2).put<uint16_t>(static_cast<uint16_t>(count));
  b.str("split.tensors.count").u32(5).put<int32_t>(tensors_total);
  test::gguf_tensor_info(b, name, {data.size()}, /*f32*/ 0, 0);
  b.pad_to(32);
  std::vector<uint8_t> raw(data.size() * 4);
  std::memcpy(raw.data(), data.data(), raw.size());
  b.raw(raw);
  return b.bytes();
}

TEST(GgufSplit, HandBuiltPartsOpenAsOneFile) {
  test::TempDir dir;
  const std::vector<float> a = {1.5f, -2.25f, 3.0f, 7.75f}, c = {0.5f, 9.0f, -1.0f};
  test::write_file(dir.file("m-00001-of-00002.gguf"), hand_part(0, 2, 2, "a", a, true));
  test::write_file(dir.file("m-00002-of-00002.gguf"), hand_part(1, 2, 2, "c", c, false));
  auto f = GgufFile::open(dir.file("m-00001-of-00002.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensorInfo* ta = f->find_tensor("a");
  const GgufTensorInfo* tc = f->find_tensor("c");
  ASSERT_TRUE(ta && tc);
  EXPECT_EQ(std::memcmp(ta->view.data, a.data(), 16), 0);
  EXPECT_EQ(std::memcmp(tc->view.data, c.data(), 12), 0);

  // The second part alone is refused with a pointer to the first.
  auto second = GgufFile::open(dir.file("m-00002-of-00002.gguf"));
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("first part"), std::string::npos)
      << second.status().message();
}

TEST(GgufSplit, BadSplitsAreRefused) {
  test::TempDir dir;
  const std::vector<float> a = {1.f, 2.f}, c = {3.f};
  // split.tensors.count says 3, the parts hold 2.
  test::write_file(dir.file("x-00001-of-00002.gguf"), hand_part(0, 2, 3, "a", a, true));
  test::write_file(dir.file("x-00002-of-00002.gguf"), hand_part(1, 2, 3, "c", c, false));
  auto f = GgufFile::open(dir.file("x-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("split.tensors.count"), std::string::npos);
  // The same tensor name in two parts.
  test::write_file(dir.file("y-00001-of-00002.gguf"), hand_part(0, 2, 2, "a", a, true));
  test::write_file(dir.file("y-00002-of-00002.gguf"), hand_part(1, 2, 2, "a", c, false));
  f = GgufFile::open(dir.file("y-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("two parts"), std::string::npos);
  // A missing part.
  test::write_file(dir.file("z-00001-of-00002.gguf"), hand_part(0, 2, 2, "a", a, true));
  f = GgufFile::open(dir.file("z-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("part 2"), std::string::npos) << f.status().message();
  // A part that says it is another part.
  test::write_file(dir.file("w-00001-of-00002.gguf"), hand_part(0, 2, 2, "a", a, true));
  test::write_file(dir.file("w-00002-of-00002.gguf"), hand_part(0, 2, 2, "c", c, false));
  f = GgufFile::open(dir.file("w-00001-of-00002.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("split.no"), std::string::npos);
  // A first part not named -00001-of-N.
  test::write_file(dir.file("plain.gguf"), hand_part(0, 2, 2, "a", a, true));
  f = GgufFile::open(dir.file("plain.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("-00001-of-00002.gguf"), std::string::npos);
}

TEST(GgufSplit, WrittenPartsMatchTheWholeFile) {
  test::TempDir dir;
  std::mt19937_64 rng(20);
  GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("qwen3.block_count", 3);
  std::vector<std::vector<uint8_t>> data;
  for (int i = 0; i < 7; ++i) data.push_back(test::random_bytes(rng, 4 * (8 + 4 * i)));
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(w.add_tensor("t" + std::to_string(i), Dtype::kF32, {8 + 4 * i}, data[i].data(),
                             data[i].size())
                    .is_ok());
  ASSERT_TRUE(w.write(dir.file("whole.gguf")).is_ok());
  auto whole = GgufFile::open(dir.file("whole.gguf"));
  ASSERT_TRUE(whole.is_ok()) << whole.status().message();
  auto paths = write_gguf_split(*whole, 3, dir.file("part"));
  ASSERT_TRUE(paths.is_ok()) << paths.status().message();
  ASSERT_EQ(paths->size(), 3u);
  EXPECT_EQ((*paths)[2], dir.file("part-00003-of-00003.gguf"));
  // Each part alone is a valid GGUF holding its share.
  size_t sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    auto p = GgufFile::parse(*MappedFile::open((*paths)[i]));
    ASSERT_TRUE(p.is_ok());
    EXPECT_EQ(p->get_int("split.no"), static_cast<int64_t>(i));
    EXPECT_EQ(p->get_int("split.count"), 3);
    EXPECT_EQ(p->get_int("split.tensors.count"), 7);
    EXPECT_EQ(p->find("general.architecture") != nullptr, i == 0);
    EXPECT_GE(p->tensors().size(), 1u);
    sum += p->tensors().size();
  }
  EXPECT_EQ(sum, 7u);
  auto split = GgufFile::open((*paths)[0]);
  ASSERT_TRUE(split.is_ok()) << split.status().message();
  EXPECT_EQ(split->get_int("qwen3.block_count"), 3);
  ASSERT_EQ(split->tensors().size(), 7u);
  for (int i = 0; i < 7; ++i) {
    const GgufTensorInfo* t = split->find_tensor("t" + std::to_string(i));
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->view.nbytes, data[i].size());
    EXPECT_EQ(std::memcmp(t->view.data, data[i].data(), data[i].size()), 0) << "t" << i;
  }
}

}  // namespace
}  // namespace loom
