// The Jinja value model with Python semantics: undefined, None, bool, int, float, str, list,
// tuple, dict (insertion-ordered), namespace (a mutable attribute bag) and callables (macros,
// builtin functions, bound string/dict methods). Lists and dicts are shared by pointer, like
// Python references; only namespaces are ever mutated (the sandbox allows nothing else).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"

namespace loom::jinja {

class Interpreter;
class Value;
struct Dict;
struct Callable;
using List = std::vector<Value>;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable,
  };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {}) {
    Value v;
    v.data_ = std::move(hint);
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), data_(b) {}                        // NOLINT
  Value(int v) : kind_(Kind::kInt), data_(int64_t{v}) {}                 // NOLINT
  Value(int64_t v) : kind_(Kind::kInt), data_(v) {}                      // NOLINT
  Value(double v) : kind_(Kind::kFloat), data_(v) {}                     // NOLINT
  Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}    // NOLINT
  Value(const char* s) : kind_(Kind::kString), data_(std::string(s)) {}  // NOLINT
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(std::shared_ptr<Dict> d);
  static Value new_dict();
  static Value namespace_(std::shared_ptr<Dict> d);
  static Value callable(std::shared_ptr<Callable> c);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers.Number: bool counts, like int.
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const {
    return kind_ == Kind::kBool ? int64_t{as_bool()} : std::get<int64_t>(data_);
  }
  double as_double() const {
    return kind_ == Kind::kFloat ? std::get<double>(data_) : static_cast<double>(as_int());
  }
  const std::string& str() const { return std::get<std::string>(data_); }
  // The name an undefined value was looked up by (for error messages).
  const std::string& undefined_hint() const { return std::get<std::string>(data_); }
  const List& items() const { return *std::get<std::shared_ptr<List>>(data_); }
  const std::shared_ptr<List>& list_ptr() const { return std::get<std::shared_ptr<List>>(data_); }
  Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  Callable& fn() const { return *std::get<std::shared_ptr<Callable>>(data_); }

  // Python truthiness.
  bool truthy() const;
  // The Python type name used in error messages ("str", "int", "dict", ...).
  const char* type_name() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Callable>>
      data_ = std::string();
};

// Insertion-ordered dict with Python key equality (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  std::unordered_map<std::string, size_t> index;

  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const { return find(Value(key)); }
  void set(const Value& key, Value v);
  size_t size() const { return entries.size(); }
};

// Arguments of a call: positional then keyword, in source order.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Finds a keyword argument, or the positional one at `index`; nullptr when neither.
  const Value* get(size_t index, std::string_view name) const;
};

struct Callable {
  virtual ~Callable() = default;
  virtual Result<Value> call(Interpreter& in, const CallArgs& args) = 0;
  virtual std::string name() const = 0;
};

// Python equality (==) and ordering (<); ordering fails for unorderable types.
bool values_equal(const Value& a, const Value& b);
Result<bool> values_less(const Value& a, const Value& b);

// Lists, dicts and namespaces nested inside each other deeper than this cannot be stored in a
// namespace: a loop could otherwise nest a value a million levels deep, and printing,
// comparing or merely destroying it recurses once per level (a stack overflow).
inline constexpr int kMaxValueDepth = 256;
// True when containers in `v` nest deeper than max_depth (a value that contains itself through
// a namespace counts its cycle once). Iterative: safe on any value.
bool value_nesting_exceeds(const Value& v, int max_depth = kMaxValueDepth);

// str(v) (what {{ v }} prints) and repr(v) (how v prints inside a container).
std::string to_str(const Value& v);
std::string repr(const Value& v);

// json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...) as Hugging
// Face's tojson filter calls it. indent < 0 = none.
struct JsonFormat {
  int indent = -1;
  std::string item_sep;  // empty = Python's default for the indent setting
  std::string key_sep;
  bool sort_keys = false;
};
Result<std::string> to_json(const Value& v, const JsonFormat& format);

// Converts parsed JSON into values; key order follows the JSON type (ordered_json keeps it).
template <typename Json>
Value from_json(const Json& j);

}  // namespace loom::jinja
