// The Hugging Face reference fixtures (tests/data/hf_reference/<arch>: a tiny model saved by
// transformers, its logits for three token sequences and its greedy continuations), read the
// same way by every test that checks a family against them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/tiny_model.h"

namespace loom::test {

inline std::string fixture(const std::string& arch) {
  return std::string(LOOM_TEST_DATA) + "/hf_reference/" + arch;
}

struct HfCase {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [n][vocab]
  std::vector<int32_t> greedy;
};

inline std::vector<HfCase> read_cases(const std::string& dir) {
  std::ifstream in(dir + "/cases.json");
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<HfCase> out;
  for (const auto& c : j["cases"]) {
    HfCase hc;
    hc.tokens = c["tokens"].get<std::vector<int32_t>>();
    hc.greedy = c["greedy_16"].get<std::vector<int32_t>>();
    const int64_t n = c["shape"][0].get<int64_t>() * c["shape"][1].get<int64_t>();
    hc.logits.resize(n);
    std::ifstream lf(dir + "/" + c["logits_file"].get<std::string>(), std::ios::binary);
    lf.read(reinterpret_cast<char*>(hc.logits.data()), n * 4);
    EXPECT_EQ(lf.gcount(), n * 4);
    out.push_back(std::move(hc));
  }
  return out;
}

// Relative error per row: max over rows of max|a-b| / max|b| within the row.
inline double row_rel_err(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  double worst = 0;
  for (size_t r = 0; r * vocab < b.size(); ++r)
    worst = std::max(worst, rel_err(&a[r * vocab], &b[r * vocab], vocab));
  return worst;
}

// Greedy continuation of `prompt` for n tokens as transformers' generate does it: the prompt in
// one step, then one token per step from the cache (blocks 0..3 of `kv`, state slot 0 for a
// model with recurrent layers).
inline std::vector<int32_t> greedy_continuation(Model& m, KvCache& kv,
                                                const std::vector<int32_t>& prompt, int n) {
  const int32_t V = m.config().n_vocab;
  std::vector<int32_t> table = {0, 1, 2, 3};
  std::vector<float> logits(V);
  std::vector<int32_t> seq = prompt, out;
  int32_t done = 0;
  for (int step = 0; step < n; ++step) {
    Batch b;
    const int32_t n_new = static_cast<int32_t>(seq.size()) - done;
    b.sequences.push_back({table.data(), 4, done, n_new, 0});
    if (kv.num_state_slots() > 0) b.sequences[0].state_slot = 0;
    for (int32_t i = 0; i < n_new; ++i) {
      b.tokens.push_back(seq[done + i]);
      b.pos.push_back(done + i);
      b.seq.push_back(0);
    }
    b.logits_rows = {n_new - 1};
    const Status st = m.forward(b, kv, logits.data());
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st.is_ok()) break;
    done = static_cast<int32_t>(seq.size());
    out.push_back(argmax(logits.data(), V));
    seq.push_back(out.back());
  }
  return out;
}

}  // namespace loom::test
