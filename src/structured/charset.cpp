#include "structured/charset.h"

#include <algorithm>
#include <cstdio>

#include "structured/gbnf_builder.h"
#include "tokenizer/unicode.h"

namespace loom::structured::detail {

CharSet CharSet::range(uint32_t lo, uint32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

CharSet CharSet::all() {
  CharSet s;
  s.ranges_ = {{0, 0xD7FF}, {0xE000, kMaxCodePoint}};
  return s;
}

void CharSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.push_back({lo, hi});
  normalize();
}

void CharSet::add(const CharSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CharSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end(),
            [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> out;
  for (const CodeRange& r : ranges_) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  ranges_ = std::move(out);
}

CharSet CharSet::complement() const {
  return all().minus(*this);
}

CharSet CharSet::minus(const CharSet& other) const {
  CharSet out;
  for (CodeRange r : ranges_) {
    uint32_t lo = r.lo;
    bool done = false;
    for (const CodeRange& o : other.ranges_) {
      if (o.hi < lo || o.lo > r.hi) continue;
      if (o.lo > lo) out.ranges_.push_back({lo, o.lo - 1});
      if (o.hi >= r.hi) {
        done = true;
        break;
      }
      lo = o.hi + 1;
    }
    if (!done) out.ranges_.push_back({lo, r.hi});
  }
  out.normalize();
  return out;
}

CharSet CharSet::intersect(const CharSet& other) const {
  return minus(minus(other));
}

bool CharSet::contains(uint32_t cp) const {
  for (const CodeRange& r : ranges_)
    if (cp >= r.lo && cp <= r.hi) return true;
  return false;
}

uint64_t CharSet::size() const {
  uint64_t n = 0;
  for (const CodeRange& r : ranges_) n += r.hi - r.lo + 1;
  return n;
}

bool decode_utf8(std::string_view s, std::vector<uint32_t>* out) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len;
    uint32_t cp;
    if (c < 0x80) {
      len = 1, cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out->push_back(cp);
    i += len;
  }
  return true;
}

std::string encode_utf8(uint32_t cp) {
  std::string s;
  tok::append_utf8(s, cp);
  return s;
}

namespace {

// One code point inside [...]: printable ASCII as itself (class metacharacters escaped),
// everything else as a numeric escape so the grammar text stays plain ASCII.
std::string class_char(uint32_t cp) {
  char buf[16];
  if (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-') {
    return std::string("\\") + static_cast<char>(cp);
  }
  if (cp >= 0x20 && cp < 0x7F) return std::string(1, static_cast<char>(cp));
  if (cp < 0x80) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  }
  return buf;
}

std::string class_body(const CharSet& set) {
  std::string out;
  for (const CodeRange& r : set.ranges()) {
    out += class_char(r.lo);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    out += class_char(r.hi);
  }
  return out;
}

}  // namespace

std::string gbnf_class(const CharSet& set) {
  std::string pos = class_body(set);
  // The complement relative to all code points: surrogates are never produced, so leaving
  // them out of the negated class changes nothing.
  CharSet comp = set.complement();
  if (!comp.empty()) {
    std::string neg = class_body(comp);
    if (neg.size() < pos.size()) return "[^" + neg + "]";
  }
  return "[" + pos + "]";
}

std::string gbnf_char_literal(uint32_t cp) {
  return GbnfBuilder::literal(encode_utf8(cp));
}

}  // namespace loom::structured::detail
