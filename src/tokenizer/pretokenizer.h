// Pre-tokenizer: splits text into words with a sequence of regexes (PCRE2, UTF + Unicode
// properties), each applied to every piece the previous ones produced, as llama.cpp's
// unicode_regex_split and HF's Sequence of Split pre-tokenizers do.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace loom::tok {

class PreTokenizer {
 public:
  static Result<PreTokenizer> create(const std::vector<PreSplit>& splits);

  // Appends the pieces of text (views into text) to out. Empty pieces never appear.
  void split(std::string_view text, std::vector<std::string_view>* out) const;
  bool empty() const { return stages_.empty(); }

 private:
  struct Stage;
  std::vector<std::shared_ptr<const Stage>> stages_;
};

}  // namespace loom::tok
