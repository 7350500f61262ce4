// Quantized files written by llama.cpp's own llama-quantize, with the logits llama.cpp computed
// on them (tests/data/llamacpp_quants; make.sh there is the record of how): loom must read each
// format's blocks as llama.cpp does. Both engines quantize the activations (llama.cpp to Q8_0 /
// Q8_K, loom to int8 per 32 columns), so logits agree to about 2% of the largest; a misread
// scale, grid value or nibble moves them by far more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/file_type.h"
#include "format/gguf.h"
#include "model/model.h"
#include "model/tiny_model.h"

namespace loom {
namespace {

std::string fixture_dir() {
  return std::string(LOOM_TEST_DATA) + "/llamacpp_quants/";
}

std::vector<int32_t> fixture_ids() {
  std::ifstream f(fixture_dir() + "ids.txt");
  return {std::istream_iterator<int32_t>(f), std::istream_iterator<int32_t>()};
}

struct QuantFile {
  const char* file_type;  // llama-quantize's type name: the file's stem
  Dtype main;             // the matrices' type (most of them)
};

class LlamaCppQuantFile : public ::testing::TestWithParam<QuantFile> {};

TEST_P(LlamaCppQuantFile, LogitsMatchLlamaCppOnTheSameFile) {
  const QuantFile q = GetParam();
  const std::string path = fixture_dir() + q.file_type + ".gguf";
  // The fixture is what its name says: its matrices mostly of the type under test (9 of the 15
  // layer matrices in the K-quant mixes).
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  int of_type = 0;
  for (const auto& t : file->tensors()) of_type += t.view.dtype == q.main;
  EXPECT_GE(of_type, 9) << path;
  // And llama-quantize's general.file_type names it as loom (and Ollama) report it.
  EXPECT_EQ(file_type_name(file->get_int("general.file_type").value_or(-1)), q.file_type);

  auto m = Model::load(path, {2});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const std::vector<int32_t> ids = fixture_ids();
  ASSERT_EQ(ids.size(), 24u);
  const int32_t V = (*m)->config().n_vocab;
  auto kv = KvCache::create((*m)->config(), 4, 16, Dtype::kF32).value();
  auto got = test::run_sequence(**m, *kv, ids, 64);
  ASSERT_TRUE(got.is_ok()) << got.status().message();

  std::vector<float> want(got->size());
  std::ifstream lf(fixture_dir() + q.file_type + ".logits.f32", std::ios::binary);
  ASSERT_TRUE(lf.read(reinterpret_cast<char*>(want.data()), want.size() * sizeof(float)));
  double diff = 0, largest = 0;
  int same_best = 0;
  for (size_t row = 0; row < ids.size(); ++row) {
    const float* g = &(*got)[row * V];
    const float* w = &want[row * V];
    for (int32_t v = 0; v < V; ++v) {
      diff = std::max(diff, std::abs(double(g[v]) - w[v]));
      largest = std::max(largest, std::abs(double(w[v])));
    }
    same_best += std::max_element(g, g + V) - g == std::max_element(w, w + V) - w;
  }
  std::printf("  %s: max abs diff %.4g of largest logit %.3g, best token same in %d of 24\n",
              q.file_type, diff, largest, same_best);
  EXPECT_LT(diff, 0.04 * largest) << q.file_type;
  EXPECT_GE(same_best, 20) << q.file_type;
}

INSTANTIATE_TEST_SUITE_P(
    Files, LlamaCppQuantFile,
    ::testing::Values(QuantFile{"IQ4_NL", Dtype::kIQ4_NL}, QuantFile{"IQ4_XS", Dtype::kIQ4_XS},
                      QuantFile{"Q3_K_M", Dtype::kQ3_K}, QuantFile{"Q2_K", Dtype::kQ2_K},
                      QuantFile{"TQ1_0", Dtype::kTQ1_0}, QuantFile{"TQ2_0", Dtype::kTQ2_0}),
    [](const auto& info) { return std::string(info.param.file_type); });

}  // namespace
}  // namespace loom
