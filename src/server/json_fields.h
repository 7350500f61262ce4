// FieldReader: typed, range-aware reads of optional request fields with OpenAI/pydantic-like
// leniency (an integral float such as 5.0 is an int; null means "not given") and the first
// error remembered as an ApiError naming the field. Routes read every field they know, then
// check error() once, and unread_field_error() for what the request holds that no read asked
// for: a field loom does not know, or one this route does not take, is a 400 naming it rather
// than silently ignored.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace loom::server {

// Requests are parsed keeping key order: chat templates print tools / messages with tojson,
// and responses read better in the order OpenAI documents them.
using Json = nlohmann::ordered_json;

class FieldReader {
 public:
  // `prefix` names a nested object in messages and params ("stream_options." makes a bad
  // include_usage read as stream_options.include_usage).
  explicit FieldReader(const Json& obj, std::string prefix = "")
      : obj_(obj), prefix_(std::move(prefix)) {}

  // Each returns nullopt when the field is absent or null, or when it has the wrong type (then
  // error() is set). Integers must fit in [lo, hi]; an integer outside it (however large) is
  // reported as out of range, not as "not an integer".
  std::optional<int64_t> opt_int(const char* key, int64_t lo = INT32_MIN, int64_t hi = INT32_MAX);
  std::optional<double> opt_number(const char* key);
  std::optional<bool> opt_bool(const char* key);
  std::optional<std::string> opt_string(const char* key);
  // A string or a list of strings ("stop").
  std::optional<std::vector<std::string>> opt_string_or_list(const char* key);
  std::optional<std::vector<int32_t>> opt_int_list(const char* key);
  const Json* opt_object(const char* key);
  const Json* opt_array(const char* key);
  const Json* raw(const char* key) const;  // present and not null; marks the key as read

  // A 400 naming the first field of the object that is not null and that no read above asked
  // for ("route" says where, e.g. "/v1/completions"); nullopt when every field was read.
  std::optional<ApiError> unread_field_error(const std::string& route) const;

  void fail(ApiError e) {
    if (!error_) error_ = std::move(e);
  }
  void fail(std::string message, std::string param) {
    fail(bad_request(std::move(message), std::move(param)));
  }
  bool ok() const { return !error_.has_value(); }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  std::string name(const char* key) const { return prefix_ + key; }
  const Json& obj_;
  std::string prefix_;
  std::optional<ApiError> error_;
  mutable std::vector<std::string> read_;  // keys asked for, present or not
};

// An integral JSON number in [lo, hi] (integral floats accepted); false if not.
bool json_to_int(const Json& v, int64_t lo, int64_t hi, int64_t* out);

// The JSON type's name for error messages ("string", "number", ...).
std::string json_type_name(const Json& v);

}  // namespace loom::server
