// Tests, global functions, and str/dict/list methods (see builtins.h).
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <unordered_set>

#include "jinja/interpreter.h"
#include "jinja/operators.h"
#include "jinja/text.h"

namespace loom::jinja {
namespace {

// Jinja2's sandbox refuses larger ranges (MAX_RANGE); matching it keeps renders identical.
constexpr int64_t kMaxRange = 100000;

Status arg_error(const std::string& fn, const std::string& what) {
  return invalid_argument(fn + "(): " + what);
}

Result<std::string> str_arg(const CallArgs& a, size_t i, const char* name, const std::string& fn) {
  const Value* v = a.get(i, name);
  if (!v) return arg_error(fn, std::string("missing argument '") + name + "'");
  if (!v->is_string())
    return arg_error(fn, std::string("argument '") + name + "' must be str, not " + v->type_name());
  return v->str();
}

Result<int64_t> int_arg(const CallArgs& a, size_t i, const char* name, const std::string& fn,
                        int64_t dflt) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool())
    return arg_error(fn, std::string("argument '") + name + "' must be int, not " + v->type_name());
  return v->as_int();
}

// ---- global functions ----

class Builtin : public Callable {
 public:
  using Fn = Result<Value> (*)(Interpreter&, const CallArgs&);
  Builtin(std::string name, Fn fn) : name_(std::move(name)), fn_(fn) {}
  Result<Value> call(Interpreter& in, const CallArgs& args) override { return fn_(in, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

Result<Value> fn_range(Interpreter& in, const CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) return arg_error("range", "expected 1 to 3 arguments");
  for (const Value& v : a.pos)
    if (!v.is_int() && !v.is_bool())
      return arg_error("range", std::string("'") + v.type_name() +
                                    "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) return arg_error("range", "arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && stop > start) count = ((__int128)stop - start + step - 1) / step;
  if (step < 0 && stop < start) count = ((__int128)start - stop - step - 1) / -step;
  if (count > kMaxRange)
    return Status(StatusCode::kResourceExhausted,
                  "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.emplace_back(start + i * step);
  return Value::list(std::move(out));
}

Result<Value> make_dict(const CallArgs& a, const std::string& fn) {
  auto d = std::make_shared<Dict>();
  if (a.pos.size() > 1) return arg_error(fn, "expected at most 1 positional argument");
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.is_dict() || src.is_namespace()) {
      for (const auto& [k, v] : src.dict().entries) d->set(k, v);
    } else {
      LOOM_ASSIGN_OR_RETURN(List pairs, iterate(src));
      for (const Value& p : pairs) {
        if (!p.is_sequence() || p.items().size() != 2)
          return arg_error(fn, "sequence elements must be pairs");
        d->set(p.items()[0], p.items()[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) d->set(Value(k), v);
  return Value::dict(std::move(d));
}

Result<Value> fn_dict(Interpreter&, const CallArgs& a) {
  return make_dict(a, "dict");
}

Result<Value> fn_namespace(Interpreter& in, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(Value d, make_dict(a, "namespace"));
  // Namespaces nest through their arguments too (namespace(inner=ns) in a loop).
  if (value_nesting_exceeds(d, kMaxValueDepth - 1))
    return Status(
        StatusCode::kResourceExhausted,
        "namespace(): value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
  auto ns = std::make_shared<Dict>(d.dict());
  in.own_namespace(ns);
  return Value::namespace_(std::move(ns));
}

Result<Value> fn_raise_exception(Interpreter& in, const CallArgs& a) {
  const Value* m = a.get(0, "message");
  return in.raise(m ? to_str(*m) : std::string());
}

Result<Value> fn_strftime_now(Interpreter& in, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(std::string fmt, str_arg(a, 0, "format", "strftime_now"));
  std::tm tm = in.now();
  if (fmt.empty()) return Value(std::string());
  // strftime returns 0 both for "too small" and for an empty result; grow a few times.
  for (size_t cap = 256; cap <= (1u << 20); cap *= 4) {
    std::string buf(cap, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value(std::move(buf));
    }
  }
  return Value(std::string());
}

// ---- methods ----

const std::unordered_set<std::string>& str_methods() {
  static const std::unordered_set<std::string> k = {
      "strip",        "lstrip",      "rstrip",  "split",   "rsplit",    "startswith",
      "endswith",     "replace",     "upper",   "lower",   "title",     "capitalize",
      "casefold",     "swapcase",    "find",    "rfind",   "index",     "rindex",
      "count",        "format",      "join",    "isdigit", "isnumeric", "isdecimal",
      "isalpha",      "isalnum",     "isspace", "isupper", "islower",   "splitlines",
      "zfill",        "center",      "ljust",   "rjust",   "partition", "rpartition",
      "removeprefix", "removesuffix"};
  return k;
}

class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  Result<Value> call(Interpreter& in, const CallArgs& a) override;
  std::string name() const override { return std::string(self_.type_name()) + "." + name_; }

 private:
  Result<Value> call_str(Interpreter& in, const CallArgs& a);
  Value self_;
  std::string name_;
};

Result<Value> BoundMethod::call(Interpreter& in, const CallArgs& a) {
  const std::string fn = name();
  if (self_.is_string()) return call_str(in, a);
  if (self_.is_dict()) {
    const Dict& d = self_.dict();
    if (name_ == "items") {
      List out;
      for (const auto& [k, v] : d.entries) out.push_back(Value::tuple({k, v}));
      return Value::list(std::move(out));
    }
    if (name_ == "keys" || name_ == "values") {
      List out;
      for (const auto& [k, v] : d.entries) out.push_back(name_ == "keys" ? k : v);
      return Value::list(std::move(out));
    }
    if (name_ == "get") {
      if (a.pos.empty()) return arg_error(fn, "missing key");
      const Value* v = d.find(a.pos[0]);
      if (v) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    }
    if (name_ == "copy") return self_;
  }
  if (self_.is_sequence()) {
    const List& items = self_.items();
    if (name_ == "count" || name_ == "index") {
      if (a.pos.empty()) return arg_error(fn, "missing argument");
      int64_t count = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!values_equal(items[i], a.pos[0])) continue;
        if (name_ == "index") return Value(static_cast<int64_t>(i));
        ++count;
      }
      if (name_ == "index") return invalid_argument(repr(a.pos[0]) + " is not in list");
      return Value(count);
    }
  }
  return invalid_argument("access to attribute '" + name_ + "' of '" + self_.type_name() +
                          "' object is unsafe (the template sandbox does not allow changing it)");
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (char32_t c : utf8_decode(s))
    if (!pred(c)) return false;
  return true;
}

Result<Value> BoundMethod::call_str(Interpreter& in, const CallArgs& a) {
  const std::string& s = self_.str();
  const std::string fn = name();
  if (name_ == "strip" || name_ == "lstrip" || name_ == "rstrip") {
    const Value* c = a.get(0, "chars");
    if (c && !c->is_none() && !c->is_string()) return arg_error(fn, "arg must be None or str");
    const std::string* chars = c && c->is_string() ? &c->str() : nullptr;
    return Value(py_strip(s, name_ != "rstrip", name_ != "lstrip", chars));
  }
  if (name_ == "split" || name_ == "rsplit") {
    const Value* sep = a.get(0, "sep");
    if (sep && !sep->is_none() && !sep->is_string()) return arg_error(fn, "must be str or None");
    if (sep && sep->is_string() && sep->str().empty()) return arg_error(fn, "empty separator");
    LOOM_ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(a, 1, "maxsplit", fn, -1));
    List out;
    for (auto& p :
         py_split(s, sep && sep->is_string() ? &sep->str() : nullptr, maxsplit, name_ == "rsplit"))
      out.emplace_back(std::move(p));
    return Value::list(std::move(out));
  }
  if (name_ == "startswith" || name_ == "endswith") {
    if (a.pos.empty()) return arg_error(fn, "missing argument");
    List options;
    if (a.pos[0].is_tuple())
      options = a.pos[0].items();
    else
      options.push_back(a.pos[0]);
    for (const Value& o : options) {
      if (!o.is_string()) return arg_error(fn, "argument must be str or a tuple of str");
      const std::string& p = o.str();
      bool hit = name_ == "startswith"
                     ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                     : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      if (hit) return Value(true);
    }
    return Value(false);
  }
  if (name_ == "replace") {
    LOOM_ASSIGN_OR_RETURN(std::string old_s, str_arg(a, 0, "old", fn));
    LOOM_ASSIGN_OR_RETURN(std::string new_s, str_arg(a, 1, "new", fn));
    LOOM_ASSIGN_OR_RETURN(int64_t count, int_arg(a, 2, "count", fn, -1));
    std::string r = py_replace(s, old_s, new_s, count);
    LOOM_RETURN_IF_ERROR(in.check_size(r.size()));
    return Value(std::move(r));
  }
  if (name_ == "upper") return Value(ascii_upper(s));
  if (name_ == "lower" || name_ == "casefold") return Value(ascii_lower(s));
  if (name_ == "title") return Value(py_title(s));
  if (name_ == "capitalize") return Value(py_capitalize(s));
  if (name_ == "swapcase") {
    std::string r = s;
    for (char& c : r) {
      if (c >= 'a' && c <= 'z')
        c = static_cast<char>(c - 32);
      else if (c >= 'A' && c <= 'Z')
        c = static_cast<char>(c + 32);
    }
    return Value(std::move(r));
  }
  if (name_ == "find" || name_ == "rfind" || name_ == "index" || name_ == "rindex" ||
      name_ == "count") {
    LOOM_ASSIGN_OR_RETURN(std::string sub, str_arg(a, 0, "sub", fn));
    if (name_ == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    size_t p = (name_ == "find" || name_ == "index") ? s.find(sub) : s.rfind(sub);
    if (p == std::string::npos) {
      if (name_ == "index" || name_ == "rindex") return invalid_argument("substring not found");
      return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p))));
  }
  if (name_ == "format") {
    LOOM_ASSIGN_OR_RETURN(std::string r, py_format(s, a));
    LOOM_RETURN_IF_ERROR(in.check_size(r.size()));
    return Value(std::move(r));
  }
  if (name_ == "join") {
    if (a.pos.empty()) return arg_error(fn, "missing iterable");
    LOOM_ASSIGN_OR_RETURN(List items, iterate(a.pos[0]));
    std::string r;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        return arg_error(fn, "sequence item " + std::to_string(i) + ": expected str instance, " +
                                 items[i].type_name() + " found");
      if (i) r += s;
      r += items[i].str();
      LOOM_RETURN_IF_ERROR(in.check_size(r.size()));
    }
    return Value(std::move(r));
  }
  if (name_ == "isdigit" || name_ == "isnumeric" || name_ == "isdecimal")
    return Value(all_chars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name_ == "isalpha")
    return Value(all_chars(s, [](char32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }));
  if (name_ == "isalnum")
    return Value(all_chars(s, [](char32_t c) {
      return ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9');
    }));
  if (name_ == "isspace") return Value(all_chars(s, py_isspace));
  if (name_ == "isupper" || name_ == "islower") {
    bool any = false;
    for (char c : s) {
      if (c >= 'a' && c <= 'z') {
        if (name_ == "isupper") return Value(false);
        any = true;
      }
      if (c >= 'A' && c <= 'Z') {
        if (name_ == "islower") return Value(false);
        any = true;
      }
    }
    return Value(any);
  }
  if (name_ == "splitlines") {
    const Value* keep = a.get(0, "keepends");
    bool keepends = keep && keep->truthy();
    List out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\n' && s[i] != '\r') continue;
      size_t end = i;
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out.emplace_back(s.substr(start, (keepends ? i + 1 : end) - start));
      start = i + 1;
    }
    if (start < s.size()) out.emplace_back(s.substr(start));
    return Value::list(std::move(out));
  }
  if (name_ == "zfill" || name_ == "center" || name_ == "ljust" || name_ == "rjust") {
    LOOM_ASSIGN_OR_RETURN(int64_t width, int_arg(a, 0, "width", fn, 0));
    LOOM_RETURN_IF_ERROR(in.check_size(static_cast<size_t>(std::max<int64_t>(width, 0))));
    std::string fill = " ";
    if (name_ != "zfill" && a.pos.size() > 1 && a.pos[1].is_string()) fill = a.pos[1].str();
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return self_;
    int64_t pad = width - len;
    auto rep = [&](int64_t n) {
      std::string r;
      for (int64_t i = 0; i < n; ++i) r += fill;
      return r;
    };
    if (name_ == "zfill") {
      bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      return Value((sign ? s.substr(0, 1) : "") + std::string(pad, '0') + s.substr(sign ? 1 : 0));
    }
    if (name_ == "ljust") return Value(s + rep(pad));
    if (name_ == "rjust") return Value(rep(pad) + s);
    int64_t left = pad / 2 + (pad & width & 1);  // CPython's centering rule
    return Value(rep(left) + s + rep(pad - left));
  }
  if (name_ == "partition" || name_ == "rpartition") {
    LOOM_ASSIGN_OR_RETURN(std::string sep, str_arg(a, 0, "sep", fn));
    if (sep.empty()) return arg_error(fn, "empty separator");
    size_t p = name_ == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return name_ == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                  : Value::tuple({Value(""), Value(""), Value(s)});
    return Value::tuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
  }
  if (name_ == "removeprefix" || name_ == "removesuffix") {
    LOOM_ASSIGN_OR_RETURN(std::string x, str_arg(a, 0, "fix", fn));
    if (name_ == "removeprefix" && s.compare(0, x.size(), x) == 0 && s.size() >= x.size())
      return Value(s.substr(x.size()));
    if (name_ == "removesuffix" && s.size() >= x.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return self_;
  }
  return invalid_argument("str has no method '" + name_ + "'");
}

}  // namespace

std::shared_ptr<Callable> bind_method(const Value& receiver, const std::string& name) {
  static const std::unordered_set<std::string> kDict = {
      "items", "keys", "values", "get", "copy", "pop", "popitem", "update", "setdefault", "clear"};
  static const std::unordered_set<std::string> kList = {
      "index", "count", "append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"};
  bool ok = (receiver.is_string() && str_methods().count(name)) ||
            (receiver.is_dict() && kDict.count(name)) ||
            (receiver.is_list() && kList.count(name)) ||
            (receiver.is_tuple() && (name == "index" || name == "count"));
  if (!ok) return nullptr;
  return std::make_shared<BoundMethod>(receiver, name);
}

void add_globals(std::unordered_map<std::string, Value>& vars) {
  auto add = [&](const char* name, Builtin::Fn fn) {
    vars[name] = Value::callable(std::make_shared<Builtin>(name, fn));
  };
  add("range", fn_range);
  add("dict", fn_dict);
  add("namespace", fn_namespace);
  add("raise_exception", fn_raise_exception);
  add("strftime_now", fn_strftime_now);
}

// ---- tests ----

bool has_test(const std::string& name) {
  static const std::unordered_set<std::string> k = {
      "defined",     "undefined", "none",        "boolean", "false",    "true",     "integer",
      "float",       "number",    "string",      "mapping", "iterable", "sequence", "callable",
      "odd",         "even",      "divisibleby", "eq",      "equalto",  "==",       "ne",
      "!=",          "lt",        "lessthan",    "<",       "le",       "<=",       "gt",
      "greaterthan", ">",         "ge",          ">=",      "in",       "sameas",   "lower",
      "upper",       "escaped",   "filter",      "test"};
  return k.count(name) > 0;
}

Result<bool> apply_test(Interpreter& in, const std::string& name, const Value& v,
                        const CallArgs& args) {
  auto arg = [&]() -> Result<Value> {
    if (args.pos.empty()) return invalid_argument("test '" + name + "' needs an argument");
    return args.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Jinja2's Undefined is iterable (empty) and has __len__/__getitem__.
  if (name == "iterable" || name == "sequence")
    return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    std::string s = to_str(v);
    return name == "lower" ? ascii_lower(s) == s : ascii_upper(s) == s;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.is_undefined()) return undefined_error(v);
    if (!v.is_int() && !v.is_bool())
      return invalid_argument(std::string("test '") + name + "' needs an integer, got " +
                              v.type_name());
    int64_t x = v.as_int();
    if (name == "odd") return (x % 2) != 0;
    if (name == "even") return (x % 2) == 0;
    LOOM_ASSIGN_OR_RETURN(Value d, arg());
    if (!d.is_int() || d.as_int() == 0)
      return invalid_argument("divisibleby needs a non-zero integer");
    return x % d.as_int() == 0;
  }
  if (name == "sameas") {
    LOOM_ASSIGN_OR_RETURN(Value o, arg());
    if (v.is_none() || v.is_bool() || v.is_undefined())
      return v.kind() == o.kind() && values_equal(v, o);
    return v.kind() == o.kind() && values_equal(v, o) && (v.is_int() || v.is_string());
  }
  static const std::unordered_map<std::string, std::string> kCompare = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="},      {"ne", "!="},
      {"!=", "!="}, {"lt", "<"},       {"lessthan", "<"}, {"<", "<"},
      {"le", "<="}, {"<=", "<="},      {"gt", ">"},       {"greaterthan", ">"},
      {">", ">"},   {"ge", ">="},      {">=", ">="},      {"in", "in"}};
  auto it = kCompare.find(name);
  if (it != kCompare.end()) {
    LOOM_ASSIGN_OR_RETURN(Value o, arg());
    LOOM_ASSIGN_OR_RETURN(Value r, binary_op(it->second, v, o, SIZE_MAX));
    return r.truthy();
  }
  if (name == "filter" || name == "test") return false;
  return invalid_argument("no test named '" + name + "'");
}

// ---- formatting ----

Result<std::string> py_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        return invalid_argument("format: single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      return invalid_argument("format: expected '}' before end of string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    bool use_repr = false;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      use_repr = field.substr(bang + 1) == "r";
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
        field.find('[') != std::string::npos)
      return unsupported("format: format specs and field access are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_idx >= args.pos.size())
        return invalid_argument("format: not enough positional arguments");
      v = &args.pos[auto_idx++];
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      // Compared digit by digit: an index too long for any integer type is simply too big.
      if (field.size() > 9) return invalid_argument("format: not enough positional arguments");
      size_t k = std::stoul(field);
      if (k >= args.pos.size()) return invalid_argument("format: not enough positional arguments");
      v = &args.pos[k];
    } else {
      for (const auto& [name, val] : args.kw)
        if (name == field) v = &val;
      if (!v) return invalid_argument("format: missing keyword argument '" + field + "'");
    }
    out += use_repr ? repr(*v) : to_str(*v);
  }
  return out;
}

namespace {

constexpr int kMaxPrecision = 1000;

// printf of one double, however long the text (1e308 with "%.3f" is 312 characters).
std::string number_to_text(const char* format, int precision, double d) {
  const int n = precision < 0 ? std::snprintf(nullptr, 0, format, d)
                              : std::snprintf(nullptr, 0, format, precision, d);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  if (precision < 0)
    std::snprintf(out.data(), out.size(), format, d);
  else
    std::snprintf(out.data(), out.size(), format, precision, d);
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

}  // namespace

Result<std::string> percent_format(const std::string& fmt, const Value& args) {
  List pos;
  if (args.is_tuple())
    pos = args.items();
  else
    pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) return invalid_argument("incomplete format");
    const Value* v = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !args.is_dict())
        return invalid_argument("format requires a mapping");
      v = args.dict().find(fmt.substr(i + 1, close - i - 1));
      if (!v) return invalid_argument("format: missing key " + fmt.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    int precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      while (++i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        precision = precision * 10 + (fmt[i] - '0');
        // Python takes any precision; more digits than this only print zeros of no use to a
        // chat template, and would let one format make megabytes of text.
        if (precision > kMaxPrecision)
          return invalid_argument("format: precision too big (at most " +
                                  std::to_string(kMaxPrecision) + ")");
      }
    }
    if (i >= fmt.size()) return invalid_argument("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!v) {
      if (next >= pos.size()) return invalid_argument("not enough arguments for format string");
      v = &pos[next++];
    }
    char buf[64];
    switch (conv) {
      case 's':
        out += to_str(*v);
        break;
      case 'r':
        out += repr(*v);
        break;
      case 'd':
      case 'i':
        if (!v->is_number())
          return invalid_argument(std::string("%d format: a real number is required, not ") +
                                  v->type_name());
        if (v->is_float()) {
          const double d = std::trunc(v->as_double());
          if (!std::isfinite(d))
            return invalid_argument(std::string("%d format: cannot convert float ") +
                                    (std::isnan(d) ? "NaN" : "infinity") + " to integer");
          // Python prints the float's exact integer value, beyond int64 too.
          out += number_to_text("%.0f", -1, d);
        } else {
          out += std::to_string(v->as_int());
        }
        break;
      case 'f':
        if (!v->is_number())
          return invalid_argument(std::string("%f format: a real number is required, not ") +
                                  v->type_name());
        out += number_to_text("%.*f", precision < 0 ? 6 : precision, v->as_double());
        break;
      case 'x':
        if (!v->is_int()) return invalid_argument("%x format: an integer is required");
        std::snprintf(buf, sizeof(buf), "%llx", static_cast<long long>(v->as_int()));
        out += buf;
        break;
      default:
        return unsupported(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < pos.size() && !args.is_dict())
    return invalid_argument("not all arguments converted during string formatting");
  return out;
}

}  // namespace loom::jinja
