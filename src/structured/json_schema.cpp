// JSON Schema → GBNF. One SchemaCompiler walks the schema; every sub-schema becomes a rule
// whose name follows its location, $ref targets become reserved rules (so recursion works),
// and anything the grammar could not enforce exactly is an error naming the keyword and its
// JSON pointer (fail closed: a request never gets a silently weaker grammar).
//
// Shapes: objects list their properties in the schema's order (required ones always, optional
// ones may be left out), then any additional members; arrays follow prefixItems then items;
// oneOf is compiled like anyOf when its branches are provably disjoint (discriminated unions,
// branches of different types), and refused otherwise (json_schema_one_of.cpp).
//
// Termination: a schema whose every value must contain another value of itself (a required
// property or a minItems >= 1 array that $refs back) has no finite instance; it is refused
// here with the $ref named, rather than accepted as a grammar that only "length" can stop.
#include <algorithm>
#include <cmath>
#include <set>

#include "structured/charset.h"
#include "structured/frontends.h"
#include "structured/json_schema_internal.h"

namespace loom::structured {

using detail::at;
using detail::JsonRules;
using detail::pointer_escape;

namespace {

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "$defs", "definitions", "example", "$anchor",
      // OpenAPI / Pydantic: names the property that tells oneOf's branches apart. It adds no
      // constraint beyond the branches themselves, which must be disjoint anyway.
      "discriminator"};
  return k;
}

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "prefixItems",
                                          "additionalItems",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "minItems",
                                          "maxItems",
                                          "nullable"};
  return k;
}

const std::set<std::string> kTypes = {"null",   "boolean", "object", "array",
                                      "number", "integer", "string"};

// Which type a keyword constrains (used when "type" is absent).
std::string keyword_type(const std::string& k) {
  if (k == "properties" || k == "required" || k == "additionalProperties") return "object";
  if (k == "items" || k == "prefixItems" || k == "additionalItems" || k == "minItems" ||
      k == "maxItems")
    return "array";
  if (k == "minLength" || k == "maxLength" || k == "pattern" || k == "format") return "string";
  if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum")
    return "number";
  return "";
}

bool json_is_type(const OrderedJson& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

Result<int64_t> non_negative_int(const OrderedJson& s, const char* key, const std::string& path) {
  const OrderedJson& v = s.at(key);
  if (!json_is_type(v, "integer") || v.get<double>() < 0)
    return invalid_argument(std::string("'") + key + "' at " + at(path) +
                            " must be a non-negative integer");
  double d = v.get<double>();
  if (d > 1e15)
    return invalid_argument(std::string("'") + key + "' at " + at(path) + " is too large");
  return static_cast<int64_t>(d);
}

class SchemaCompiler {
 public:
  SchemaCompiler(GbnfBuilder& b, const OrderedJson& root, const JsonGrammarOptions& options,
                 std::string prefix)
      : j_(b, options, std::move(prefix)), b_(b), root_(root) {}

  // The $ref strings whose rules were entered again while being compiled (recursion), with
  // the rule each became: only these can make a schema that never ends.
  const std::map<std::string, std::string>& recursive_refs() const { return recursive_refs_; }

  // Returns a GBNF expression (a rule name) for the values `s` admits.
  Result<std::string> compile(const OrderedJson& s, const std::string& path,
                              std::string_view rule_name = "");

 private:
  Result<std::string> compile_ref(const std::string& ref, const std::string& path);
  Result<std::string> compile_enum(const OrderedJson& s, const std::string& path,
                                   const std::string& name);
  Result<std::string> compile_type(const OrderedJson& s, const std::string& type,
                                   const std::string& path, const std::string& name);
  Result<std::string> compile_object(const OrderedJson& s, const std::string& path,
                                     const std::string& name);
  Result<std::string> compile_array(const OrderedJson& s, const std::string& path,
                                    const std::string& name);
  Result<std::string> compile_string(const OrderedJson& s, const std::string& path,
                                     const std::string& name);
  Result<std::string> compile_integer(const OrderedJson& s, const std::string& path,
                                      const std::string& name);
  std::string key_not_in(const std::vector<std::vector<uint32_t>>& keys, const std::string& name);

  std::string rule_name(const std::string& path) {
    if (path.empty()) return j_.prefix() + "-schema";
    std::string n = j_.prefix();
    // The last two pointer components keep names readable and mostly unique.
    size_t cut = path.size(), parts = 0;
    while (cut > 0 && parts < 2) {
      cut = path.rfind('/', cut - 1);
      if (cut == std::string::npos) {
        cut = 0;
        break;
      }
      ++parts;
    }
    return n + path.substr(cut);
  }

  JsonRules j_;
  GbnfBuilder& b_;
  const OrderedJson& root_;
  std::map<std::string, std::string> refs_;  // "$ref" string -> reserved rule
  std::set<std::string> refs_in_progress_;
  std::map<std::string, std::string> recursive_refs_;
  int ref_depth_ = 0;
};

Result<std::string> SchemaCompiler::compile(const OrderedJson& s, const std::string& path,
                                            std::string_view forced_name) {
  const std::string name = forced_name.empty() ? rule_name(path) : std::string(forced_name);
  auto define = [&](const std::string& body) { return b_.add_rule(name, body); };
  if (s.is_boolean()) {
    if (!s.get<bool>())
      return invalid_argument("schema 'false' at " + at(path) + " admits no value");
    return define(j_.any_value(0));
  }
  if (!s.is_object())
    return invalid_argument("schema at " + at(path) + " must be an object or a boolean");

  bool has_constraint = false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (annotation_keywords().count(it.key())) continue;
    if (!supported_keywords().count(it.key()))
      return invalid_argument("unsupported JSON Schema keyword '" + it.key() + "' at " + at(path));
    has_constraint = true;
  }
  if (!has_constraint) return define(j_.any_value(0));

  if (s.contains("$ref")) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "$ref" && !annotation_keywords().count(it.key()))
        return invalid_argument("'$ref' with sibling keyword '" + it.key() + "' at " + at(path) +
                                " is not supported");
    }
    if (!s["$ref"].is_string())
      return invalid_argument("'$ref' at " + at(path) + " must be a string");
    LOOM_ASSIGN_OR_RETURN(std::string r, compile_ref(s["$ref"].get<std::string>(), path));
    return define(r);
  }

  // nullable (OpenAPI): the schema's values or null.
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean())
      return invalid_argument("'nullable' at " + at(path) + " must be a boolean");
    if (s["nullable"].get<bool>()) {
      OrderedJson rest = s;
      rest.erase("nullable");
      LOOM_ASSIGN_OR_RETURN(std::string inner, compile(rest, path, name + "-value"));
      return define(inner + " | " + j_.null());
    }
  }

  if (s.contains("allOf")) {
    const OrderedJson& all = s["allOf"];
    if (!all.is_array() || all.empty())
      return invalid_argument("'allOf' at " + at(path) + " must be a non-empty array");
    OrderedJson parts = OrderedJson::array();
    OrderedJson rest = s;
    rest.erase("allOf");
    parts.push_back(rest);
    for (size_t i = 0; i < all.size(); ++i) {
      OrderedJson part = all[i];
      // Merging needs the referenced schemas themselves.
      for (int hops = 0; part.is_object() && part.contains("$ref"); ++hops) {
        if (hops > 32) return invalid_argument("'$ref' cycle in allOf at " + at(path));
        if (!part["$ref"].is_string())
          return invalid_argument("'$ref' at " + at(path) + " must be a string");
        const std::string ref = part["$ref"].get<std::string>();
        if (ref.rfind("#", 0) != 0)
          return invalid_argument("'$ref' '" + ref + "' at " + at(path) +
                                  " is not a local reference");
        OrderedJson::json_pointer ptr;
        try {
          ptr = OrderedJson::json_pointer(ref.substr(1));
        } catch (const std::exception&) {
          return invalid_argument("'$ref' '" + ref + "' at " + at(path) +
                                  " is not a valid JSON pointer");
        }
        if (!root_.contains(ptr))
          return invalid_argument("'$ref' '" + ref + "' at " + at(path) +
                                  " points to no definition");
        OrderedJson target = root_.at(ptr);
        OrderedJson siblings = part;
        siblings.erase("$ref");
        part = target;
        if (part.is_object())
          for (auto it = siblings.begin(); it != siblings.end(); ++it)
            if (!part.contains(it.key())) part[it.key()] = it.value();
      }
      parts.push_back(part);
    }
    LOOM_ASSIGN_OR_RETURN(OrderedJson merged, detail::merge_all_of(parts, path + "/allOf"));
    return compile(merged, path, name);
  }

  for (const char* comb : {"anyOf", "oneOf"}) {
    if (!s.contains(comb)) continue;
    const OrderedJson& alts = s[comb];
    if (!alts.is_array() || alts.empty())
      return invalid_argument(std::string("'") + comb + "' at " + at(path) +
                              " must be a non-empty array");
    OrderedJson rest = s;
    rest.erase(comb);
    if (std::string_view(comb) == "oneOf")
      LOOM_RETURN_IF_ERROR(detail::check_one_of_disjoint(alts, rest, root_, path));
    bool rest_constrains = false;
    for (auto it = rest.begin(); it != rest.end(); ++it)
      if (!annotation_keywords().count(it.key())) rest_constrains = true;
    std::string body;
    for (size_t i = 0; i < alts.size(); ++i) {
      const std::string sub = path + "/" + comb + "/" + std::to_string(i);
      OrderedJson alt = alts[i];
      if (rest_constrains) {
        // Sibling keywords apply to every branch: {siblings, anyOf:[a,b]} = anyOf[a∧siblings, ...].
        alt = OrderedJson{{"allOf", OrderedJson::array({rest, alts[i]})}};
      }
      if (alt.is_boolean() && !alt.get<bool>()) continue;
      LOOM_ASSIGN_OR_RETURN(std::string e, compile(alt, sub));
      body += (body.empty() ? "" : " | ") + e;
    }
    if (body.empty())
      return invalid_argument(std::string("'") + comb + "' at " + at(path) + " admits no value");
    return define(body);
  }

  if (s.contains("enum") || s.contains("const")) return compile_enum(s, path, name);

  // The types to produce: "type" (string or list), else inferred from the keywords present.
  std::vector<std::string> types;
  if (s.contains("type")) {
    const OrderedJson& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const auto& x : t) {
        if (!x.is_string())
          return invalid_argument("'type' at " + at(path) +
                                  " must be a string or a list of strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      return invalid_argument("'type' at " + at(path) + " must be a string or a list of strings");
    }
    for (const std::string& x : types)
      if (!kTypes.count(x)) return invalid_argument("unknown type '" + x + "' at " + at(path));
    // "integer" is a subset of "number": listing both means "number".
    if (std::count(types.begin(), types.end(), "number") &&
        std::count(types.begin(), types.end(), "integer"))
      types.erase(std::find(types.begin(), types.end(), "integer"));
  } else {
    std::set<std::string> seen;
    for (auto it = s.begin(); it != s.end(); ++it) {
      std::string t = keyword_type(it.key());
      if (!t.empty() && seen.insert(t).second) types.push_back(t);
    }
    if (types.empty()) return define(j_.any_value(0));
  }
  if (types.size() == 1) return compile_type(s, types[0], path, name);
  std::string body;
  for (const std::string& t : types) {
    LOOM_ASSIGN_OR_RETURN(std::string e, compile_type(s, t, path, name + "-" + t));
    body += (body.empty() ? "" : " | ") + e;
  }
  return define(body);
}

Result<std::string> SchemaCompiler::compile_ref(const std::string& ref, const std::string& path) {
  auto it = refs_.find(ref);
  if (it != refs_.end()) {
    if (refs_in_progress_.count(ref)) recursive_refs_[ref] = it->second;
    return it->second;
  }
  if (ref.empty() || ref[0] != '#')
    return invalid_argument("'$ref' '" + ref + "' at " + at(path) +
                            " is not a local reference (only '#/...' is supported)");
  OrderedJson::json_pointer ptr;
  try {
    ptr = OrderedJson::json_pointer(ref.substr(1));
  } catch (const std::exception&) {
    return invalid_argument("'$ref' '" + ref + "' at " + at(path) + " is not a valid JSON pointer");
  }
  if (!root_.contains(ptr))
    return invalid_argument("'$ref' '" + ref + "' at " + at(path) + " points to no definition");
  if (++ref_depth_ > 256) return invalid_argument("'$ref' nesting too deep at " + at(path));
  const std::string reserved = b_.reserve(j_.prefix() + "-ref" + ref.substr(1));
  refs_[ref] = reserved;
  refs_in_progress_.insert(ref);
  LOOM_ASSIGN_OR_RETURN(std::string body, compile(root_.at(ptr), ref.substr(1)));
  refs_in_progress_.erase(ref);
  b_.define(reserved, body);
  --ref_depth_;
  return reserved;
}

Result<std::string> SchemaCompiler::compile_enum(const OrderedJson& s, const std::string& path,
                                                 const std::string& name) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (k == "enum" || k == "const" || k == "type" || annotation_keywords().count(k)) continue;
    return invalid_argument("'" + k + "' combined with 'enum'/'const' at " + at(path) +
                            " is not supported");
  }
  std::vector<OrderedJson> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array())
      return invalid_argument("'enum' at " + at(path) + " must be an array");
    for (const auto& v : s["enum"]) values.push_back(v);
  }
  if (s.contains("const")) {
    if (s.contains("enum")) {
      const OrderedJson c = s["const"];
      std::erase_if(values, [&](const OrderedJson& v) { return v != c; });
    } else {
      values.push_back(s["const"]);
    }
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    if (s["type"].is_string())
      types.push_back(s["type"].get<std::string>());
    else if (s["type"].is_array())
      for (const auto& t : s["type"])
        if (t.is_string()) types.push_back(t.get<std::string>());
    if (types.empty())
      return invalid_argument("'type' at " + at(path) + " must be a string or a list of strings");
  }
  std::string body;
  std::set<std::string> seen;
  for (const OrderedJson& v : values) {
    if (!types.empty() && std::none_of(types.begin(), types.end(),
                                       [&](const std::string& t) { return json_is_type(v, t); }))
      continue;
    const std::string text = v.dump(-1, ' ', false, OrderedJson::error_handler_t::strict);
    if (!seen.insert(text).second) continue;
    body += (body.empty() ? "" : " | ") + GbnfBuilder::literal(text);
  }
  if (body.empty()) return invalid_argument("'enum'/'const' at " + at(path) + " admits no value");
  return b_.add_rule(name, body);
}

Result<std::string> SchemaCompiler::compile_type(const OrderedJson& s, const std::string& type,
                                                 const std::string& path, const std::string& name) {
  if (type == "object") return compile_object(s, path, name);
  if (type == "array") return compile_array(s, path, name);
  if (type == "string") return compile_string(s, path, name);
  if (type == "integer") return compile_integer(s, path, name);
  if (type == "number") {
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k))
        return invalid_argument(std::string("'") + k + "' on type 'number' at " + at(path) +
                                " is not supported (only on 'integer')");
    return j_.number();
  }
  if (type == "boolean") return j_.boolean();
  return j_.null();
}

Result<std::string> SchemaCompiler::compile_string(const OrderedJson& s, const std::string& path,
                                                   const std::string& name) {
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  if (s.contains("format")) {
    if (!s["format"].is_string())
      return invalid_argument("'format' at " + at(path) + " must be a string");
    if (has_len || s.contains("pattern"))
      return invalid_argument("'format' combined with 'pattern'/'minLength'/'maxLength' at " +
                              at(path) + " is not supported");
    return detail::add_format_string(j_, s["format"].get<std::string>(), path);
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string())
      return invalid_argument("'pattern' at " + at(path) + " must be a string");
    if (has_len)
      return invalid_argument("'pattern' combined with 'minLength'/'maxLength' at " + at(path) +
                              " is not supported");
    detail::RegexEmitOptions ro;
    ro.json_string = true;
    ro.max_repeat = j_.options().max_string_length;
    auto e = detail::add_regex_expr(b_, s["pattern"].get<std::string>(), ro, name + "-pattern");
    if (!e) return invalid_argument("'pattern' at " + at(path) + ": " + e.status().message());
    return b_.add_rule(name, "\"\\\"\" " + *e + " \"\\\"\"");
  }
  int64_t min = 0, max = -1;
  if (s.contains("minLength")) {
    LOOM_ASSIGN_OR_RETURN(min, non_negative_int(s, "minLength", path));
  }
  if (s.contains("maxLength")) {
    LOOM_ASSIGN_OR_RETURN(max, non_negative_int(s, "maxLength", path));
  }
  if (max >= 0 && min > max) return invalid_argument("'minLength' > 'maxLength' at " + at(path));
  if (min > 100000) return invalid_argument("'minLength' at " + at(path) + " is too large");
  // An explicit maxLength above the cap is capped too: still a valid (shorter) string.
  const int64_t cap = std::max<int64_t>(min, j_.options().max_string_length);
  if (max < 0 || max > cap) max = cap;
  return j_.string(min, max);
}

Result<std::string> SchemaCompiler::compile_integer(const OrderedJson& s, const std::string& path,
                                                    const std::string& name) {
  // Bounds as doubles first (schemas may write 1.5 or 1e3), then to the integer range.
  std::optional<double> lo, hi;
  bool lo_excl = false, hi_excl = false;
  auto num = [&](const char* k) -> Result<double> {
    if (!s[k].is_number())
      return invalid_argument(std::string("'") + k + "' at " + at(path) + " must be a number");
    return s[k].get<double>();
  };
  auto tighten_lo = [&](double v, bool excl) {
    if (!lo || v > *lo || (v == *lo && excl)) lo = v, lo_excl = excl;
  };
  auto tighten_hi = [&](double v, bool excl) {
    if (!hi || v < *hi || (v == *hi && excl)) hi = v, hi_excl = excl;
  };
  // Draft 4 spells exclusive bounds as booleans next to minimum/maximum.
  auto flag = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
  if (s.contains("minimum")) {
    LOOM_ASSIGN_OR_RETURN(double v, num("minimum"));
    tighten_lo(v, flag("exclusiveMinimum"));
  }
  if (s.contains("maximum")) {
    LOOM_ASSIGN_OR_RETURN(double v, num("maximum"));
    tighten_hi(v, flag("exclusiveMaximum"));
  }
  if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean()) {
    LOOM_ASSIGN_OR_RETURN(double v, num("exclusiveMinimum"));
    tighten_lo(v, true);
  }
  if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean()) {
    LOOM_ASSIGN_OR_RETURN(double v, num("exclusiveMaximum"));
    tighten_hi(v, true);
  }
  if (!lo && !hi) return j_.integer();
  const int digits = j_.options().max_number_digits;
  const double limit = std::pow(10.0, std::min(digits, 18)) - 1;
  std::optional<int64_t> ilo, ihi;
  if (lo) {
    double v = lo_excl ? std::floor(*lo) + 1 : std::ceil(*lo);
    if (v > limit)
      return invalid_argument("'minimum' at " + at(path) + " exceeds the integer digit cap");
    if (v >= -limit) ilo = static_cast<int64_t>(v);
  }
  if (hi) {
    double v = hi_excl ? std::ceil(*hi) - 1 : std::floor(*hi);
    if (v < -limit)
      return invalid_argument("'maximum' at " + at(path) + " exceeds the integer digit cap");
    if (v <= limit) ihi = static_cast<int64_t>(v);
  }
  auto body = detail::integer_range_gbnf(ilo, ihi, digits);
  if (!body) return invalid_argument("integer bounds at " + at(path) + " admit no value");
  return b_.add_rule(name, *body);
}

// Extra member keys of an object that declares `keys`: any raw (unescaped) key except the
// declared ones, so that an extra member can never shadow a declared property. A trie over
// the declared keys' code points; leaving the trie anywhere frees the rest of the key.
std::string SchemaCompiler::key_not_in(const std::vector<std::vector<uint32_t>>& keys,
                                       const std::string& name) {
  using detail::CharSet;
  struct Node {
    std::map<uint32_t, int> next;
    bool terminal = false;
  };
  std::vector<Node> nodes(1);
  for (const auto& k : keys) {
    int n = 0;
    for (uint32_t c : k) {
      auto it = nodes[n].next.find(c);
      if (it == nodes[n].next.end()) {
        nodes.push_back({});
        it = nodes[n].next.emplace(c, static_cast<int>(nodes.size()) - 1).first;
      }
      n = it->second;
    }
    nodes[n].terminal = true;
  }
  CharSet raw = CharSet::all().minus(CharSet::range(0, 0x1F));
  raw = raw.minus(CharSet::of('"')).minus(CharSet::of('\\'));
  const std::string rest =
      b_.add_rule(name + "-rest", detail::gbnf_class(raw) + "{0," +
                                      std::to_string(j_.options().max_string_length) + "}");
  std::vector<std::string> rule(nodes.size());
  // Children always have larger indices than their parent: build bottom-up.
  for (int i = static_cast<int>(nodes.size()) - 1; i >= 0; --i) {
    std::string alts;
    CharSet other = raw;
    for (const auto& [c, child] : nodes[i].next) {
      if (!raw.contains(c)) continue;  // a key char that needs escaping: never produced raw
      other = other.minus(CharSet::of(c));
      alts += (alts.empty() ? "" : " | ") + detail::gbnf_char_literal(c) + " " + rule[child];
    }
    if (!other.empty())
      alts += (alts.empty() ? "" : " | ") + detail::gbnf_class(other) + " " + rest;
    rule[i] = b_.add_rule(name + "-k", nodes[i].terminal ? alts : "( " + alts + " )?");
  }
  return "\"\\\"\" " + rule[0] + " \"\\\"\"";
}

Result<std::string> SchemaCompiler::compile_object(const OrderedJson& s, const std::string& path,
                                                   const std::string& name) {
  const OrderedJson props = s.contains("properties") ? s["properties"] : OrderedJson::object();
  if (!props.is_object())
    return invalid_argument("'properties' at " + at(path) + " must be an object");
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array())
      return invalid_argument("'required' at " + at(path) + " must be an array of strings");
    for (const auto& r : s["required"]) {
      if (!r.is_string())
        return invalid_argument("'required' at " + at(path) + " must be an array of strings");
      required.insert(r.get<std::string>());
    }
  }
  const OrderedJson additional =
      s.contains("additionalProperties") ? s["additionalProperties"] : OrderedJson(true);
  if (!additional.is_boolean() && !additional.is_object())
    return invalid_argument("'additionalProperties' at " + at(path) +
                            " must be a boolean or a schema");
  const bool extras = !(additional.is_boolean() && !additional.get<bool>());
  const std::string w = j_.ws();

  struct Member {
    std::string kv;  // key ws ":" ws value ws
    bool required;
  };
  std::vector<Member> members;
  std::vector<std::vector<uint32_t>> declared;
  auto member = [&](const std::string& key, const std::string& value) {
    return GbnfBuilder::literal(OrderedJson(key).dump()) + w + " \":\"" + w + " " + value + w;
  };
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string sub = path + "/properties/" + pointer_escape(it.key());
    std::vector<uint32_t> cps;
    if (!detail::decode_utf8(it.key(), &cps))
      return invalid_argument("property name at " + at(sub) + " is not valid UTF-8");
    declared.push_back(cps);
    const bool req = required.count(it.key()) != 0;
    if (it.value().is_boolean() && !it.value().get<bool>()) {
      if (req)
        return invalid_argument("required property '" + it.key() + "' at " + at(path) +
                                " has schema false");
      continue;  // may not appear at all
    }
    LOOM_ASSIGN_OR_RETURN(std::string v, compile(it.value(), sub));
    members.push_back({member(it.key(), v), req});
  }
  std::string extra_value;
  if (extras) {
    LOOM_ASSIGN_OR_RETURN(extra_value, compile(additional, path + "/additionalProperties"));
  }
  for (const std::string& r : required) {
    if (props.contains(r)) continue;
    // Required but undeclared: it must be an additional member; list it like a property.
    if (!extras)
      return invalid_argument("required property '" + r + "' at " + at(path) +
                              " is not in 'properties' and additionalProperties is false");
    std::vector<uint32_t> cps;
    if (!detail::decode_utf8(r, &cps))
      return invalid_argument("required name at " + at(path) + " is not valid UTF-8");
    declared.push_back(cps);
    members.push_back({member(r, extra_value), true});
  }

  // Members in order; commas go before every member but the first one present. first_i: the
  // members from i on when none was written yet; tail_i: the same after at least one.
  std::string first, tail;
  if (extras) {
    const std::string key = declared.empty() ? j_.string() : key_not_in(declared, name + "-key");
    const std::string x =
        b_.add_rule(name + "-extra", key + w + " \":\"" + w + " " + extra_value + w);
    const int cap = j_.options().max_array_items;
    const std::string more = "( \",\"" + w + " " + x + " )";
    first = b_.add_rule(name + "-extras",
                        "( " + x + " " + more + "{0," + std::to_string(cap - 1) + "} )?");
    tail = b_.add_rule(name + "-extras-tail", more + "{0," + std::to_string(cap) + "}");
  }
  for (int i = static_cast<int>(members.size()) - 1; i >= 0; --i) {
    const Member& m = members[i];
    const std::string after = tail.empty() ? "" : " " + tail;
    const std::string t =
        m.required ? "\",\"" + w + " " + m.kv + after : "( \",\"" + w + " " + m.kv + " )?" + after;
    std::string f;
    if (m.required)
      f = m.kv + after;
    else if (first.empty())
      f = "( " + m.kv + after + " )?";
    else
      f = m.kv + after + " | " + first;
    tail = b_.add_rule(name + "-tail", t);
    first = b_.add_rule(name + "-m", f);
  }
  return b_.add_rule(name, "\"{\"" + w + (first.empty() ? "" : " " + first) + " \"}\"");
}

Result<std::string> SchemaCompiler::compile_array(const OrderedJson& s, const std::string& path,
                                                  const std::string& name) {
  std::vector<std::pair<OrderedJson, std::string>> prefix;  // schema, its pointer
  OrderedJson rest = true;
  std::string rest_path;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array())
      return invalid_argument("'prefixItems' at " + at(path) + " must be an array");
    if (s.contains("items") && s["items"].is_array())
      return invalid_argument("'items' at " + at(path) +
                              " must be a schema when 'prefixItems' is present");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i)
      prefix.push_back({s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i)});
    if (s.contains("items")) rest = s["items"], rest_path = path + "/items";
  } else if (s.contains("items") && s["items"].is_array()) {  // draft 4-7 tuple form
    for (size_t i = 0; i < s["items"].size(); ++i)
      prefix.push_back({s["items"][i], path + "/items/" + std::to_string(i)});
    if (s.contains("additionalItems"))
      rest = s["additionalItems"], rest_path = path + "/additionalItems";
  } else if (s.contains("items")) {
    rest = s["items"], rest_path = path + "/items";
  }
  if (!rest.is_boolean() && !rest.is_object())
    return invalid_argument("'items' at " + at(path) + " must be a schema");
  int64_t min = 0, max = -1;
  if (s.contains("minItems")) {
    LOOM_ASSIGN_OR_RETURN(min, non_negative_int(s, "minItems", path));
  }
  if (s.contains("maxItems")) {
    LOOM_ASSIGN_OR_RETURN(max, non_negative_int(s, "maxItems", path));
  }
  const int64_t n = static_cast<int64_t>(prefix.size());
  const bool rest_allowed = !(rest.is_boolean() && !rest.get<bool>());
  const int64_t cap = std::max<int64_t>({min, n, j_.options().max_array_items});
  if (max < 0 || max > cap) max = cap;
  if (!rest_allowed) max = std::min(max, n);
  // A `false` prefix position: the array must end before it.
  for (int64_t i = 0; i < n; ++i)
    if (prefix[i].first.is_boolean() && !prefix[i].first.get<bool>()) max = std::min(max, i);
  if (min > max) return invalid_argument("array constraints at " + at(path) + " admit no value");
  if (min > 100000) return invalid_argument("'minItems' at " + at(path) + " is too large");

  const std::string w = j_.ws();
  // After the prefix: items matching `rest`, count in [max(min-n,0), max-n].
  std::string at_end;
  if (max > n) {
    LOOM_ASSIGN_OR_RETURN(std::string r,
                          compile(rest, rest_path.empty() ? path + "/items" : rest_path));
    const int64_t rmin = std::max<int64_t>(min - n, 0), rmax = max - n;
    const std::string x = r + w;
    const std::string more = "( \",\"" + w + " " + x + " )";
    auto rep = [&](int64_t a, int64_t b) -> std::string {
      if (b == 0) return "";
      return " " + more + "{" + std::to_string(a) + "," + std::to_string(b) + "}";
    };
    if (n > 0)
      at_end = b_.add_rule(name + "-rest",
                           more + "{" + std::to_string(rmin) + "," + std::to_string(rmax) + "}");
    else if (rmin == 0)
      at_end = b_.add_rule(name + "-items", "( " + x + rep(0, rmax - 1) + " )?");
    else
      at_end = b_.add_rule(name + "-items", x + rep(rmin - 1, rmax - 1));
  }
  std::string next = at_end;
  for (int64_t i = std::min(n, max) - 1; i >= 0; --i) {
    LOOM_ASSIGN_OR_RETURN(std::string e, compile(prefix[i].first, prefix[i].second));
    std::string elem = (i == 0 ? "" : "\",\"" + w + " ") + e + w + (next.empty() ? "" : " " + next);
    next = b_.add_rule(name + "-at", i < min ? elem : "( " + elem + " )?");
  }
  return b_.add_rule(name, "\"[\"" + w + (next.empty() ? "" : " " + next) + " \"]\"");
}

}  // namespace

Result<std::string> add_json_schema(GbnfBuilder& b, const OrderedJson& schema,
                                    const JsonGrammarOptions& options, std::string_view name) {
  SchemaCompiler c(b, schema, options, std::string(name));
  LOOM_ASSIGN_OR_RETURN(std::string e, c.compile(schema, ""));
  const std::string entry = b.add_rule(name, e);
  if (!c.recursive_refs().empty())
    LOOM_RETURN_IF_ERROR(detail::check_schema_can_end(b, entry, c.recursive_refs()));
  return entry;
}

Result<std::string> json_schema_to_gbnf(const OrderedJson& schema,
                                        const JsonGrammarOptions& options) {
  GbnfBuilder b;
  LOOM_ASSIGN_OR_RETURN(std::string root, add_json_schema(b, schema, options, "root"));
  (void)root;
  return b.str();
}

std::string add_any_json_object(GbnfBuilder& b, const JsonGrammarOptions& options) {
  JsonRules j(b, options, "json");
  return j.any_object(0);
}

std::string any_json_object_gbnf(const JsonGrammarOptions& options) {
  GbnfBuilder b;
  b.add_rule("root", add_any_json_object(b, options));
  return b.str();
}

}  // namespace loom::structured
