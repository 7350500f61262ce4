// Recursive-descent parser from tokens to the AST, following Jinja2's grammar and operator
// precedence (including its quirks: ** is left-associative, unary minus binds tighter than **,
// filters bind tighter than unary minus's operand but apply to the negated value).
#pragma once

#include <memory>
#include <string_view>

#include "base/status.h"
#include "jinja/ast.h"

namespace loom::jinja {

Result<std::shared_ptr<const Program>> parse_template(std::string_view source);

}  // namespace loom::jinja
