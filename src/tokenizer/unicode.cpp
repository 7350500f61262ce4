// UTF-8 helpers and the GPT-2 byte ↔ unicode table.
#include "tokenizer/unicode.h"

#include <array>

namespace loom::tok {

size_t utf8_seq_len(uint8_t c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Checks the sequence at s[i] of expected length n. Returns: 1 valid, 0 invalid,
// -1 truncated (a valid prefix that runs past the end of s).
int check_seq(std::string_view s, size_t i, size_t n, uint32_t* cp_out) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  uint8_t c = p[i];
  if (n == 1) {
    if (c >= 0x80) return 0;
    *cp_out = c;
    return 1;
  }
  if (c == 0xC0 || c == 0xC1 || c > 0xF4) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return -1;
    uint8_t cc = p[i + k];
    if ((cc & 0xC0) != 0x80) return 0;
    // Reject overlong / surrogate / out-of-range forms as early as the second byte allows.
    if (k == 1) {
      if (c == 0xE0 && cc < 0xA0) return 0;
      if (c == 0xED && cc > 0x9F) return 0;
      if (c == 0xF0 && cc < 0x90) return 0;
      if (c == 0xF4 && cc > 0x8F) return 0;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  *cp_out = cp;
  return 1;
}

}  // namespace

uint32_t decode_utf8(std::string_view s, size_t i, size_t* len) {
  size_t n = utf8_seq_len(static_cast<uint8_t>(s[i]));
  uint32_t cp = 0;
  if (check_seq(s, i, n, &cp) == 1) {
    *len = n;
    return cp;
  }
  *len = 1;
  return 0xFFFD;
}

Utf8Split utf8_split(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_seq_len(static_cast<uint8_t>(s[i]));
    uint32_t cp;
    int r = check_seq(s, i, n, &cp);
    if (r == 1) {
      i += n;
      continue;
    }
    return {i, r == -1};
  }
  return {i, false};
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_seq_len(static_cast<uint8_t>(s[i]));
    uint32_t cp;
    if (check_seq(s, i, n, &cp) == 1) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

namespace {

struct ByteTables {
  std::array<std::string, 256> enc;
  std::array<int16_t, 324> dec;  // code point → byte; stand-ins never exceed 0x143
  ByteTables() {
    dec.fill(-1);
    // Printable bytes stand for themselves; the rest map to 256, 257, ... in byte order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(enc[b], cp);
      dec[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return tables().enc[b]; }

void byte_level_encode(std::string_view raw, std::string& out) {
  const auto& t = tables();
  for (char c : raw) out += t.enc[static_cast<uint8_t>(c)];
}

bool unicode_to_byte(uint32_t cp, uint8_t* b) {
  const auto& t = tables();
  if (cp >= t.dec.size() || t.dec[cp] < 0) return false;
  *b = static_cast<uint8_t>(t.dec[cp]);
  return true;
}

std::string byte_level_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t n;
    uint32_t cp = decode_utf8(s, i, &n);
    uint8_t b;
    if (cp != 0xFFFD && unicode_to_byte(cp, &b)) {
      out += static_cast<char>(b);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace loom::tok
