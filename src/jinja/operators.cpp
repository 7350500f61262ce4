// Operators and access with Python semantics (see operators.h).
#include "jinja/operators.h"

#include <cmath>

#include "jinja/builtins.h"
#include "jinja/text.h"

namespace loom::jinja {

Status undefined_error(const Value& u) {
  const std::string& hint = u.undefined_hint();
  return invalid_argument(hint.empty() ? "value is undefined" : hint);
}

namespace {

Status type_error(const std::string& op, const Value& a, const Value& b) {
  return invalid_argument("unsupported operand type(s) for " + op + ": '" + a.type_name() +
                          "' and '" + b.type_name() + "'");
}

Status overflow() {
  return out_of_range("integer overflow (integers are 64-bit)");
}

Result<Value> repeat(const Value& seq, int64_t n, size_t max_bytes) {
  if (n <= 0)
    return seq.is_string()  ? Value(std::string())
           : seq.is_tuple() ? Value::tuple({})
                            : Value::list({});
  if (seq.is_string()) {
    if (seq.str().size() * static_cast<unsigned __int128>(n) > max_bytes)
      return Status(StatusCode::kResourceExhausted, "string repetition exceeds the output limit");
    std::string out;
    out.reserve(seq.str().size() * n);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  if (seq.items().size() * static_cast<unsigned __int128>(n) > max_bytes / 8)
    return Status(StatusCode::kResourceExhausted, "list repetition exceeds the output limit");
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Result<Value> arith(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) {
    bool use_float = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_double() == 0) return invalid_argument("division by zero");
      return Value(a.as_double() / b.as_double());
    }
    if (!use_float) {
      int64_t x = a.as_int(), y = b.as_int(), r = 0;
      if (op == "+") {
        if (__builtin_add_overflow(x, y, &r)) return overflow();
        return Value(r);
      }
      if (op == "-") {
        if (__builtin_sub_overflow(x, y, &r)) return overflow();
        return Value(r);
      }
      if (op == "*") {
        if (__builtin_mul_overflow(x, y, &r)) return overflow();
        return Value(r);
      }
      if (op == "//" || op == "%") {
        if (y == 0) return invalid_argument("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value(op == "//" ? q : m);
      }
      if (op == "**") {
        if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
        int64_t result = 1, base = x;
        while (y > 0) {
          if (y & 1)
            if (__builtin_mul_overflow(result, base, &result)) return overflow();
          y >>= 1;
          if (y > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
        }
        return Value(result);
      }
    } else {
      double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "**") return Value(std::pow(x, y));
      if (op == "//" || op == "%") {
        if (y == 0) return invalid_argument("float division or modulo by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        if (op == "%") return Value(m);
        double div = (x - m) / y, fd = std::floor(div);  // CPython's float_floor_div
        if (div - fd > 0.5) fd += 1;
        return Value(fd);
      }
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > max_bytes)
        return Status(StatusCode::kResourceExhausted, "string exceeds the output limit");
      return Value(a.str() + b.str());
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      if (a.items().size() + b.items().size() > max_bytes / 8)
        return Status(StatusCode::kResourceExhausted, "list exceeds the output limit");
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool()))
      return repeat(a, b.as_int(), max_bytes);
    if ((b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool()))
      return repeat(b, a.as_int(), max_bytes);
  }
  if (op == "%" && a.is_string()) {
    LOOM_ASSIGN_OR_RETURN(std::string s, percent_format(a.str(), b));
    return Value(std::move(s));
  }
  return type_error(op, a, b);
}

}  // namespace

Result<Value> binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
  if (op == "==") return Value(values_equal(a, b));
  if (op == "!=") return Value(!values_equal(a, b));
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    if (a.is_undefined()) return undefined_error(a);
    if (b.is_undefined()) return undefined_error(b);
    if (op == "<" || op == ">") {
      LOOM_ASSIGN_OR_RETURN(bool lt, op == "<" ? values_less(a, b) : values_less(b, a));
      return Value(lt);
    }
    if (op == "<=") {
      LOOM_ASSIGN_OR_RETURN(bool gt, values_less(b, a));
      return Value(!gt);
    }
    LOOM_ASSIGN_OR_RETURN(bool lt, values_less(a, b));
    return Value(!lt);
  }
  if (op == "in" || op == "not in") {
    LOOM_ASSIGN_OR_RETURN(bool c, contains(b, a));
    return Value(op == "in" ? c : !c);
  }
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    if (s.size() > max_bytes)
      return Status(StatusCode::kResourceExhausted, "string exceeds the output limit");
    return Value(std::move(s));
  }
  return arith(op, a, b, max_bytes);
}

Result<Value> unary_minus(const Value& a) {
  if (a.is_undefined()) return undefined_error(a);
  if (a.is_float()) return Value(-a.as_double());
  if (a.is_number()) {
    if (a.as_int() == INT64_MIN) return overflow();
    return Value(-a.as_int());
  }
  return invalid_argument(std::string("bad operand type for unary -: '") + a.type_name() + "'");
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string())
        return invalid_argument(std::string("'in <string>' requires string as left operand, not ") +
                                item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.items())
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::kDict:
      return container.dict().find(item) != nullptr;
    default:
      return invalid_argument(std::string("argument of type '") + container.type_name() +
                              "' is not iterable");
  }
}

Result<Value> get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (auto m = bind_method(obj, name)) return Value::callable(std::move(m));
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.dict().find(name)) return *v;
  }
  std::string owner = obj.is_none() ? "None" : std::string("'") + obj.type_name() + " object'";
  return Value::undefined(owner + " has no attribute '" + name + "'");
}

namespace {

// Python index normalization; returns false when out of range.
bool norm_index(int64_t& i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n;
}

}  // namespace

Result<Value> get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
    if (key.is_string()) return get_attr(obj, key.str());
    return Value::undefined("'dict object' has no attribute " + repr(key));
  }
  if ((obj.is_sequence() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      if (is_ascii(obj.str())) {
        if (!norm_index(i, static_cast<int64_t>(obj.str().size())))
          return Value::undefined("'str object' has no element " + std::to_string(key.as_int()));
        return Value(std::string(1, obj.str()[i]));
      }
      std::u32string u = utf8_decode(obj.str());
      if (!norm_index(i, static_cast<int64_t>(u.size())))
        return Value::undefined("'str object' has no element " + std::to_string(key.as_int()));
      return Value(utf8_encode(std::u32string_view(u).substr(i, 1)));
    }
    if (!norm_index(i, static_cast<int64_t>(obj.items().size())))
      return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " +
                              std::to_string(key.as_int()));
    return obj.items()[i];
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " +
                          repr(key));
}

Result<Value> slice(const Value& obj, const Value& start_v, const Value& stop_v,
                    const Value& step_v) {
  if (obj.is_undefined()) return undefined_error(obj);
  auto as_opt = [](const Value& v, int64_t& out) -> Result<bool> {
    if (v.is_undefined() || v.is_none()) return false;
    if (!v.is_int() && !v.is_bool())
      return invalid_argument("slice indices must be integers or None");
    out = v.as_int();
    return true;
  };
  int64_t step = 1, start = 0, stop = 0;
  LOOM_ASSIGN_OR_RETURN(bool has_step, as_opt(step_v, step));
  if (!has_step) step = 1;
  if (step == 0) return invalid_argument("slice step cannot be zero");
  std::u32string u;
  bool is_str = obj.is_string();
  int64_t n;
  if (is_str) {
    u = utf8_decode(obj.str());
    n = static_cast<int64_t>(u.size());
  } else if (obj.is_sequence()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    return invalid_argument(std::string("'") + obj.type_name() + "' object is not subscriptable");
  }
  LOOM_ASSIGN_OR_RETURN(bool has_start, as_opt(start_v, start));
  LOOM_ASSIGN_OR_RETURN(bool has_stop, as_opt(stop_v, stop));
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](bool has, int64_t& v, int64_t dflt) {
    if (!has) {
      v = dflt;
      return;
    }
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
  };
  adjust(has_start, start, step < 0 ? n - 1 : 0);
  adjust(has_stop, stop, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) idx.push_back(i);
  } else {
    for (int64_t i = start; i > stop; i += step) idx.push_back(i);
  }
  if (is_str) {
    std::u32string r;
    for (int64_t i : idx) r.push_back(u[i]);
    return Value(utf8_encode(r));
  }
  List r;
  for (int64_t i : idx) r.push_back(obj.items()[i]);
  return obj.is_tuple() ? Value::tuple(std::move(r)) : Value::list(std::move(r));
}

Result<List> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return List{};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.items();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, val] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : utf8_decode(v.str())) {
        std::string s;
        utf8_append(s, c);
        chars.emplace_back(std::move(s));
      }
      return chars;
    }
    default:
      return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

Result<int64_t> length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return int64_t{0};
    case Value::Kind::kString:
      return static_cast<int64_t>(utf8_length(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      return invalid_argument(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

}  // namespace loom::jinja
