// Value semantics: truthiness, equality, ordering, str()/repr() printing and json.dumps.
#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "jinja/text.h"

namespace loom::jinja {

Value Value::list(List items) {
  Value v(Kind::kList);
  v.data_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v(Kind::kTuple);
  v.data_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict(std::shared_ptr<Dict> d) {
  Value v(Kind::kDict);
  v.data_ = std::move(d);
  return v;
}

Value Value::new_dict() {
  return dict(std::make_shared<Dict>());
}

Value Value::namespace_(std::shared_ptr<Dict> d) {
  Value v(Kind::kNamespace);
  v.data_ = std::move(d);
  return v;
}

Value Value::callable(std::shared_ptr<Callable> c) {
  Value v(Kind::kCallable);
  v.data_ = std::move(c);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return dict().size() != 0;
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "?";
}

namespace {

// Python hashes equal numbers equally, so 1, 1.0 and True are one key.
std::string key_of(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return "s" + k.str();
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return "n" + std::to_string(k.as_int());
    case Value::Kind::kFloat: {
      double d = k.as_double();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
        return "n" + std::to_string(static_cast<int64_t>(d));
      return "f" + py_float_repr(d);
    }
    case Value::Kind::kNone:
      return "N";
    default:
      return "r" + repr(k);
  }
}

}  // namespace

const Value* Dict::find(const Value& key) const {
  auto it = index.find(key_of(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void Dict::set(const Value& key, Value v) {
  auto [it, inserted] = index.emplace(key_of(key), entries.size());
  if (inserted) {
    entries.emplace_back(key, std::move(v));
  } else {
    entries[it->second].second = std::move(v);
  }
}

const Value* CallArgs::get(size_t i, std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return i < pos.size() ? &pos[i] : nullptr;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) {
    return false;
  }
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const List &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* o = y.find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.dict() == &b.dict();
    case Value::Kind::kCallable:
      return &a.fn() == &b.fn();
    default:
      return false;
  }
}

Result<bool> values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_sequence() && a.kind() == b.kind()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return invalid_argument(std::string("'<' not supported between instances of '") + a.type_name() +
                          "' and '" + b.type_name() + "'");
}

bool value_nesting_exceeds(const Value& v, int max_depth) {
  // Depth-first with an explicit stack. Shared containers are revisited only when reached
  // deeper than before, so a value built by doubling costs its distinct nodes times the depth,
  // not its exponential size as a tree.
  std::unordered_map<const void*, int> deepest;
  std::vector<std::pair<const Value*, int>> todo = {{&v, 0}};
  while (!todo.empty()) {
    auto [x, depth] = todo.back();
    todo.pop_back();
    const void* node = nullptr;
    if (x->is_sequence()) {
      node = &x->items();
    } else if (x->is_dict() || x->is_namespace()) {
      node = &x->dict();
    } else {
      continue;
    }
    if (depth + 1 > max_depth) return true;
    auto [it, fresh] = deepest.emplace(node, depth);
    if (!fresh) {
      if (it->second >= depth) continue;
      it->second = depth;
    }
    if (x->is_sequence()) {
      for (const Value& item : x->items()) todo.emplace_back(&item, depth + 1);
    } else {
      for (const auto& [k, val] : x->dict().entries) todo.emplace_back(&val, depth + 1);
    }
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kString:
      return v.str();
    default:
      return repr(v);
  }
}

namespace {

// repr's bounds. A namespace can hold itself: a container already being printed prints as
// "[...]" / "{...}", as Python's repr does. Values are shared, not copied, so a few doublings
// build a list whose text is exponentially long, and a loop can nest lists thousands deep:
// past kReprMaxDepth a container prints as "[...]" too, and once the text passes
// kReprMaxBytes (more than any render may output) the rest is dropped, so that the render's
// output limit then fails it with a clear error instead of the process running out of memory.
constexpr int kReprMaxDepth = 256;
constexpr size_t kReprMaxBytes = size_t{64} << 20;

void repr_into(std::string& out, const Value& v, std::vector<const void*>& open) {
  if (out.size() > kReprMaxBytes) return;
  const int depth = static_cast<int>(open.size());
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      out += py_float_repr(v.as_double());
      return;
    case Value::Kind::kString:
      out += py_str_repr(v.str());
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      bool tuple = v.is_tuple();
      out += tuple ? "(" : "[";
      const List& items = v.items();
      if (!items.empty() &&
          (depth >= kReprMaxDepth || std::find(open.begin(), open.end(), &items) != open.end())) {
        out += "...";
      } else {
        open.push_back(&items);
        for (size_t i = 0; i < items.size() && out.size() <= kReprMaxBytes; ++i) {
          if (i) out += ", ";
          repr_into(out, items[i], open);
        }
        open.pop_back();
      }
      if (tuple && items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      out += v.is_namespace() ? "<Namespace {" : "{";
      const Dict& d = v.dict();
      if (d.size() > 0 &&
          (depth >= kReprMaxDepth || std::find(open.begin(), open.end(), &d) != open.end())) {
        out += "...";
      } else {
        open.push_back(&d);
        bool first = true;
        for (const auto& [k, val] : d.entries) {
          if (out.size() > kReprMaxBytes) break;
          if (!first) out += ", ";
          first = false;
          repr_into(out, k, open);
          out += ": ";
          repr_into(out, val, open);
        }
        open.pop_back();
      }
      out += v.is_namespace() ? "}>" : "}";
      return;
    }
    case Value::Kind::kCallable:
      out += "<function " + v.fn().name() + ">";
      return;
  }
}

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  std::vector<const void*> open;
  repr_into(out, v, open);
  return out;
}

namespace {

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

Status json_rec(std::string& out, const Value& v, const JsonFormat& f, int depth) {
  if (depth > 512) return invalid_argument("tojson: value nested too deeply");
  // Shared values can be exponentially long as text (see repr_into): stop early.
  if (out.size() > kReprMaxBytes)
    return Status(StatusCode::kResourceExhausted, "tojson: the text passed 64 MiB");
  const std::string item_sep = !f.item_sep.empty() ? f.item_sep : (f.indent >= 0 ? "," : ", ");
  const std::string key_sep = !f.key_sep.empty() ? f.key_sep : ": ";
  auto newline = [&](int d) {
    if (f.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(f.indent) * d, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return Status::ok();
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return Status::ok();
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return Status::ok();
    case Value::Kind::kFloat: {
      double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                             : py_float_repr(d);
      return Status::ok();
    }
    case Value::Kind::kString:
      json_string(out, v.str());
      return Status::ok();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const List& items = v.items();
      if (items.empty()) {
        out += "[]";
        return Status::ok();
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        LOOM_RETURN_IF_ERROR(json_rec(out, items[i], f, depth + 1));
      }
      newline(depth);
      out += ']';
      return Status::ok();
    }
    case Value::Kind::kDict: {
      const Dict& d = v.dict();
      if (d.size() == 0) {
        out += "{}";
        return Status::ok();
      }
      // Keys become strings the way json.dumps converts them.
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : d.entries) {
        std::string key;
        if (k.is_string())
          key = k.str();
        else if (k.is_bool())
          key = k.as_bool() ? "true" : "false";
        else if (k.is_none())
          key = "null";
        else if (k.is_int() || k.is_float())
          key = repr(k);
        else
          return invalid_argument(
              std::string("tojson: keys must be str, int, float, bool or None, not ") +
              k.type_name());
        entries.emplace_back(std::move(key), &val);
      }
      if (f.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(out, entries[i].first);
        out += key_sep;
        LOOM_RETURN_IF_ERROR(json_rec(out, *entries[i].second, f, depth + 1));
      }
      newline(depth);
      out += '}';
      return Status::ok();
    }
    default:
      return invalid_argument(std::string("Object of type ") + v.type_name() +
                              " is not JSON serializable");
  }
}

}  // namespace

Result<std::string> to_json(const Value& v, const JsonFormat& format) {
  std::string out;
  LOOM_RETURN_IF_ERROR(json_rec(out, v, format, 0));
  return out;
}

template <typename Json>
Value from_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) d->set(Value(it.key()), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default:
      return Value::none();  // binary / discarded: not produced by JSON text
  }
}

template Value from_json<nlohmann::json>(const nlohmann::json&);
template Value from_json<nlohmann::ordered_json>(const nlohmann::ordered_json&);

}  // namespace loom::jinja
