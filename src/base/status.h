// Status and Result<T>: how errors cross module boundaries. A bad file, request or template
// is a returned error with a message a user can act on, never an abort.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace loom {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad request, bad flag)
  kNotFound,
  kInvalidFile,      // a file is malformed, truncated or hostile
  kUnsupported,      // well-formed but not something loom implements
  kOutOfRange,
  kResourceExhausted,
  kIo,
  kInternal,
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status invalid_file(std::string m) { return {StatusCode::kInvalidFile, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T>: a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result from ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace loom

// Propagate a non-ok Status / Result from the current function.
#define LOOM_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::loom::Status _st = (expr);              \
    if (!_st.is_ok()) return _st;             \
  } while (0)

#define LOOM_CONCAT_INNER(a, b) a##b
#define LOOM_CONCAT(a, b) LOOM_CONCAT_INNER(a, b)
#define LOOM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
// LOOM_ASSIGN_OR_RETURN(auto x, make_x());
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL(LOOM_CONCAT(_res_, __LINE__), lhs, expr)

// CHECK: internal invariants only (never for user input).
#define LOOM_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)
