// Jinja2's builtin filters with Hugging Face's tojson (json.dumps, ensure_ascii=False).
#pragma once

#include <string>

#include "base/status.h"
#include "jinja/value.h"

namespace loom::jinja {

// Unknown names fail only when used (Jinja2 3.x defers the error for untaken branches).
bool has_filter(const std::string& name);

Result<Value> apply_filter(Interpreter& in, const std::string& name, const Value& v,
                           const CallArgs& args);

}  // namespace loom::jinja
