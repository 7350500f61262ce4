// Jinja2's builtin filters (see filters.h). Each follows jinja2/filters.py's behaviour for
// the arguments chat templates pass; tojson follows Hugging Face's override.
#include "jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/operators.h"
#include "jinja/text.h"

namespace loom::jinja {
namespace {

using FilterFn = Result<Value> (*)(Interpreter&, const Value&, const CallArgs&);

const Value* arg(const CallArgs& a, size_t i, std::string_view name) {
  return a.get(i, name);
}

bool flag(const CallArgs& a, size_t i, std::string_view name, bool dflt) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : dflt;
}

Result<int64_t> int_param(const CallArgs& a, size_t i, std::string_view name, int64_t dflt) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool())
    return invalid_argument(std::string(name) + " must be an integer, not " + v->type_name());
  return v->as_int();
}

// Jinja2's make_attrgetter: "a.b.0" looks each part up as an item, then as an attribute.
Result<Value> lookup_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // An index of more than 18 digits is past any list (and past what stoll takes): it is
    // looked up as a key, which finds nothing in a list.
    bool numeric = !part.empty() && part.size() <= 18 &&
                   part.find_first_not_of("0123456789") == std::string::npos;
    if (cur.is_undefined()) return undefined_error(cur);
    LOOM_ASSIGN_OR_RETURN(
        cur, get_item(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part)));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Result<Value> attr_of(const Value& item, const Value* attribute) {
  if (!attribute || attribute->is_none()) return item;
  if (attribute->is_int()) return get_item(item, *attribute);
  return lookup_path(item, to_str(*attribute));
}

Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(ascii_lower(v.str()));
  return v;
}

Result<Value> f_abs(Interpreter&, const Value& v, const CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_number()) return v.as_int() < 0 ? unary_minus(Value(v.as_int())) : Value(v.as_int());
  return invalid_argument(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Result<Value> f_attr(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* n = arg(a, 0, "name");
  if (!n) return invalid_argument("attr needs a name");
  // Jinja2's attr() is getattr() only: dict keys are not attributes.
  std::string name = to_str(*n);
  if (v.is_undefined()) return undefined_error(v);
  if (auto m = bind_method(v, name)) return Value::callable(std::move(m));
  if (v.is_namespace())
    if (const Value* x = v.dict().find(name)) return *x;
  return Value::undefined(std::string("'") + v.type_name() + " object' has no attribute '" + name +
                          "'");
}

Result<Value> f_batch(Interpreter& in, const Value& v, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(int64_t n, int_param(a, 0, "linecount", 0));
  if (n <= 0) return invalid_argument("batch size must be positive");
  const Value* fill = arg(a, 1, "fill_with");
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  List out, cur;
  for (Value& x : items) {
    cur.push_back(std::move(x));
    if (static_cast<int64_t>(cur.size()) == n)
      out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none()) {
      // batch(10**12, 'x') would fill a trillion items: bounded like any list the render makes.
      LOOM_RETURN_IF_ERROR(in.check_size(static_cast<size_t>(n)));
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Result<Value> f_capitalize(Interpreter&, const Value& v, const CallArgs&) {
  return Value(py_capitalize(to_str(v)));
}
Result<Value> f_lower(Interpreter&, const Value& v, const CallArgs&) {
  return Value(ascii_lower(to_str(v)));
}
Result<Value> f_upper(Interpreter&, const Value& v, const CallArgs&) {
  return Value(ascii_upper(to_str(v)));
}

Result<Value> f_title(Interpreter&, const Value& v, const CallArgs&) {
  // Jinja2 splits before runs of [-\s({\[<] and capitalizes each piece.
  std::string s = to_str(v), out;
  size_t i = 0;
  auto is_sep = [](char c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' ||
           (c >= '\t' && c <= '\r');
  };
  while (i < s.size()) {
    size_t j = i;
    if (is_sep(s[i])) {
      while (j < s.size() && is_sep(s[j])) ++j;
      out += s.substr(i, j - i);
    } else {
      while (j < s.size() && !is_sep(s[j])) ++j;
      std::string w = ascii_lower(s.substr(i, j - i));
      if (w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
      out += w;
    }
    i = j;
  }
  return Value(std::move(out));
}

Result<Value> f_center(Interpreter& in, const Value& v, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(int64_t w, int_param(a, 0, "width", 80));
  CallArgs ca;
  ca.pos.push_back(Value(w));
  auto m = bind_method(Value(to_str(v)), "center");
  return m->call(in, ca);
}

Result<Value> f_length(Interpreter&, const Value& v, const CallArgs&) {
  LOOM_ASSIGN_OR_RETURN(int64_t n, length(v));
  return Value(n);
}

Result<Value> f_default(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  bool boolean = flag(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value(std::string());
  return v;
}

Result<Value> f_dictsort(Interpreter&, const Value& v, const CallArgs& a) {
  if (!v.is_dict())
    return invalid_argument(std::string("dictsort expects a dict, got ") + v.type_name());
  bool cs = flag(a, 0, "case_sensitive", false);
  const Value* by = arg(a, 1, "by");
  bool reverse = flag(a, 2, "reverse", false);
  int pos = 0;
  if (by && by->is_string()) {
    if (by->str() == "value")
      pos = 1;
    else if (by->str() != "key")
      return invalid_argument("You can only sort by either 'key' or 'value'");
  }
  List items;
  for (const auto& [k, val] : v.dict().entries) items.push_back(Value::tuple({k, val}));
  Status err;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Result<bool> lt = values_less(fold_case(x.items()[pos], cs), fold_case(y.items()[pos], cs));
    if (!lt.is_ok()) err = lt.status();
    return lt.is_ok() && *lt;
  });
  LOOM_RETURN_IF_ERROR(err);
  if (reverse) std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Result<Value> f_escape(Interpreter&, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

Result<Value> f_first(Interpreter&, const Value& v, const CallArgs&) {
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> f_last(Interpreter&, const Value& v, const CallArgs&) {
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> f_float(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  Value dflt = d ? *d : Value(0.0);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.str(), true, true, nullptr);
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(x);
  }
  return dflt;
}

Result<Value> f_int(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  Value dflt = d ? *d : Value(int64_t{0});
  LOOM_ASSIGN_OR_RETURN(int64_t base, int_param(a, 1, "base", 10));
  if (v.is_float()) {
    double x = v.as_double();
    if (!std::isfinite(x) || std::fabs(x) > 9.2e18) return dflt;
    return Value(static_cast<int64_t>(x));
  }
  if (v.is_number()) return Value(v.as_int());
  if (v.is_string()) {
    std::string s = py_strip(v.str(), true, true, nullptr);
    std::string digits;
    for (char c : s)
      if (c != '_') digits += c;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
    if (!digits.empty() && end == digits.c_str() + digits.size() && errno == 0)
      return Value(static_cast<int64_t>(x));
    double f = std::strtod(s.c_str(), &end);  // Jinja2 falls back to int(float(s))
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(f) && std::fabs(f) < 9.2e18)
      return Value(static_cast<int64_t>(f));
  }
  return dflt;
}

Result<Value> f_format(Interpreter&, const Value& v, const CallArgs& a) {
  Value args;
  if (!a.kw.empty()) {
    auto d = std::make_shared<Dict>();
    for (const auto& [k, x] : a.kw) d->set(Value(k), x);
    args = Value::dict(std::move(d));
  } else {
    args = Value::tuple(a.pos);
  }
  LOOM_ASSIGN_OR_RETURN(std::string s, percent_format(to_str(v), args));
  return Value(std::move(s));
}

Result<Value> f_indent(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string indention;
  if (w && w->is_string()) {
    indention = w->str();
  } else {
    // An integer (a float or a list is an error, as in Jinja2), checked against the output
    // limit before the spaces are made: indent(10**12) must not allocate a terabyte.
    LOOM_ASSIGN_OR_RETURN(int64_t width, int_param(a, 0, "width", 4));
    const size_t n = static_cast<size_t>(std::max<int64_t>(width, 0));
    LOOM_RETURN_IF_ERROR(in.check_size(n));
    indention.assign(n, ' ');
  }
  bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  std::string s = to_str(v) + "\n";
  CallArgs none;
  LOOM_ASSIGN_OR_RETURN(Value lines_v, bind_method(Value(s), "splitlines")->call(in, none));
  const List& lines = lines_v.items();
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i].str();
  } else {
    rv = lines.empty() ? "" : lines[0].str();
    for (size_t i = 1; i < lines.size(); ++i)
      rv += "\n" + (lines[i].str().empty() ? "" : indention + lines[i].str());
  }
  if (first) rv = indention + rv;
  LOOM_RETURN_IF_ERROR(in.check_size(rv.size()));
  return Value(std::move(rv));
}

Result<Value> f_items(Interpreter& in, const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict())
    return invalid_argument(std::string("Can only get item pairs from a mapping, not ") +
                            v.type_name());
  return bind_method(v, "items")->call(in, CallArgs{});
}

Result<Value> f_join(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "d");
  const Value* attribute = arg(a, 1, "attribute");
  std::string sep = d ? to_str(*d) : "";
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(Value x, attr_of(items[i], attribute));
    if (i) out += sep;
    out += to_str(x);
    LOOM_RETURN_IF_ERROR(in.check_size(out.size()));
  }
  return Value(std::move(out));
}

Result<Value> f_list(Interpreter&, const Value& v, const CallArgs&) {
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  return Value::list(std::move(items));
}

Result<Value> f_map(Interpreter& in, const Value& v, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  List out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, x] : a.kw) {
    if (k == "attribute") attribute = &x;
    if (k == "default") dflt = &x;
  }
  if (attribute) {
    for (const Value& item : items) {
      LOOM_ASSIGN_OR_RETURN(Value x, attr_of(item, attribute));
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
    return Value::list(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string())
    return invalid_argument("map needs a filter name or attribute=");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : items) {
    LOOM_RETURN_IF_ERROR(in.count_step());
    LOOM_ASSIGN_OR_RETURN(Value x, apply_filter(in, a.pos[0].str(), item, rest));
    out.push_back(std::move(x));
  }
  return Value::list(std::move(out));
}

Result<Value> min_max(const Value& v, const CallArgs& a, bool want_max) {
  bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  if (items.empty())
    return Value::undefined(std::string("No aggregated item, sequence was empty."));
  Value best = items[0];
  LOOM_ASSIGN_OR_RETURN(Value best_key, attr_of(items[0], attribute));
  best_key = fold_case(best_key, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(Value k, attr_of(items[i], attribute));
    k = fold_case(k, cs);
    LOOM_ASSIGN_OR_RETURN(bool better,
                          want_max ? values_less(best_key, k) : values_less(k, best_key));
    if (better) {
      best = items[i];
      best_key = k;
    }
  }
  return best;
}
Result<Value> f_max(Interpreter&, const Value& v, const CallArgs& a) {
  return min_max(v, a, true);
}
Result<Value> f_min(Interpreter&, const Value& v, const CallArgs& a) {
  return min_max(v, a, false);
}

Result<Value> f_replace(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* old_v = arg(a, 0, "old");
  const Value* new_v = arg(a, 1, "new");
  if (!old_v || !new_v) return invalid_argument("replace needs old and new");
  LOOM_ASSIGN_OR_RETURN(int64_t count, int_param(a, 2, "count", -1));
  std::string r = py_replace(to_str(v), to_str(*old_v), to_str(*new_v), count);
  LOOM_RETURN_IF_ERROR(in.check_size(r.size()));
  return Value(std::move(r));
}

Result<Value> f_reverse(Interpreter&, const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value(utf8_encode(u));
  }
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Result<Value> f_round(Interpreter&, const Value& v, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(int64_t precision, int_param(a, 0, "precision", 0));
  const Value* m = arg(a, 1, "method");
  std::string method = m ? to_str(*m) : "common";
  if (!v.is_number())
    return invalid_argument(std::string("round expects a number, got ") + v.type_name());
  double x = v.as_double();
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());
    // printf rounds the exact binary value half-to-even, like CPython's round().
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f",
                  static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), x);
    return Value(std::strtod(buf, nullptr));
  }
  if (method != "ceil" && method != "floor")
    return invalid_argument("method must be common, ceil or floor");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
  return Value(r / scale);
}

Result<Value> select_impl(Interpreter& in, const Value& v, const CallArgs& a, bool by_attr,
                          bool keep) {
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  size_t i = 0;
  const Value* attribute = nullptr;
  if (by_attr) {
    if (a.pos.empty()) return invalid_argument("selectattr/rejectattr need an attribute name");
    attribute = &a.pos[i++];
  }
  std::string test;
  if (i < a.pos.size()) test = to_str(a.pos[i++]);
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + std::min(i, a.pos.size()), a.pos.end());
  rest.kw = a.kw;
  List out;
  for (const Value& item : items) {
    LOOM_RETURN_IF_ERROR(in.count_step());
    LOOM_ASSIGN_OR_RETURN(Value x, attr_of(item, attribute));
    bool r;
    if (test.empty()) {
      r = x.truthy();
    } else {
      LOOM_ASSIGN_OR_RETURN(r, apply_test(in, test, x, rest));
    }
    if (r == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Result<Value> f_select(Interpreter& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, false, true);
}
Result<Value> f_reject(Interpreter& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, false, false);
}
Result<Value> f_selectattr(Interpreter& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, true, true);
}
Result<Value> f_rejectattr(Interpreter& in, const Value& v, const CallArgs& a) {
  return select_impl(in, v, a, true, false);
}

Result<Value> f_safe(Interpreter&, const Value& v, const CallArgs&) {
  return v;
}

Result<Value> f_sort(Interpreter&, const Value& v, const CallArgs& a) {
  bool reverse = flag(a, 0, "reverse", false);
  bool cs = flag(a, 1, "case_sensitive", false);
  const Value* attribute = arg(a, 2, "attribute");
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& x : items) {
    LOOM_ASSIGN_OR_RETURN(Value k, attr_of(x, attribute));
    keyed.emplace_back(fold_case(k, cs), std::move(x));
  }
  Status err;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    Result<bool> lt = reverse ? values_less(y.first, x.first) : values_less(x.first, y.first);
    if (!lt.is_ok()) err = lt.status();
    return lt.is_ok() && *lt;
  });
  LOOM_RETURN_IF_ERROR(err);
  List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Result<Value> f_string(Interpreter&, const Value& v, const CallArgs&) {
  return Value(to_str(v));
}

Result<Value> f_striptags(Interpreter&, const Value& v, const CallArgs&) {
  std::string s = to_str(v), text;
  bool in_tag = false;
  for (char c : s) {
    if (c == '<')
      in_tag = true;
    else if (c == '>' && in_tag)
      in_tag = false;
    else if (!in_tag)
      text += c;
  }
  std::string out;
  for (const std::string& w : py_split(text, nullptr, -1, false))
    out += (out.empty() ? "" : " ") + w;
  return Value(std::move(out));
}

Result<Value> f_sum(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* attribute = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value(int64_t{0});
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  for (const Value& item : items) {
    LOOM_ASSIGN_OR_RETURN(Value x, attr_of(item, attribute));
    LOOM_ASSIGN_OR_RETURN(total, binary_op("+", total, x, SIZE_MAX));
  }
  return total;
}

Result<Value> f_tojson(Interpreter& in, const Value& v, const CallArgs& a) {
  JsonFormat f;
  const Value* indent = a.get(99, "indent");
  if (!indent && !a.pos.empty()) indent = &a.pos[0];  // tojson(4)
  if (indent && !indent->is_none()) {
    if (indent->is_string()) return unsupported("tojson: a string indent is not supported");
    if (!indent->is_int() && !indent->is_bool())
      return invalid_argument(std::string("tojson: indent must be an integer, not ") +
                              indent->type_name());
    f.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
  }
  if (const Value* sep = a.get(99, "separators");
      sep && sep->is_sequence() && sep->items().size() == 2) {
    f.item_sep = to_str(sep->items()[0]);
    f.key_sep = to_str(sep->items()[1]);
  }
  f.sort_keys = flag(a, 99, "sort_keys", false);
  LOOM_ASSIGN_OR_RETURN(std::string s, to_json(v, f));
  if (flag(a, 99, "ensure_ascii", false)) {
    std::string esc;
    for (char32_t c : utf8_decode(s)) {
      char buf[16];
      if (c < 0x80) {
        esc += static_cast<char>(c);
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        esc += buf;
      } else {
        unsigned u = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (u >> 10), 0xdc00 + (u & 0x3ff));
        esc += buf;
      }
    }
    s = std::move(esc);
  }
  LOOM_RETURN_IF_ERROR(in.check_size(s.size()));
  return Value(std::move(s));
}

Result<Value> f_trim(Interpreter&, const Value& v, const CallArgs& a) {
  const Value* c = arg(a, 0, "chars");
  std::string chars = c && !c->is_none() ? to_str(*c) : "";
  return Value(py_strip(to_str(v), true, true, c && !c->is_none() ? &chars : nullptr));
}

Result<Value> f_truncate(Interpreter&, const Value& v, const CallArgs& a) {
  LOOM_ASSIGN_OR_RETURN(int64_t len, int_param(a, 0, "length", 255));
  bool killwords = flag(a, 1, "killwords", false);
  const Value* end_v = arg(a, 2, "end");
  std::string end = end_v ? to_str(*end_v) : "...";
  LOOM_ASSIGN_OR_RETURN(int64_t leeway, int_param(a, 3, "leeway", 5));
  std::u32string s = utf8_decode(to_str(v));
  int64_t n = static_cast<int64_t>(s.size()), e = static_cast<int64_t>(utf8_length(end));
  if (n <= len + leeway) return Value(to_str(v));
  std::u32string cut = s.substr(0, static_cast<size_t>(std::max<int64_t>(len - e, 0)));
  if (!killwords) {
    size_t sp = cut.rfind(U' ');
    if (sp != std::u32string::npos) cut.resize(sp);
  }
  return Value(utf8_encode(cut) + end);
}

Result<Value> f_unique(Interpreter&, const Value& v, const CallArgs& a) {
  bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  LOOM_ASSIGN_OR_RETURN(List items, iterate(v));
  List out, seen;
  for (const Value& x : items) {
    LOOM_ASSIGN_OR_RETURN(Value k, attr_of(x, attribute));
    k = fold_case(k, cs);
    bool dup = false;
    for (const Value& s : seen)
      if (values_equal(s, k)) dup = true;
    if (dup) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Result<Value> f_wordcount(Interpreter&, const Value& v, const CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(to_str(v))) {
    bool w = c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') ||
             (c >= 0x80 && !py_isspace(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Result<Value> f_pprint(Interpreter&, const Value& v, const CallArgs&) {
  return Value(repr(v));
}

const std::unordered_map<std::string, FilterFn>& registry() {
  static const std::unordered_map<std::string, FilterFn> k = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"pprint", f_pprint},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"striptags", f_striptags},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
      {"forceescape", f_escape},
  };
  return k;
}

}  // namespace

bool has_filter(const std::string& name) {
  return registry().count(name) > 0;
}

Result<Value> apply_filter(Interpreter& in, const std::string& name, const Value& v,
                           const CallArgs& args) {
  auto it = registry().find(name);
  if (it == registry().end()) return invalid_argument("no filter named '" + name + "'");
  return it->second(in, v, args);
}

}  // namespace loom::jinja
