// oneOf: a value must match exactly one branch. A grammar produces a value of some branch, and
// "this branch and not the others" is not something a grammar can express in general, so
// oneOf is compiled like anyOf only when no value can match two branches, which is checked
// here, conservatively: branches that are not provably pairwise disjoint are refused (an error
// naming oneOf), never compiled into a grammar whose output could match two of them.
//
// A branch is summarised as a Shape, with the validator's (ajv's) reading of the schema:
// which JSON types it admits (no "type": all of them; integer and number count as one type,
// since 1 is both), the finite set of values it admits when const/enum say so, and its required
// properties with the schemas their values must match. $ref is followed; allOf parts and
// sibling keywords narrow a shape, nested anyOf/oneOf widen it; every other keyword is ignored,
// which can only make a shape larger (so "disjoint" stays a proof). Two shapes are disjoint
// when their types are, when their value sets share no value, or when every value both admit
// is an object and some property both require has disjoint schemas (Pydantic's discriminated
// unions: {"pet_type": {"const": "cat"}} against {"pet_type": {"const": "dog"}}).
#include <map>
#include <optional>
#include <set>

#include "structured/json_schema_internal.h"

namespace loom::structured::detail {
namespace {

using PlainJson = nlohmann::json;  // key order ignored in comparisons, as JSON Schema's equality

enum TypeBits : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kNumber = 32,  // "integer" and "number"
  kAnyType = 63,
};

uint8_t type_bit(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBoolean;
  if (t == "object") return kObject;
  if (t == "array") return kArray;
  if (t == "string") return kString;
  if (t == "number" || t == "integer") return kNumber;
  return kAnyType;  // unknown: the compiler reports it; here it only must not prove anything
}

uint8_t value_type(const PlainJson& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBoolean;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  return kNumber;
}

struct Shape {
  uint8_t types = kAnyType;
  std::optional<std::vector<PlainJson>> values;  // nullopt: not known to be a finite set
  std::set<std::string> required;
  std::map<std::string, std::vector<OrderedJson>> properties;  // schemas a member must match
};

bool contains(const std::vector<PlainJson>& vs, const PlainJson& v) {
  for (const PlainJson& x : vs)
    if (x == v) return true;
  return false;
}

// Keeps the values of the admitted types, and the types of the admitted values.
void normalize(Shape& s) {
  if (!s.values) return;
  std::erase_if(*s.values, [&](const PlainJson& v) { return !(value_type(v) & s.types); });
  uint8_t t = 0;
  for (const PlainJson& v : *s.values) t |= value_type(v);
  s.types &= t;
}

// Values that match both a and b.
void meet(Shape& a, const Shape& b) {
  a.types &= b.types;
  if (a.values && b.values)
    std::erase_if(*a.values, [&](const PlainJson& v) { return !contains(*b.values, v); });
  else if (b.values)
    a.values = b.values;
  a.required.insert(b.required.begin(), b.required.end());
  for (const auto& [k, v] : b.properties)
    a.properties[k].insert(a.properties[k].end(), v.begin(), v.end());
  normalize(a);
}

// Values that match a or b (what is known of both; property schemas are dropped).
void join(Shape& a, const Shape& b) {
  a.types |= b.types;
  if (a.values && b.values) {
    for (const PlainJson& v : *b.values)
      if (!contains(*a.values, v)) a.values->push_back(v);
  } else {
    a.values.reset();
  }
  std::set<std::string> both;
  for (const std::string& r : a.required)
    if (b.required.count(r)) both.insert(r);
  a.required = std::move(both);
  a.properties.clear();
}

class ShapeReader {
 public:
  explicit ShapeReader(const OrderedJson& root) : root_(root) {}

  Shape read(const OrderedJson& s, int depth) {
    Shape out;
    if (depth > 16) return out;  // unknown: admits anything
    if (s.is_boolean()) {
      if (!s.get<bool>()) out.types = 0, out.values.emplace();
      return out;
    }
    if (!s.is_object()) return out;
    if (s.contains("$ref") && s["$ref"].is_string()) {
      const OrderedJson* target = resolve(s["$ref"].get<std::string>());
      return target ? read(*target, depth + 1) : out;
    }
    if (s.contains("type")) {
      const OrderedJson& t = s["type"];
      if (t.is_string()) out.types = type_bit(t.get<std::string>());
      if (t.is_array()) {
        out.types = 0;
        for (const auto& x : t) out.types |= x.is_string() ? type_bit(x.get<std::string>()) : 0;
      }
    }
    const bool nullable = s.contains("nullable") && s["nullable"] == true;
    if (s.contains("enum") && s["enum"].is_array()) {
      out.values.emplace();
      for (const auto& v : s["enum"]) out.values->push_back(plain(v));
    }
    if (s.contains("const")) {
      const PlainJson c = plain(s["const"]);
      if (!out.values || contains(*out.values, c))
        out.values = std::vector<PlainJson>{c};
      else
        out.values->clear();
    }
    if (s.contains("required") && s["required"].is_array())
      for (const auto& r : s["required"])
        if (r.is_string()) out.required.insert(r.get<std::string>());
    if (s.contains("properties") && s["properties"].is_object())
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it)
        out.properties[it.key()].push_back(it.value());
    if (nullable) {
      out.types |= kNull;
      if (out.values && !contains(*out.values, nullptr)) out.values->push_back(nullptr);
    }
    normalize(out);
    if (s.contains("allOf") && s["allOf"].is_array())
      for (const auto& part : s["allOf"]) meet(out, read(part, depth + 1));
    for (const char* comb : {"anyOf", "oneOf"}) {
      if (!s.contains(comb) || !s[comb].is_array() || s[comb].empty()) continue;
      Shape any = read(s[comb][0], depth + 1);
      for (size_t i = 1; i < s[comb].size(); ++i) join(any, read(s[comb][i], depth + 1));
      meet(out, any);
    }
    return out;
  }

  bool disjoint(const Shape& a, const Shape& b, int depth) {
    if ((a.types & b.types) == 0) return true;
    if (a.values && b.values) {
      bool common = false;
      for (const PlainJson& v : *a.values) common = common || contains(*b.values, v);
      if (!common) return true;
    }
    if ((a.types & b.types) != kObject || depth > 8) return false;
    // Every value both admit is an object with all of both shapes' required members.
    for (const std::string& p : a.required) {
      if (!b.required.count(p)) continue;
      auto pa = a.properties.find(p), pb = b.properties.find(p);
      if (pa == a.properties.end() || pb == b.properties.end()) continue;
      for (const OrderedJson& x : pa->second)
        for (const OrderedJson& y : pb->second)
          if (disjoint(read(x, depth + 1), read(y, depth + 1), depth + 1)) return true;
    }
    return false;
  }

 private:
  static PlainJson plain(const OrderedJson& v) { return PlainJson::parse(v.dump()); }

  const OrderedJson* resolve(const std::string& ref) const {
    if (ref.empty() || ref[0] != '#') return nullptr;
    try {
      const OrderedJson::json_pointer ptr(ref.substr(1));
      return root_.contains(ptr) ? &root_.at(ptr) : nullptr;
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  const OrderedJson& root_;
};

}  // namespace

Status check_one_of_disjoint(const OrderedJson& branches, const OrderedJson& siblings,
                             const OrderedJson& root, const std::string& path) {
  ShapeReader reader(root);
  const Shape common = reader.read(siblings, 0);
  std::vector<Shape> shapes;
  for (const auto& b : branches) {
    shapes.push_back(reader.read(b, 0));
    meet(shapes.back(), common);
  }
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t k = i + 1; k < shapes.size(); ++k)
      if (!reader.disjoint(shapes[i], shapes[k], 0))
        return invalid_argument(
            "'oneOf' at " + at(path) + ": branches " + std::to_string(i) + " and " +
            std::to_string(k) +
            " may overlap (a value matching both is invalid under oneOf, and the grammar "
            "cannot exclude it); supported: branches of different types (integer and number "
            "overlap), with different const/enum values, or objects whose common required "
            "property has different const/enum values; use 'anyOf' if overlap is intended");
  return Status::ok();
}

}  // namespace loom::structured::detail
