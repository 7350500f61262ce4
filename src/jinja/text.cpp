// Python string semantics over UTF-8 (see text.h).
#include "jinja/text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace loom::jinja {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

size_t utf8_length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  return utf8_decode(s).size();
}

bool py_isspace(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return true;
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars) {
  std::u32string u = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : py_isspace(c);
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    // Byte search is exact for UTF-8 separators.
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t f = s.find(*sep, pos);
        if (f == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, f - pos));
        pos = f + sep->size();
      }
      parts.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t f = s.rfind(*sep, end - sep->size());
        if (f == std::string_view::npos) break;
        rev.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
        end = f;
      }
      rev.emplace_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
    return parts;
  }
  std::u32string u = utf8_decode(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < u.size() && py_isspace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(utf8_encode(std::u32string_view(u).substr(i)));  // keeps its tail
        break;
      }
      size_t j = i;
      while (j < u.size() && !py_isspace(u[j])) ++j;
      parts.push_back(utf8_encode(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
  } else {
    std::vector<std::string> rev;
    size_t e = u.size();
    while (true) {
      while (e > 0 && py_isspace(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) >= maxsplit) {
        rev.push_back(utf8_encode(std::u32string_view(u).substr(0, e)));  // keeps its head
        break;
      }
      size_t b = e;
      while (b > 0 && !py_isspace(u[b - 1])) --b;
      rev.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
    parts.assign(rev.rbegin(), rev.rend());
  }
  return parts;
}

std::string py_replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                       int64_t count) {
  std::string out;
  if (old_s.empty()) {
    // Python inserts `new` between every code point (and at both ends).
    std::u32string u = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += new_s;
        ++n;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t f = s.find(old_s, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(new_s);
    pos = f + old_s.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

namespace {

// Simple case mapping for the scripts chat content commonly uses (Latin-1, Latin
// Extended-A, Greek, Cyrillic); other code points are left unchanged.
char32_t to_upper_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17f) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_upper) return (c % 2 == 0) ? c - 1 : c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3b1 && c <= 0x3c9) return c == 0x3c2 ? 0x3a3 : c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

char32_t to_lower_cp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17f) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_upper) return (c % 2 == 1) ? c + 1 : c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

std::string map_case(std::string_view s, bool upper) {
  if (is_ascii(s)) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(upper ? to_upper_cp(c) : to_lower_cp(c));
    return r;
  }
  std::string out;
  for (char32_t c : utf8_decode(s)) {
    if (upper && c == 0xdf) {
      out += "SS";  // Python: 'ß'.upper() == 'SS'
      continue;
    }
    utf8_append(out, upper ? to_upper_cp(c) : to_lower_cp(c));
  }
  return out;
}

}  // namespace

std::string ascii_upper(std::string_view s) {
  return map_case(s, true);
}
std::string ascii_lower(std::string_view s) {
  return map_case(s, false);
}

std::string py_capitalize(std::string_view s) {
  std::string r = ascii_lower(s);
  if (!r.empty() && r[0] >= 'a' && r[0] <= 'z') r[0] = static_cast<char>(r[0] - 32);
  return r;
}

std::string py_title(std::string_view s) {
  std::string r(s);
  bool prev_cased = false;
  for (char& c : r) {
    unsigned char u = c;
    bool lower = u >= 'a' && u <= 'z', upper = u >= 'A' && u <= 'Z';
    if (lower || upper) {
      if (prev_cased && upper) c = static_cast<char>(u + 32);
      if (!prev_cased && lower) c = static_cast<char>(u - 32);
      prev_cased = true;
    } else {
      // Non-ASCII bytes belong to letters often enough (é, ß); treat them as cased.
      prev_cased = u >= 0x80;
    }
  }
  return r;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp10 = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  int decpt = exp10 + 1;
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= static_cast<int>(digits.size())) {
    out += digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string py_str_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<char32_t>(q)) {
      out += '\\';
      out += q;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
               (c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += q;
  return out;
}

}  // namespace loom::jinja
