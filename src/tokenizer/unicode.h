// UTF-8 helpers and the GPT-2 byte-level mapping (each byte ↔ one printable code point), shared
// by the encoders and the detokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::tok {

// Length of the UTF-8 sequence introduced by lead byte c (1 for a stray continuation byte or
// an invalid lead, so that callers always make progress).
size_t utf8_seq_len(uint8_t c);

void append_utf8(std::string& out, uint32_t cp);

// Decodes one code point at s[i]; on invalid input returns 0xFFFD and *len = 1.
uint32_t decode_utf8(std::string_view s, size_t i, size_t* len);

// Length of the longest prefix of s that is complete, valid UTF-8 and, separately, whether the
// remainder could still become valid once more bytes arrive.
struct Utf8Split {
  size_t valid_prefix;   // bytes of s that form complete valid characters
  bool tail_incomplete;  // s[valid_prefix..] is a proper prefix of a valid sequence
};
Utf8Split utf8_split(std::string_view s);

// Replaces every invalid byte with U+FFFD.
std::string utf8_sanitize(std::string_view s);

// GPT-2 byte-level encoding: byte → UTF-8 of its printable stand-in, and back.
const std::string& byte_to_unicode(uint8_t b);
void byte_level_encode(std::string_view raw, std::string& out);
// Returns false for a code point that is not a byte stand-in.
bool unicode_to_byte(uint32_t cp, uint8_t* b);
// Maps a byte-level token string back to raw bytes; code points outside the table are kept as
// their UTF-8 (as HF's ByteLevel decoder does for added tokens).
std::string byte_level_decode(std::string_view s);

}  // namespace loom::tok
