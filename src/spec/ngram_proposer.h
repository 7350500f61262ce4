// Prompt-lookup (n-gram) proposals, vLLM's "ngram" method: when the last n tokens of a sequence
// (prompt and output so far) occurred earlier in it, the tokens that followed that occurrence
// are a cheap guess at what comes next. Code, documents being edited, quotes and structured
// output repeat their input, and there the guess is often right.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace loom::spec {

// Appends to `out` the `k` tokens that followed the latest earlier occurrence of the longest
// suffix of `tokens` of length in [min_n, max_n] that occurred before (longer matches are
// tried first: they predict better); where that runs past the end, the proposal continues as
// the repetition would. Returns how many were appended: k, or 0 when nothing matched. Costs
// one pass over `tokens` per n tried.
int32_t propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                      std::vector<int32_t>& out);

class NgramProposer : public Proposer {
 public:
  NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  void plan(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& draft) override {
    propose_ngram(tokens, min_n_, max_n_, k, draft);
  }

 private:
  int32_t min_n_, max_n_;
};

}  // namespace loom::spec
