#include "spec/ngram_proposer.h"

#include <algorithm>

namespace loom::spec {

int32_t propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                      std::vector<int32_t>& out) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || min_n < 1) return 0;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The latest earlier start i (i + n < len: the occurrence is not the suffix itself) whose
    // n tokens equal the suffix; what follows it is tokens[i + n ...].
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (tokens[static_cast<size_t>(i)] != suffix[0]) continue;
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      // Copy what followed; past the end of `tokens` the copy reads its own proposals, so a
      // sequence repeating with a period shorter than k is continued for all k tokens.
      const int64_t from = i + n;
      const size_t base = out.size();
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src = from + j;
        out.push_back(src < len ? tokens[static_cast<size_t>(src)]
                                : out[base + static_cast<size_t>(src - len)]);
      }
      return k;
    }
  }
  return 0;
}

}  // namespace loom::spec
