#include "random_schema.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

namespace loom::structured::test {

using Json = nlohmann::ordered_json;

namespace {

using Rng = std::mt19937_64;

int uniform(Rng& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}
bool coin(Rng& rng, double p = 0.5) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}
template <typename T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[uniform(rng, 0, static_cast<int>(v.size()) - 1)];
}

// Characters for free strings: ASCII, characters JSON must escape, multi-byte UTF-8.
const std::vector<std::string> kChars = {"a",
                                         "b",
                                         "z",
                                         "Q",
                                         "0",
                                         "7",
                                         " ",
                                         "-",
                                         "_",
                                         ".",
                                         "/",
                                         "\"",
                                         "\\",
                                         "\n",
                                         "\t",
                                         "\x01",
                                         "\xc3\xa9",
                                         "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80"};

std::string random_text(Rng& rng, int min_len, int max_len) {
  std::string s;
  const int n = uniform(rng, min_len, std::max(min_len, max_len));
  for (int i = 0; i < n; ++i) s += pick(rng, kChars);
  return s;
}

std::string lower(Rng& rng, int min, int max) {
  std::string s;
  for (int i = uniform(rng, min, max); i > 0; --i)
    s += static_cast<char>('a' + uniform(rng, 0, 25));
  return s;
}
std::string digits(Rng& rng, int n) {
  std::string s;
  while (n-- > 0) s += static_cast<char>('0' + uniform(rng, 0, 9));
  return s;
}

// Patterns with a generator of matching strings (the instance side must not use a grammar).
struct PatternCase {
  const char* pattern;
  std::function<std::string(Rng&)> gen;
};
const std::vector<PatternCase>& patterns() {
  static const std::vector<PatternCase> p = {
      {"^[a-z]{1,6}$", [](Rng& r) { return lower(r, 1, 6); }},
      {"^\\d{3}-\\d{2}$", [](Rng& r) { return digits(r, 3) + "-" + digits(r, 2); }},
      {"^(foo|bar)+$",
       [](Rng& r) {
         std::string s;
         for (int i = uniform(r, 1, 3); i > 0; --i) s += coin(r) ? "foo" : "bar";
         return s;
       }},
      {"^[A-Z][a-z0-9_]*$",
       [](Rng& r) {
         return std::string(1, static_cast<char>('A' + uniform(r, 0, 25))) + lower(r, 0, 4) +
                (coin(r) ? "_9" : "");
       }},
      {"^a.c$",
       [](Rng& r) {
         return "a" + pick(r, std::vector<std::string>{"b", "\"", "\\", "\t", "\xc3\xa9", " "}) +
                "c";
       }},
      {"^[^\"\\\\]{0,4}$",
       [](Rng& r) {
         std::string s;
         for (int i = uniform(r, 0, 4); i > 0; --i)
           s += pick(r, std::vector<std::string>{"x", "\n", "\xe2\x82\xac", "'"});
         return s;
       }},
      {"^x?y+z*$",
       [](Rng& r) {
         return std::string(coin(r) ? "x" : "") + std::string(uniform(r, 1, 3), 'y') +
                std::string(uniform(r, 0, 2), 'z');
       }},
      {"^\\w+@\\w+\\.com$", [](Rng& r) { return lower(r, 1, 4) + "@" + lower(r, 1, 4) + ".com"; }},
      {"^[\"\\\\]{1,3}$",
       [](Rng& r) {
         std::string s;
         for (int i = uniform(r, 1, 3); i > 0; --i) s += coin(r) ? "\"" : "\\";
         return s;
       }},
      {"^\\s?\\u00e9{1,2}(\\.|,)$",
       [](Rng& r) {
         return pick(r, std::vector<std::string>{"", " ", "\t", "\n"}) +
                (coin(r) ? "\xc3\xa9" : "\xc3\xa9\xc3\xa9") + (coin(r) ? "." : ",");
       }},
  };
  return p;
}

const std::vector<std::string> kFormats = {"date", "time", "date-time", "uuid", "email", "ipv4"};

std::string two(int v) {
  char b[8];
  std::snprintf(b, sizeof b, "%02d", v);
  return b;
}

std::string random_format(Rng& rng, const std::string& f) {
  auto date = [&] {
    const int y = coin(rng, 0.2) ? pick(rng, std::vector<int>{1900, 2000, 2024, 2023, 400})
                                 : uniform(rng, 0, 9999);
    const int m = uniform(rng, 1, 12);
    static const int kDays[] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    const int d = uniform(rng, 1, m == 2 && leap ? 29 : kDays[m]);
    char b[16];
    std::snprintf(b, sizeof b, "%04d-%02d-%02d", y, m, d);
    return std::string(b);
  };
  auto time = [&] {
    std::string t =
        two(uniform(rng, 0, 23)) + ":" + two(uniform(rng, 0, 59)) + ":" + two(uniform(rng, 0, 59));
    if (coin(rng)) t += "." + digits(rng, uniform(rng, 1, 4));
    if (coin(rng))
      t += "Z";
    else
      t += std::string(coin(rng) ? "+" : "-") + two(uniform(rng, 0, 23)) + ":" +
           two(uniform(rng, 0, 59));
    return t;
  };
  if (f == "date") return date();
  if (f == "time") return time();
  if (f == "date-time") return date() + "T" + time();
  if (f == "uuid") {
    std::string s;
    for (int n : {8, 4, 4, 4, 12}) {
      if (!s.empty()) s += "-";
      for (int i = 0; i < n; ++i) s += "0123456789abcdef"[uniform(rng, 0, 15)];
    }
    return s;
  }
  if (f == "email")
    return lower(rng, 1, 5) + (coin(rng) ? "." + lower(rng, 1, 3) : "") + "@" + lower(rng, 1, 5) +
           "." + lower(rng, 2, 3);
  return std::to_string(uniform(rng, 0, 255)) + "." + std::to_string(uniform(rng, 0, 255)) + "." +
         std::to_string(uniform(rng, 0, 255)) + "." + std::to_string(uniform(rng, 0, 255));
}

const std::vector<std::string> kNames = {
    "a",    "b",       "name", "id", "x y", "\xc3\xa9t\xc3\xa9",
    "q\"t", "back\\s", "a/b",  "~t", "_",   "longer_key_name",
    "ab",   "abc"};

std::vector<Json> enum_pool() {
  return {Json(1),
          Json("a"),
          Json(nullptr),
          Json(true),
          Json::parse(R"({"k":[1,2]})"),
          Json::parse(R"([1,"x"])"),
          Json(2.5),
          Json("\xc3\xa9\"\n"),
          Json(-7),
          Json("b")};
}

class SchemaGen {
 public:
  SchemaGen(Rng& rng, const RandomSchemaOptions& o) : rng_(rng), o_(o) {}

  Json root() {
    Json defs = Json::object();
    if (o_.refs && coin(rng_, 0.4)) {
      defs["node"] = Json::parse(
          R"({"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},
          "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"],"additionalProperties":false})");
      have_node_ = true;
    }
    if (o_.refs && coin(rng_, 0.4)) {
      defs["item"] = leaf();
      have_item_ = true;
    }
    Json s = gen(0);
    if (!s.is_object()) s = Json{{"anyOf", Json::array({s})}};
    if (!defs.empty()) s["$defs"] = defs;
    return s;
  }

  Json gen(int depth) {
    if (depth >= o_.max_depth) return leaf();
    switch (uniform(rng_, 0, 11)) {
      case 0:
      case 1:
      case 2:
        return object(depth);
      case 3:
      case 4:
        return array(depth);
      case 5:
        return prefix_array(depth);
      case 6:
        return Json{{"anyOf", Json::array({gen(depth + 1), gen(depth + 1)})}};
      case 7:
        return one_of(depth);
      case 8:
        return all_of(depth);
      case 9:
        if (have_node_ && coin(rng_)) return Json{{"$ref", "#/$defs/node"}};
        if (have_item_) return Json{{"$ref", "#/$defs/item"}};
        return leaf();
      default:
        return leaf();
    }
  }

  Json leaf() {
    switch (uniform(rng_, 0, 13)) {
      case 0:
        return Json{{"type", "null"}};
      case 1:
        return Json{{"type", "boolean"}};
      case 2:
        return integer();
      case 3:
        return Json{{"type", "number"}};
      case 4: {
        Json s{{"type", "string"}};
        const int mn = uniform(rng_, 0, 3);
        if (coin(rng_)) s["minLength"] = mn;
        if (coin(rng_)) s["maxLength"] = mn + uniform(rng_, 0, 5);
        return s;
      }
      case 5:
        if (o_.patterns)
          return Json{{"type", "string"}, {"pattern", pick(rng_, patterns()).pattern}};
        return Json{{"type", "string"}};
      case 6:
        if (o_.formats) return Json{{"type", "string"}, {"format", pick(rng_, kFormats)}};
        return Json{{"type", "string"}};
      case 7: {
        Json e = Json::array();
        auto pool = enum_pool();
        std::shuffle(pool.begin(), pool.end(), rng_);
        for (int i = uniform(rng_, 1, 4); i > 0; --i) e.push_back(pool[i]);
        return Json{{"enum", e}};
      }
      case 8:
        return Json{{"const", pick(rng_, enum_pool())}};
      case 9:
        return Json{{"type", Json::array({"string", "null"})}, {"maxLength", 3}};
      case 10: {
        Json s = integer();
        s["nullable"] = true;
        return s;
      }
      case 11:
        return Json{{"type", Json::array({"integer", "boolean"})}, {"minimum", -3}, {"maximum", 3}};
      case 12:
        return coin(rng_) ? Json(true) : Json::object();
      default:
        return Json{{"type", "string"}, {"title", "annotated"}, {"description", "ignored"}};
    }
  }

  Json integer() {
    Json s{{"type", "integer"}};
    const int a = coin(rng_, 0.2) ? uniform(rng_, -200000, 200000) : uniform(rng_, -120, 120);
    const int b = a + (coin(rng_) ? uniform(rng_, 0, 30) : uniform(rng_, 0, 100000));
    switch (uniform(rng_, 0, 5)) {
      case 0:
        s["minimum"] = a;
        break;
      case 1:
        s["maximum"] = b;
        break;
      case 2:
        s["minimum"] = a, s["maximum"] = b;
        break;
      case 3:
        s["exclusiveMinimum"] = a - 1, s["exclusiveMaximum"] = b + 1;
        break;
      case 4:
        s["minimum"] = a + 0.5, s["maximum"] = b + 1.5;
        break;
      default:
        break;
    }
    return s;
  }

  Json object(int depth) {
    Json s{{"type", "object"}};
    std::vector<std::string> names = kNames;
    std::shuffle(names.begin(), names.end(), rng_);
    names.resize(uniform(rng_, 0, 4));
    Json props = Json::object(), req = Json::array();
    for (const std::string& n : names) {
      const bool r = coin(rng_);
      if (!r && coin(rng_, 0.08))
        props[n] = false;
      else
        props[n] = coin(rng_, 0.08) ? Json(true) : gen(depth + 1);
      if (r) req.push_back(n);
    }
    if (!props.empty() || coin(rng_)) s["properties"] = props;
    if (!req.empty()) s["required"] = req;
    switch (uniform(rng_, 0, 4)) {
      case 0:
      case 1:
        s["additionalProperties"] = false;
        break;
      case 2:
        s["additionalProperties"] = true;
        break;
      case 3:
        s["additionalProperties"] = leaf();
        break;
      default:
        break;
    }
    // Rarely: a required name not declared (an additional member that must appear).
    if (coin(rng_, 0.1) &&
        !(s.contains("additionalProperties") && s["additionalProperties"] == false)) {
      if (!s.contains("required")) s["required"] = Json::array();
      if (!props.contains("zz")) s["required"].push_back("zz");
    }
    return s;
  }

  Json array(int depth) {
    Json s{{"type", "array"}};
    if (coin(rng_, 0.85)) s["items"] = gen(depth + 1);
    const int mn = uniform(rng_, 0, 2);
    if (coin(rng_)) s["minItems"] = mn;
    if (coin(rng_)) s["maxItems"] = mn + uniform(rng_, 0, 3);
    return s;
  }

  Json prefix_array(int depth) {
    Json s{{"type", "array"}};
    Json p = Json::array();
    for (int i = uniform(rng_, 1, 3); i > 0; --i) p.push_back(gen(depth + 1));
    s["prefixItems"] = p;
    switch (uniform(rng_, 0, 2)) {
      case 0:
        s["items"] = false;
        break;
      case 1:
        s["items"] = leaf();
        break;
      default:
        break;
    }
    if (coin(rng_)) s["minItems"] = uniform(rng_, 0, static_cast<int>(p.size()));
    if (coin(rng_)) s["maxItems"] = uniform(rng_, 1, 4);
    if (s.contains("minItems") && s.contains("maxItems") && s["minItems"] > s["maxItems"])
      s["maxItems"] = s["minItems"];
    if (s.contains("items") && s["items"] == false && s.contains("minItems") &&
        s["minItems"] > p.size())
      s.erase("minItems");
    return s;
  }

  // oneOf whose branches are pairwise disjoint in one of the ways the front-end can prove
  // (it refuses the others): different JSON types, disjoint const/enum value sets, or objects
  // told apart by a required discriminator property (Pydantic's tagged unions).
  Json one_of(int depth) {
    switch (uniform(rng_, 0, 2)) {
      case 0:
        return typed_one_of();
      case 1:
        return value_set_one_of();
      default:
        return tagged_one_of(depth);
    }
  }

  Json typed_one_of() {
    std::vector<Json> typed = {
        Json{{"type", "null"}},
        Json{{"type", "boolean"}},
        integer(),
        Json{{"type", "string"}, {"maxLength", 4}},
        Json{{"type", "array"}, {"items", Json{{"type", "integer"}}}, {"maxItems", 2}},
        Json{{"type", "object"},
             {"properties", Json{{"k", Json{{"type", "integer"}}}}},
             {"required", Json::array({"k"})},
             {"additionalProperties", false}}};
    std::shuffle(typed.begin(), typed.end(), rng_);
    Json alts = Json::array();
    for (int i = uniform(rng_, 2, 3); i > 0; --i) alts.push_back(typed[i]);
    return Json{{"oneOf", alts}};
  }

  // The enum pool split into 2-3 groups: a const or an enum per branch.
  Json value_set_one_of() {
    auto pool = enum_pool();
    std::shuffle(pool.begin(), pool.end(), rng_);
    Json alts = Json::array();
    size_t next = 0;
    for (int b = uniform(rng_, 2, 3); b > 0; --b) {
      const int n = uniform(rng_, 1, 3);
      if (n == 1) {
        alts.push_back(Json{{"const", pool[next++]}});
      } else {
        Json e = Json::array();
        for (int i = 0; i < n; ++i) e.push_back(pool[next++]);
        alts.push_back(Json{{"enum", e}});
      }
    }
    return Json{{"oneOf", alts}};
  }

  // Objects with a required tag of different values, written as Pydantic does (a typed const,
  // or a one-value enum), and random other members.
  Json tagged_one_of(int depth) {
    static const std::vector<std::string> tags = {"cat", "dog", "bird", "fish"};
    std::vector<std::string> order = tags;
    std::shuffle(order.begin(), order.end(), rng_);
    Json alts = Json::array();
    for (int b = uniform(rng_, 2, 3) - 1; b >= 0; --b) {
      Json tag = coin(rng_) ? Json{{"type", "string"}, {"const", order[b]}}
                            : Json{{"enum", Json::array({order[b]})}};
      Json props{{"kind", tag}};
      Json req = Json::array({"kind"});
      if (coin(rng_)) {
        props["v"] = depth + 1 < o_.max_depth ? gen(depth + 1) : leaf();
        if (coin(rng_)) req.push_back("v");
      }
      Json branch{{"type", "object"}, {"properties", props}, {"required", req}};
      if (coin(rng_)) branch["additionalProperties"] = false;
      alts.push_back(branch);
    }
    Json s{{"oneOf", alts}};
    if (coin(rng_, 0.3)) s["discriminator"] = Json{{"propertyName", "kind"}};
    return s;
  }

  Json all_of(int depth) {
    std::vector<std::string> names = kNames;
    std::shuffle(names.begin(), names.end(), rng_);
    Json parts = Json::array();
    size_t next = 0;
    for (int p = 0; p < 2; ++p) {
      Json props = Json::object(), req = Json::array();
      for (int i = uniform(rng_, 1, 2); i > 0; --i) {
        const std::string& n = names[next++];
        props[n] = gen(depth + 1);
        if (coin(rng_)) req.push_back(n);
      }
      Json part{{"type", "object"}, {"properties", props}};
      if (!req.empty()) part["required"] = req;
      parts.push_back(part);
    }
    Json s{{"allOf", parts}};
    if (coin(rng_)) s["type"] = "object";
    return s;
  }

 private:
  Rng& rng_;
  RandomSchemaOptions o_;
  bool have_node_ = false, have_item_ = false;
};

// ---- instances ---------------------------------------------------------------------------

class InstanceGen {
 public:
  InstanceGen(const Json& root, Rng& rng, const JsonGrammarOptions& caps)
      : root_(root), rng_(rng), caps_(caps) {}

  Json any(int depth) {
    switch (uniform(rng_, 0, depth >= 2 ? 3 : 5)) {
      case 0:
        return nullptr;
      case 1:
        return coin(rng_);
      case 2:
        return uniform(rng_, -99, 99);
      case 3:
        return random_text(rng_, 0, std::min(4, caps_.max_string_length));
      case 4: {
        Json a = Json::array();
        for (int i = uniform(rng_, 0, 2); i > 0; --i) a.push_back(any(depth + 1));
        return a;
      }
      default: {
        Json o = Json::object();
        for (int i = uniform(rng_, 0, 2); i > 0; --i) o[lower(rng_, 1, 3)] = any(depth + 1);
        return o;
      }
    }
  }

  Json gen(const Json& s, int depth = 0) {
    if (s.is_boolean()) return any(std::max(depth, 1));
    if (s.contains("$ref"))
      return gen(root_.at(Json::json_pointer(s["$ref"].get<std::string>().substr(1))), depth + 1);
    if (s.contains("anyOf")) return gen(pick(rng_, s["anyOf"].get<std::vector<Json>>()), depth + 1);
    if (s.contains("oneOf")) return gen(pick(rng_, s["oneOf"].get<std::vector<Json>>()), depth + 1);
    if (s.contains("allOf")) {
      // Object parts with disjoint properties: merged in order, required united.
      Json merged{{"type", "object"}, {"properties", Json::object()}, {"required", Json::array()}};
      for (const Json& p : s["allOf"]) {
        for (auto it = p["properties"].begin(); it != p["properties"].end(); ++it)
          merged["properties"][it.key()] = it.value();
        if (p.contains("required"))
          for (const Json& r : p["required"]) merged["required"].push_back(r);
      }
      return gen(merged, depth + 1);
    }
    if (s.contains("enum")) return pick(rng_, s["enum"].get<std::vector<Json>>());
    if (s.contains("const")) return s["const"];
    if (s.contains("nullable") && s["nullable"] == true && coin(rng_, 0.3)) return nullptr;
    if (!s.contains("type")) return any(std::max(depth, 1));
    std::string type;
    if (s["type"].is_array())
      type = pick(rng_, s["type"].get<std::vector<std::string>>());
    else
      type = s["type"].get<std::string>();
    if (type == "null") return nullptr;
    if (type == "boolean") return coin(rng_);
    if (type == "number") {
      const double v = uniform(rng_, -9999, 9999) / (coin(rng_) ? 4.0 : 1.0);
      return v;
    }
    if (type == "integer") return integer(s);
    if (type == "string") {
      if (s.contains("pattern")) {
        for (const PatternCase& p : patterns())
          if (s["pattern"] == p.pattern) return p.gen(rng_);
      }
      if (s.contains("format")) return random_format(rng_, s["format"].get<std::string>());
      const int mn = s.value("minLength", 0);
      const int mx = std::min(s.value("maxLength", caps_.max_string_length),
                              std::max(mn, std::min(8, caps_.max_string_length)));
      return random_text(rng_, mn, mx);
    }
    if (type == "array") return array(s, depth);
    return object(s, depth);
  }

  Json integer(const Json& s) {
    long lo = -99999, hi = 99999;
    long cap = 1;
    for (int i = 0; i < std::min(caps_.max_number_digits, 9); ++i) cap *= 10;
    lo = std::max(lo, -(cap - 1)), hi = std::min(hi, cap - 1);
    if (s.contains("minimum"))
      lo = std::max(lo, static_cast<long>(std::ceil(s["minimum"].get<double>())));
    if (s.contains("maximum"))
      hi = std::min(hi, static_cast<long>(std::floor(s["maximum"].get<double>())));
    if (s.contains("exclusiveMinimum"))
      lo = std::max(lo, static_cast<long>(std::floor(s["exclusiveMinimum"].get<double>())) + 1);
    if (s.contains("exclusiveMaximum"))
      hi = std::min(hi, static_cast<long>(std::ceil(s["exclusiveMaximum"].get<double>())) - 1);
    if (lo > hi) return lo;
    // Bounds themselves are the interesting values.
    switch (uniform(rng_, 0, 3)) {
      case 0:
        return lo;
      case 1:
        return hi;
      default:
        return std::uniform_int_distribution<long>(lo, hi)(rng_);
    }
  }

  Json array(const Json& s, int depth) {
    const std::vector<Json> prefix =
        s.contains("prefixItems") ? s["prefixItems"].get<std::vector<Json>>() : std::vector<Json>{};
    const Json rest = s.contains("items") ? s["items"] : Json(true);
    int mn = s.value("minItems", 0);
    int mx = s.value("maxItems", std::max(mn, 3));
    mx = std::min(mx, std::max(mn, caps_.max_array_items));
    if (rest == false) mx = std::min<int>(mx, prefix.size());
    for (size_t i = 0; i < prefix.size(); ++i)
      if (prefix[i] == false) mx = std::min<int>(mx, i);
    // Recursion: past a depth, the shortest arrays.
    const int n = depth > 6 ? mn : uniform(rng_, mn, std::max(mn, mx));
    Json a = Json::array();
    for (int i = 0; i < n; ++i)
      a.push_back(gen(i < static_cast<int>(prefix.size()) ? prefix[i] : rest, depth + 1));
    return a;
  }

  Json object(const Json& s, int depth) {
    Json o = Json::object();
    const Json props = s.value("properties", Json::object());
    std::set<std::string> req;
    if (s.contains("required"))
      for (const Json& r : s["required"]) req.insert(r.get<std::string>());
    for (auto it = props.begin(); it != props.end(); ++it) {
      if (it.value() == false) continue;
      if (req.count(it.key()) || (depth < 6 && coin(rng_)))
        o[it.key()] = gen(it.value(), depth + 1);
    }
    const Json add = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    for (const std::string& r : req)
      if (!props.contains(r)) o[r] = gen(add, depth + 1);
    if (add != false && depth < 6) {
      for (int i = uniform(rng_, 0, 2); i > 0; --i) {
        const std::string k = "x" + lower(rng_, 1, 3);
        if (!props.contains(k) && !o.contains(k)) o[k] = gen(add, depth + 1);
      }
    }
    return o;
  }

 private:
  const Json& root_;
  Rng& rng_;
  JsonGrammarOptions caps_;
};

}  // namespace

Json random_schema(Rng& rng, const RandomSchemaOptions& options) {
  return SchemaGen(rng, options).root();
}

Json random_instance(const Json& schema, Rng& rng, const JsonGrammarOptions& caps) {
  return InstanceGen(schema, rng, caps).gen(schema);
}

Json mutate_instance(const Json& instance, Rng& rng) {
  Json out = instance;
  // Walk to a random node, then damage it.
  Json* node = &out;
  while ((node->is_object() || node->is_array()) && !node->empty() && coin(rng, 0.6)) {
    auto it = node->begin();
    std::advance(it, uniform(rng, 0, static_cast<int>(node->size()) - 1));
    node = &*it;
  }
  switch (uniform(rng, 0, 5)) {
    case 0:
      *node = Json("mutated");
      break;
    case 1:
      *node = Json(123456);
      break;
    case 2:
      *node = Json(nullptr);
      break;
    case 3:
      if (node->is_object() && !node->empty())
        node->erase(node->begin());
      else if (node->is_object())
        (*node)["zz_extra"] = 1;
      else if (node->is_array())
        node->push_back("extra");
      else
        *node = Json::array();
      break;
    case 4:
      if (node->is_string())
        *node = node->get<std::string>() + "!!\"";
      else if (node->is_number())
        *node = node->get<double>() + 0.5;
      else
        *node = Json::object();
      break;
    default:
      if (node->is_object())
        (*node)["zz_extra"] = true;
      else
        *node = Json(false);
  }
  return out;
}

}  // namespace loom::structured::test
