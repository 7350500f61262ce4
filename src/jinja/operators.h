// Python semantics of Jinja operators and access: arithmetic, comparison, membership,
// attribute/item lookup (with bound str/dict/list methods), slicing and iteration.
#pragma once

#include <string>

#include "base/status.h"
#include "jinja/value.h"

namespace loom::jinja {

// The error Jinja2 raises when an undefined value is used (attribute, call, arithmetic).
Status undefined_error(const Value& u);

// op: + - * / // % ** ~ == != < <= > >= in "not in". max_bytes bounds strings/lists built.
Result<Value> binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes);
Result<Value> unary_minus(const Value& a);
Result<bool> contains(const Value& container, const Value& item);

Result<Value> get_attr(const Value& obj, const std::string& name);
Result<Value> get_item(const Value& obj, const Value& key);
Result<Value> slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The items a for loop or a filter sees: list/tuple items, dict keys, string characters.
Result<List> iterate(const Value& v);
// Python's len().
Result<int64_t> length(const Value& v);

}  // namespace loom::jinja
