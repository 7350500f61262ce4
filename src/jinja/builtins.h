// Jinja tests ("x is defined"), global functions (range, namespace, dict, raise_exception,
// strftime_now) and the str/dict/list methods templates call (s.strip(), d.items(), ...).
#pragma once

#include <string>

#include "base/status.h"
#include "jinja/value.h"

namespace loom::jinja {

Result<bool> apply_test(Interpreter& in, const std::string& name, const Value& v,
                        const CallArgs& args);
bool has_test(const std::string& name);

// Adds the global functions to a scope's variables.
void add_globals(std::unordered_map<std::string, Value>& vars);

// A bound method of a str/dict/list receiver, or nullptr when `name` is not one.
std::shared_ptr<Callable> bind_method(const Value& receiver, const std::string& name);

// Python str.format for "{}" / "{0}" / "{name}" fields (no format specs beyond none).
Result<std::string> py_format(const std::string& fmt, const CallArgs& args);
// The printf-style "%s" % args operator / format filter.
Result<std::string> percent_format(const std::string& fmt, const Value& args);

}  // namespace loom::jinja
