// GgufValue: construction, lossless conversions and display of GGUF metadata values.
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "format/gguf.h"

namespace loom {
namespace {

bool is_unsigned(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64;
}
bool is_signed(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}
bool is_float(GgufType t) { return t == GgufType::kF32 || t == GgufType::kF64; }

// Strings are shown quoted with control bytes escaped so a hostile vocab cannot mess up a
// terminal.
std::string quote(const std::string& s, size_t max_chars = 200) {
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "unknown";
}

GgufValue GgufValue::of_uint(GgufType t, uint64_t v) {
  LOOM_CHECK(is_unsigned(t));
  GgufValue r;
  r.type_ = t;
  r.v_ = v;
  return r;
}

GgufValue GgufValue::of_int(GgufType t, int64_t v) {
  LOOM_CHECK(is_signed(t));
  GgufValue r;
  r.type_ = t;
  r.v_ = v;
  return r;
}

GgufValue GgufValue::of_float(GgufType t, double v) {
  LOOM_CHECK(is_float(t));
  GgufValue r;
  r.type_ = t;
  r.v_ = v;
  return r;
}

GgufValue GgufValue::of_bool(bool v) {
  GgufValue r;
  r.type_ = GgufType::kBool;
  r.v_ = v;
  return r;
}

GgufValue GgufValue::of_string(std::string v) {
  GgufValue r;
  r.type_ = GgufType::kString;
  r.v_ = std::move(v);
  return r;
}

GgufValue GgufValue::of_string_array(std::vector<std::string> v) {
  GgufValue r;
  r.type_ = GgufType::kArray;
  r.elem_ = GgufType::kString;
  r.v_ = std::move(v);
  return r;
}

GgufValue GgufValue::of_int_array(GgufType elem, std::vector<int64_t> v) {
  LOOM_CHECK(is_signed(elem) || is_unsigned(elem) || elem == GgufType::kBool);
  GgufValue r;
  r.type_ = GgufType::kArray;
  r.elem_ = elem;
  r.v_ = std::move(v);
  return r;
}

GgufValue GgufValue::of_float_array(GgufType elem, std::vector<double> v) {
  LOOM_CHECK(is_float(elem));
  GgufValue r;
  r.type_ = GgufType::kArray;
  r.elem_ = elem;
  r.v_ = std::move(v);
  return r;
}

GgufValue GgufValue::of_bool_array(std::vector<bool> v) {
  std::vector<int64_t> ints(v.begin(), v.end());
  return of_int_array(GgufType::kBool, std::move(ints));
}

size_t GgufValue::array_size() const {
  if (type_ != GgufType::kArray) return 0;
  if (auto* s = std::get_if<std::vector<std::string>>(&v_)) return s->size();
  if (auto* i = std::get_if<std::vector<int64_t>>(&v_)) return i->size();
  if (auto* f = std::get_if<std::vector<double>>(&v_)) return f->size();
  return 0;
}

std::optional<int64_t> GgufValue::as_int() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (auto* b = std::get_if<bool>(&v_)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (auto* u = std::get_if<uint64_t>(&v_)) return *u;
  if (auto* i = std::get_if<int64_t>(&v_)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  if (auto* b = std::get_if<bool>(&v_)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (auto* u = std::get_if<uint64_t>(&v_)) return static_cast<double>(*u);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  return std::nullopt;
}

const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&v_); }

const std::vector<std::string>* GgufValue::as_string_array() const {
  return std::get_if<std::vector<std::string>>(&v_);
}

const std::vector<int64_t>* GgufValue::as_int_array() const {
  return std::get_if<std::vector<int64_t>>(&v_);
}

const std::vector<double>* GgufValue::as_float_array() const {
  return std::get_if<std::vector<double>>(&v_);
}

std::string GgufValue::to_display_string(size_t max_items) const {
  if (type_ != GgufType::kArray) {
    if (auto* s = as_string()) return quote(*s);
    if (auto* b = std::get_if<bool>(&v_)) return *b ? "true" : "false";
    if (auto* d = std::get_if<double>(&v_)) return format_double(*d);
    if (auto* i = std::get_if<int64_t>(&v_)) return std::to_string(*i);
    if (auto* u = std::get_if<uint64_t>(&v_)) return std::to_string(*u);
    return "(empty)";
  }
  const size_t n = array_size();
  std::string out = "[";
  for (size_t k = 0; k < n && k < max_items; ++k) {
    if (k) out += ", ";
    if (auto* s = as_string_array()) {
      out += quote((*s)[k], 40);
    } else if (auto* f = as_float_array()) {
      out += format_double((*f)[k]);
    } else if (auto* iv = as_int_array()) {
      int64_t x = (*iv)[k];
      if (elem_ == GgufType::kBool) out += x ? "true" : "false";
      else if (elem_ == GgufType::kU64) out += std::to_string(static_cast<uint64_t>(x));
      else out += std::to_string(x);
    }
  }
  if (n > max_items) out += ", ...";
  out += "]";
  return out + " (" + std::to_string(n) + " x " + std::string(gguf_type_name(elem_)) + ")";
}

}  // namespace loom
