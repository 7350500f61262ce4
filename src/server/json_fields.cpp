// FieldReader implementation.
#include "server/json_fields.h"

#include <algorithm>
#include <cmath>

namespace loom::server {

std::string json_type_name(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

bool json_to_int(const Json& v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t x;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.0e18 || d > 9.0e18) return false;
    x = static_cast<int64_t>(d);
  } else {
    return false;
  }
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

const Json* FieldReader::raw(const char* key) const {
  if (std::find(read_.begin(), read_.end(), key) == read_.end()) read_.emplace_back(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> FieldReader::opt_int(const char* key, int64_t lo, int64_t hi) {
  const Json* v = raw(key);
  if (!v) return std::nullopt;
  const std::string n = name(key);
  if (!v->is_number() || v->is_boolean()) {
    fail(n + " must be an integer, got " + json_type_name(*v), n);
    return std::nullopt;
  }
  auto range = [&](const std::string& got) {
    fail(n + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + got, n);
  };
  int64_t x;
  if (!json_to_int(*v, INT64_MIN, INT64_MAX, &x)) {
    // An integer too large for int64 (2^63 and up, or an integral float like 1e30) is a range
    // error; only a fraction is "not an integer".
    const bool integral =
        v->is_number_unsigned() || v->is_number_integer() ||
        (std::isfinite(v->get<double>()) && v->get<double>() == std::floor(v->get<double>()));
    if (integral)
      range(v->dump());
    else
      fail(n + " must be an integer, got " + v->dump(), n);
    return std::nullopt;
  }
  if (x < lo || x > hi) {
    range(std::to_string(x));
    return std::nullopt;
  }
  return x;
}

std::optional<double> FieldReader::opt_number(const char* key) {
  const Json* v = raw(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    fail(name(key) + " must be a number, got " + json_type_name(*v), name(key));
    return std::nullopt;
  }
  double d = v->get<double>();
  if (!std::isfinite(d)) {
    fail(name(key) + " must be finite", name(key));
    return std::nullopt;
  }
  return d;
}

std::optional<bool> FieldReader::opt_bool(const char* key) {
  const Json* v = raw(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    fail(name(key) + " must be a boolean, got " + json_type_name(*v), name(key));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> FieldReader::opt_string(const char* key) {
  const Json* v = raw(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    fail(name(key) + " must be a string, got " + json_type_name(*v), name(key));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> FieldReader::opt_string_or_list(const char* key) {
  const Json* v = raw(key);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) {
    fail(name(key) + " must be a string or a list of strings, got " + json_type_name(*v),
         name(key));
    return std::nullopt;
  }
  for (const auto& e : *v) {
    if (!e.is_string()) {
      fail(name(key) + " must be a list of strings, found " + json_type_name(e), name(key));
      return std::nullopt;
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int32_t>> FieldReader::opt_int_list(const char* key) {
  const Json* v = raw(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    fail(name(key) + " must be a list of integers, got " + json_type_name(*v), name(key));
    return std::nullopt;
  }
  std::vector<int32_t> out;
  for (const auto& e : *v) {
    int64_t x;
    if (!json_to_int(e, INT32_MIN, INT32_MAX, &x)) {
      fail(name(key) + " must be a list of 32-bit integers, found " + e.dump(), name(key));
      return std::nullopt;
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

const Json* FieldReader::opt_object(const char* key) {
  const Json* v = raw(key);
  if (!v) return nullptr;
  if (!v->is_object()) {
    fail(name(key) + " must be an object, got " + json_type_name(*v), name(key));
    return nullptr;
  }
  return v;
}

const Json* FieldReader::opt_array(const char* key) {
  const Json* v = raw(key);
  if (!v) return nullptr;
  if (!v->is_array()) {
    fail(name(key) + " must be a list, got " + json_type_name(*v), name(key));
    return nullptr;
  }
  return v;
}

std::optional<ApiError> FieldReader::unread_field_error(const std::string& route) const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (it->is_null() || std::find(read_.begin(), read_.end(), it.key()) != read_.end()) continue;
    return bad_request("unknown field '" + prefix_ + it.key() + "': " + route +
                           " does not take it (remove it; " +
                           "docs/server.md lists the fields loom supports)",
                       prefix_ + it.key());
  }
  return std::nullopt;
}

}  // namespace loom::server
