// The JSON Schema front-end's leaf grammars: string formats (matching ajv-formats' "full"
// mode, so a generated value always passes a standard validator), exact decimal grammars for
// integer ranges, and allOf merging.
#include <algorithm>
#include <cmath>
#include <set>

#include "structured/json_schema_internal.h"

namespace loom::structured::detail {

std::string pointer_escape(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

Result<std::string> add_format_string(JsonRules& j, std::string_view format,
                                      const std::string& path) {
  GbnfBuilder& b = j.builder();
  const std::string q = "\"\\\"\"";  // the string's quotes
  const std::string f(format);
  auto rule = [&](const std::string& suffix, const std::string& body) {
    return b.add_rule(j.name("format-" + suffix), body);
  };
  if (f == "date" || f == "date-time") {
    // Real calendar dates: 30/31-day months, February 29 only in leap years (divisible by 4,
    // centuries only when divisible by 400).
    const std::string leap4 = "( \"0\" [48] | [2468] [048] | [13579] [26] )";
    const std::string date =
        rule("date",
             "[0-9]{4} \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) "
             "\"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"
             " | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )"
             " | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )"
             " | ( [0-9]{2} " +
                 leap4 + " | " + leap4 + " \"00\" | \"0000\" ) \"-02-29\"");
    if (f == "date") return rule("date-string", q + " " + date + " " + q);
    const std::string time = rule(
        "time",
        "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
        "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )");
    return rule("date-time-string", q + " " + date + " \"T\" " + time + " " + q);
  }
  if (f == "time") {
    return rule("time-string",
                q +
                    " ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" "
                    "[0-9]{1,9} )? "
                    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] ) " +
                    q);
  }
  if (f == "uuid") {
    return rule("uuid", q +
                            " [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} "
                            "\"-\" [0-9a-f]{12} " +
                            q);
  }
  if (f == "ipv4") {
    const std::string octet =
        rule("octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]");
    return rule("ipv4", q + " " + octet + " ( \".\" " + octet + " ){3} " + q);
  }
  if (f == "email") {
    // A deterministic subset of ajv's address syntax: dot-separated atoms, '@', hostname
    // labels of letters and digits joined by hyphens. Lengths capped so the string ends.
    const std::string atom = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]{1,64}";
    const std::string label = "[a-zA-Z0-9]{1,63} ( \"-\"{1,8} [a-zA-Z0-9]{1,63} ){0,8}";
    const std::string lab = rule("email-label", label);
    return rule("email", q + " " + atom + " ( \".\" " + atom + " ){0,8} \"@\" " + lab +
                             " ( \".\" " + lab + " ){1,8} " + q);
  }
  return invalid_argument("unsupported JSON Schema format '" + f + "' at " + at(path) +
                          " (supported: date, time, date-time, uuid, email, ipv4)");
}

namespace {

int num_digits(int64_t v) {
  int d = 1;
  while (v >= 10) v /= 10, ++d;
  return d;
}

int64_t pow10(int n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

std::string digit_class(char a, char b) {
  if (a == b) return std::string("\"") + a + "\"";
  if (a == '0' && b == '9') return "[0-9]";
  return std::string("[") + a + "-" + b + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Decimal strings x <= y of equal length: the strings between them, one derivation each.
std::string same_length_range(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  if (n == 1) return digit_class(x[0], y[0]);
  if (x[0] == y[0])
    return join(std::string("\"") + x[0] + "\"", same_length_range(x.substr(1), y.substr(1)));
  const std::string xr = x.substr(1), yr = y.substr(1);
  const bool x_low = xr.find_first_not_of('0') == std::string::npos;
  const bool y_high = yr.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  char mid_lo = x[0], mid_hi = y[0];
  if (!x_low) {
    alts.push_back(
        join(std::string("\"") + x[0] + "\"", same_length_range(xr, std::string(n - 1, '9'))));
    ++mid_lo;
  }
  if (!y_high) --mid_hi;
  if (mid_lo <= mid_hi) alts.push_back(join(digit_class(mid_lo, mid_hi), any_digits(n - 1)));
  if (!y_high)
    alts.push_back(
        join(std::string("\"") + y[0] + "\"", same_length_range(std::string(n - 1, '0'), yr)));
  if (alts.size() == 1) return alts[0];
  std::string out = "( ";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + " )";
}

// Non-negative integers in [a, b] (b < 0: unbounded, up to max_digits digits).
std::vector<std::string> non_negative_range(int64_t a, int64_t b, int max_digits) {
  std::vector<std::string> alts;
  const int da = num_digits(a);
  const int db = b < 0 ? max_digits : num_digits(b);
  for (int d = da; d <= db; ++d) {
    const int64_t lo = std::max(a, d == 1 ? 0 : pow10(d - 1));
    const int64_t top = pow10(d) - 1;
    if (b < 0 && d > da) {
      // Every longer length at once: [1-9] then d-1 .. max_digits-1 digits.
      alts.push_back("[1-9] [0-9]{" + std::to_string(d - 1) + "," + std::to_string(max_digits - 1) +
                     "}");
      break;
    }
    const int64_t hi = b < 0 ? top : std::min(b, top);
    if (lo > hi) continue;
    alts.push_back(same_length_range(std::to_string(lo), std::to_string(hi)));
  }
  return alts;
}

}  // namespace

std::optional<std::string> integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi,
                                              int max_digits) {
  max_digits = std::clamp(max_digits, 1, 18);
  const int64_t limit = pow10(max_digits) - 1;
  if (lo && hi && *lo > *hi) return std::nullopt;
  if (lo && *lo > limit) return std::nullopt;
  if (hi && *hi < -limit) return std::nullopt;
  std::vector<std::string> alts;
  // Negative part: "-" then magnitudes in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
    const int64_t mag_hi = lo ? std::min(-*lo, limit) : -1;
    std::vector<std::string> m = non_negative_range(mag_lo, mag_hi, max_digits);
    if (!m.empty()) {
      std::string e = "\"-\" ";
      if (m.size() == 1)
        e += m[0];
      else {
        e += "( ";
        for (size_t i = 0; i < m.size(); ++i) e += (i ? " | " : "") + m[i];
        e += " )";
      }
      alts.push_back(e);
    }
  }
  if (!hi || *hi >= 0) {
    const int64_t a = lo ? std::max<int64_t>(*lo, 0) : 0;
    const int64_t b = hi ? std::min(*hi, limit) : -1;
    for (std::string& s : non_negative_range(a, b, max_digits)) alts.push_back(std::move(s));
  }
  if (alts.empty()) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// ---- allOf ------------------------------------------------------------------------------

namespace {

const std::set<std::string> kAnnotations = {
    "title",      "description", "default",   "examples", "$schema",     "$id",     "$comment",
    "deprecated", "readOnly",    "writeOnly", "$defs",    "definitions", "example", "$anchor"};

std::set<std::string> type_set(const OrderedJson& t) {
  std::set<std::string> out;
  if (t.is_string())
    out.insert(t.get<std::string>());
  else if (t.is_array())
    for (const auto& x : t)
      if (x.is_string()) out.insert(x.get<std::string>());
  return out;
}

}  // namespace

Result<OrderedJson> merge_all_of(const OrderedJson& schemas, const std::string& path) {
  OrderedJson out = OrderedJson::object();
  // Flatten nested allOf first.
  std::vector<OrderedJson> parts;
  std::vector<OrderedJson> stack(schemas.rbegin(), schemas.rend());
  while (!stack.empty()) {
    OrderedJson s = std::move(stack.back());
    stack.pop_back();
    if (s.is_boolean()) {
      if (!s.get<bool>())
        return invalid_argument("'allOf' at " + at(path) + " contains schema false");
      continue;
    }
    if (!s.is_object())
      return invalid_argument("'allOf' entries at " + at(path) + " must be schemas");
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array())
        return invalid_argument("'allOf' at " + at(path) + " must be an array");
      OrderedJson inner = s["allOf"];
      s.erase("allOf");
      for (auto it = inner.rbegin(); it != inner.rend(); ++it) stack.push_back(*it);
      stack.push_back(s);
      continue;
    }
    if (s.contains("$ref"))
      return invalid_argument("'$ref' inside nested 'allOf' at " + at(path) + " is not supported");
    parts.push_back(std::move(s));
  }
  bool nullable_all = true;
  for (const OrderedJson& s : parts) {
    nullable_all = nullable_all && s.contains("nullable") && s["nullable"] == true;
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      const OrderedJson& v = it.value();
      if (kAnnotations.count(k) || k == "nullable") continue;
      if (!out.contains(k)) {
        out[k] = v;
        continue;
      }
      OrderedJson& cur = out[k];
      if (cur == v) continue;
      if (k == "properties") {
        if (!v.is_object() || !cur.is_object())
          return invalid_argument("'properties' at " + at(path) + " must be an object");
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (!cur.contains(p.key()))
            cur[p.key()] = p.value();
          else if (cur[p.key()] != p.value())
            cur[p.key()] = OrderedJson{{"allOf", OrderedJson::array({cur[p.key()], p.value()})}};
        }
      } else if (k == "required") {
        if (!v.is_array() || !cur.is_array())
          return invalid_argument("'required' at " + at(path) + " must be an array");
        for (const auto& r : v)
          if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
      } else if (k == "type") {
        std::set<std::string> a = type_set(cur), b = type_set(v), both;
        // integer within number
        for (const std::string& t : a)
          if (b.count(t) || (t == "integer" && b.count("number"))) both.insert(t);
        for (const std::string& t : b)
          if (t == "integer" && a.count("number")) both.insert(t);
        if (both.empty()) return invalid_argument("'allOf' at " + at(path) + " has no common type");
        cur = OrderedJson(std::vector<std::string>(both.begin(), both.end()));
      } else if (k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum") {
        if (!cur.is_number() || !v.is_number())
          return invalid_argument("cannot merge '" + k + "' in 'allOf' at " + at(path));
        if (v > cur) cur = v;
      } else if (k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum") {
        if (!cur.is_number() || !v.is_number())
          return invalid_argument("cannot merge '" + k + "' in 'allOf' at " + at(path));
        if (v < cur) cur = v;
      } else if (k == "items" && !cur.is_array() && !v.is_array()) {
        cur = OrderedJson{{"allOf", OrderedJson::array({cur, v})}};
      } else {
        return invalid_argument("cannot merge '" + k + "' in 'allOf' at " + at(path));
      }
    }
  }
  // additionalProperties of one part constrains the properties the other parts declare:
  // exact only when that part declares every property of the merged schema.
  if (out.contains("properties") || out.contains("additionalProperties")) {
    for (const OrderedJson& s : parts) {
      if (!s.contains("additionalProperties") || s["additionalProperties"] == true) continue;
      const OrderedJson own = s.contains("properties") ? s["properties"] : OrderedJson::object();
      if (out.contains("properties"))
        for (auto p = out["properties"].begin(); p != out["properties"].end(); ++p)
          if (!own.contains(p.key()))
            return invalid_argument("cannot merge 'additionalProperties' in 'allOf' at " +
                                    at(path) + ": property '" + p.key() +
                                    "' is not declared beside it");
    }
  }
  if (nullable_all && !parts.empty()) out["nullable"] = true;
  return out;
}

}  // namespace loom::structured::detail
