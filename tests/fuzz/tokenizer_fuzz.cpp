// Fuzz target: the tokenizers on untrusted text (random bytes, invalid UTF-8, control-token
// look-alikes) and untrusted token ids. Input: byte 0 picks a vocabulary fixture from
// tests/data (every GGUF vocabulary and the Hugging Face tokenizer.json), byte 1 the flags,
// the rest is the text; the same bytes read as 16-bit ids (some out of range) are decoded.
#include <memory>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "loom/tokenizer.h"

namespace {

const std::vector<std::unique_ptr<loom::Tokenizer>>& tokenizers() {
  static const auto all = [] {
    std::vector<std::unique_ptr<loom::Tokenizer>> v;
    for (const char* rel : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                            "vocab/ggml-vocab-qwen3.gguf", "vocab/ggml-vocab-phi-3.gguf",
                            "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
                            "hf_tokenizers/qwen3"}) {
      auto t = loom::Tokenizer::load(loom::fuzz::test_data(rel));
      LOOM_FUZZ_CHECK(t.is_ok(), rel);
      v.push_back(std::move(t).value());
    }
    return v;
  }();
  return all;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace

LOOM_FUZZ_INIT(tokenizers)

LOOM_FUZZ_TARGET(tokenizer) {
  loom::fuzz::Input in(data, size);
  const auto& all = tokenizers();
  const loom::Tokenizer& tok = *all[in.byte() % all.size()];
  const uint8_t flags = in.byte();
  const std::string_view text = in.rest();
  const int32_t n_vocab = tok.n_vocab();

  std::vector<int32_t> ids = tok.encode(text, flags & 1, flags & 2);
  for (int32_t id : ids) LOOM_FUZZ_CHECK(id >= 0 && id < n_vocab, "encode yields vocabulary ids");
  (void)tok.decode(ids, flags & 4);

  // Untrusted ids: anything a client may send to /detokenize or as a prompt.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    int32_t v = static_cast<uint8_t>(text[i]) | (static_cast<uint8_t>(text[i + 1]) << 8);
    if (flags & 8) v = v * 7 - 1000;  // reach the top of large vocabularies, and past both ends
    raw.push_back(v);
  }
  (void)tok.decode(raw, flags & 4);
  loom::IncrementalDetokenizer detok(tok, flags & 4);
  std::string streamed;
  for (int32_t id : raw) {
    (void)tok.token_piece(id, flags & 4, flags & 16);
    (void)tok.token_text(id);
    (void)tok.is_control(id);
    streamed += detok.push(id);
  }
  streamed += detok.finish();
  LOOM_FUZZ_CHECK(valid_utf8(streamed), "the incremental detokenizer writes valid UTF-8");
  if (auto id = tok.find_token(text)) LOOM_FUZZ_CHECK(*id >= 0 && *id < n_vocab, "find_token");
}
