// loom::Tokenizer: loading, special-token partitioning, dispatch to the SPM / BPE merge
// algorithms, and decoding.
#include "loom/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "format/gguf.h"
#include "tokenizer/loaders.h"
#include "tokenizer/models.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace loom {

using tok::TokenType;
using tok::VocabKind;

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // ▁

Result<std::unique_ptr<TokenizerImpl>> make_impl(tok::Vocab vocab) {
  auto impl = std::make_unique<TokenizerImpl>();
  LOOM_ASSIGN_OR_RETURN(impl->pre, tok::PreTokenizer::create(vocab.pre_splits));
  impl->vocab = std::move(vocab);
  for (int32_t id : impl->vocab.specials) {  // already longest first
    impl->specials_by_byte[static_cast<uint8_t>(impl->vocab.tokens[id].text[0])].push_back(id);
  }
  return impl;
}

Result<std::unique_ptr<TokenizerImpl>> hf_impl(std::string_view tokenizer_json,
                                               std::string_view tokenizer_config_json,
                                               std::vector<int32_t> named_eog) {
  LOOM_ASSIGN_OR_RETURN(tok::Vocab v, tok::vocab_from_hf(tokenizer_json, tokenizer_config_json,
                                                         std::move(named_eog)));
  return make_impl(std::move(v));
}

Result<std::string> read_text_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return io_error("cannot open " + p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("error reading " + p.string());
  return ss.str();
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

struct Fragment {
  std::string_view text;  // raw text when token < 0
  int32_t token = -1;
};

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& gguf) {
  LOOM_ASSIGN_OR_RETURN(tok::Vocab v, tok::vocab_from_gguf(gguf));
  LOOM_ASSIGN_OR_RETURN(auto impl, make_impl(std::move(v)));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_json(
    std::string_view tokenizer_json, std::string_view tokenizer_config_json,
    std::string_view generation_config_json) {
  std::vector<int32_t> named_eog;
  if (!generation_config_json.empty()) {
    auto ids = tok::generation_eos_ids(generation_config_json);
    if (!ids.is_ok())
      return Status(ids.status().code(), "generation config: " + ids.status().message());
    named_eog = std::move(ids).value();
  }
  LOOM_ASSIGN_OR_RETURN(auto impl,
                        hf_impl(tokenizer_json, tokenizer_config_json, std::move(named_eog)));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d(dir);
  fs::path tj = d / "tokenizer.json";
  std::error_code ec;
  if (!fs::is_regular_file(tj, ec)) return not_found("no tokenizer.json in " + dir);
  LOOM_ASSIGN_OR_RETURN(std::string json_text, read_text_file(tj));
  std::string cfg_text;
  if (fs::is_regular_file(d / "tokenizer_config.json", ec)) {
    LOOM_ASSIGN_OR_RETURN(cfg_text, read_text_file(d / "tokenizer_config.json"));
  }
  // transformers stops on generation_config.eos_token_id, which it derives from config.json
  // when the checkpoint has no generation_config.json.
  std::vector<int32_t> named_eog;
  for (const char* name : {"generation_config.json", "config.json"}) {
    const fs::path p = d / name;
    if (!fs::is_regular_file(p, ec)) continue;
    LOOM_ASSIGN_OR_RETURN(std::string text, read_text_file(p));
    auto ids = tok::generation_eos_ids(text);
    if (!ids.is_ok())
      return Status(ids.status().code(), p.string() + ": " + ids.status().message());
    named_eog = std::move(ids).value();
    break;
  }
  auto impl = hf_impl(json_text, cfg_text, std::move(named_eog));
  if (!impl.is_ok())
    return Status(impl.status().code(), tj.string() + ": " + impl.status().message());
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl).value()));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return from_hf_dir(path);
  if (!fs::exists(path, ec)) return not_found("no such file or directory: " + path);
  if (fs::path(path).filename() == "tokenizer.json")
    return from_hf_dir(fs::path(path).parent_path().string());
  LOOM_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
  auto r = from_gguf(gguf);
  if (!r.is_ok()) return Status(r.status().code(), path + ": " + r.status().message());
  return r;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const tok::Vocab& v = impl_->vocab;

  // 1. Split out added/special tokens, leftmost then longest match.
  std::vector<Fragment> frags;
  size_t start = 0;
  bool skip_ws = false;  // the previous token has rstrip: eat whitespace that follows it
  for (size_t i = 0; i < text.size();) {
    if (skip_ws) {
      if (is_space(text[i])) {
        start = ++i;
        continue;
      }
      skip_ws = false;
    }
    int32_t hit = -1;
    for (int32_t id : impl_->specials_by_byte[static_cast<uint8_t>(text[i])]) {
      const tok::TokenData& t = v.tokens[id];
      if (!parse_special && t.type != TokenType::kUserDefined) continue;
      if (text.compare(i, t.text.size(), t.text) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    size_t end = i;
    if (v.tokens[hit].lstrip) {
      while (end > start && is_space(text[end - 1])) --end;
    }
    if (end > start) frags.push_back({text.substr(start, end - start)});
    frags.push_back({{}, hit});
    i += v.tokens[hit].text.size();
    start = i;
    skip_ws = v.tokens[hit].rstrip;
  }
  if (start < text.size()) frags.push_back({text.substr(start)});

  // 2. Run the model on each text fragment.
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && v.add_bos && v.bos >= 0) out.push_back(v.bos);
  bool prev_special = true;  // SentencePiece prefixes a space at the start and after specials
  bool first = true;
  std::string buf;
  std::vector<std::string_view> words;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      first = false;
      continue;
    }
    switch (v.kind) {
      case VocabKind::kSpm:
      case VocabKind::kBpeMerges: {
        buf.clear();
        bool prefix = v.kind == VocabKind::kSpm ? prev_special : first;
        if (v.add_space_prefix && prefix) buf += v.escape_spaces ? kSpaceMark : " ";
        for (char c : f.text) {
          if (c == ' ' && v.escape_spaces)
            buf += kSpaceMark;
          else
            buf += c;
        }
        if (v.kind == VocabKind::kSpm) {
          tok::spm_encode(v, buf, &out);
        } else {
          words.clear();
          impl_->pre.split(buf, &words);
          for (std::string_view w : words) tok::bpe_encode_word(v, w, &out);
        }
        break;
      }
      case VocabKind::kBpeByteLevel: {
        std::string_view src = f.text;
        std::string prefixed;
        if (v.add_prefix_space_bytelevel && first && !src.empty() && src[0] != ' ') {
          prefixed.reserve(src.size() + 1);
          prefixed += ' ';
          prefixed += src;
          src = prefixed;
        }
        words.clear();
        impl_->pre.split(src, &words);
        for (std::string_view w : words) {
          buf.clear();
          tok::byte_level_encode(w, buf);
          tok::bpe_encode_word(v, buf, &out);
        }
        break;
      }
    }
    prev_special = false;
    first = false;
  }
  if (add_special && v.add_eos && v.eos >= 0) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::token_piece(int32_t id, bool skip_special, bool at_start) const {
  const tok::Vocab& v = impl_->vocab;
  if (!v.valid(id)) return {};
  const tok::TokenData& t = v.tokens[id];
  switch (t.type) {
    case TokenType::kControl:
      return skip_special ? std::string() : t.text;
    case TokenType::kUserDefined:
      return t.text;
    case TokenType::kUnknown:
      return skip_special ? std::string() : t.text;
    case TokenType::kByte: {
      auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                      : -1;
      };
      if (t.text.size() == 6 && t.text.rfind("<0x", 0) == 0 && t.text[5] == '>' &&
          hex(t.text[3]) >= 0 && hex(t.text[4]) >= 0) {
        return std::string(1, static_cast<char>(hex(t.text[3]) * 16 + hex(t.text[4])));
      }
      break;  // a malformed byte token decodes as its text
    }
    default:
      break;
  }
  std::string s;
  if (v.kind == VocabKind::kBpeByteLevel) {
    s = tok::byte_level_decode(t.text);
  } else {
    s.reserve(t.text.size());
    for (size_t i = 0; i < t.text.size();) {
      if (v.escape_spaces && t.text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
        s += ' ';
        i += kSpaceMark.size();
      } else {
        s += t.text[i++];
      }
    }
    if (at_start && v.add_space_prefix && !s.empty() && s[0] == ' ') s.erase(0, 1);
  }
  return s;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) {
    out += token_piece(id, skip_special, at_start);
    if (at_start && impl_->vocab.valid(id) && impl_->vocab.tokens[id].type != TokenType::kControl)
      at_start = false;
  }
  return out;
}

std::string Tokenizer::token_text(int32_t id) const {
  return impl_->vocab.valid(id) ? impl_->vocab.tokens[id].text : std::string();
}

int32_t Tokenizer::n_vocab() const {
  return static_cast<int32_t>(impl_->vocab.tokens.size());
}
int32_t Tokenizer::bos() const {
  return impl_->vocab.bos;
}
int32_t Tokenizer::eos() const {
  return impl_->vocab.eos;
}
int32_t Tokenizer::eot() const {
  return impl_->vocab.eot;
}
int32_t Tokenizer::pad() const {
  return impl_->vocab.pad;
}
int32_t Tokenizer::unk() const {
  return impl_->vocab.unk;
}
bool Tokenizer::add_bos() const {
  return impl_->vocab.add_bos;
}
bool Tokenizer::add_eos() const {
  return impl_->vocab.add_eos;
}

bool Tokenizer::is_eog(int32_t id) const {
  const auto& e = impl_->vocab.eog;
  return std::binary_search(e.begin(), e.end(), id);
}

std::span<const int32_t> Tokenizer::eog_ids() const {
  return impl_->vocab.eog;
}

bool Tokenizer::is_control(int32_t id) const {
  return impl_->vocab.valid(id) && impl_->vocab.tokens[id].type == TokenType::kControl;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view piece) const {
  int32_t id = impl_->vocab.find(piece);
  if (id < 0) return std::nullopt;
  return id;
}

// ---- IncrementalDetokenizer ----

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tok_->token_piece(id, skip_special_, at_start_);
  if (at_start_ && !tok_->is_control(id)) at_start_ = false;
  std::string out;
  for (;;) {
    tok::Utf8Split sp = tok::utf8_split(pending_);
    out.append(pending_, 0, sp.valid_prefix);
    pending_.erase(0, sp.valid_prefix);
    if (pending_.empty() || sp.tail_incomplete) break;
    // An invalid byte can never become valid: replace it and keep going.
    out += "\xEF\xBF\xBD";
    pending_.erase(0, 1);
  }
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out = tok::utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace loom
