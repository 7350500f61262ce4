// Splits a Jinja template into tokens, applying whitespace control the way Jinja2 does with
// trim_blocks=True and lstrip_blocks=True (the Hugging Face chat template settings):
// "{%-"/"-%}" strip all whitespace on that side, "{%+"/"+%}" disable lstrip/trim, the first
// newline after a block or comment tag is dropped, and spaces before a block or comment tag
// that starts a line are removed. One trailing newline of the template is dropped
// (keep_trailing_newline=False) and "\r\n" / "\r" become "\n".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom::jinja {

enum class TokenType {
  kData,        // literal text (value = the text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // value = the unescaped string
  kInt,     // value = the digits (underscores removed)
  kFloat,
  kOp,  // value = the operator: + - * / // % ** ~ ( ) [ ] { } == != < <= > >= = . : | ,
  kEof,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace loom::jinja
