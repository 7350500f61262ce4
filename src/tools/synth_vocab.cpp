#include "tools/synth_vocab.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "model/tensor_names.h"

namespace loom {
namespace {

// llama.cpp token types.
constexpr int64_t kTokNormal = 1, kTokUnknown = 2, kTokControl = 3, kTokUnused = 5, kTokByte = 6;

bool file_exists(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

}  // namespace

Result<SynthVocab> load_synth_vocab(const std::string& path, int32_t pad_to) {
  auto f = GgufFile::open(path);
  if (!f.is_ok())
    return Status(f.status().code(), "vocabulary " + path + ": " + f.status().message());
  SynthVocab v;
  v.source = path;
  const GgufValue* tokens = f->find(names::kTokenizerTokens);
  const std::vector<std::string>* tok = tokens ? tokens->as_string_array() : nullptr;
  if (!tok || tok->empty())
    return invalid_file("vocabulary " + path + " has no " + std::string(names::kTokenizerTokens));
  const int64_t n = static_cast<int64_t>(tok->size());
  if (n > INT32_MAX) return invalid_file("vocabulary " + path + " is too large");
  if (pad_to > 0 && n > pad_to)
    return invalid_argument("vocabulary " + path + " has " + std::to_string(n) +
                            " tokens, more than the preset's " + std::to_string(pad_to));
  const int64_t target = pad_to > 0 ? pad_to : n;
  for (const auto& [key, value] : f->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    // Per-token arrays grow with the padding; everything else is copied as is.
    if (target > n && value.type() == GgufType::kArray &&
        static_cast<int64_t>(value.array_size()) == n) {
      if (key == names::kTokenizerTokens) {
        auto t = *tok;
        for (int64_t i = n; i < target; ++i) t.push_back("[PAD" + std::to_string(i) + "]");
        v.kv.emplace_back(key, GgufValue::of_string_array(std::move(t)));
        continue;
      }
      if (const auto* ints = value.as_int_array()) {
        auto t = *ints;
        t.resize(target, key == names::kTokenizerTokenType ? kTokUnused : 0);
        v.kv.emplace_back(key, GgufValue::of_int_array(value.array_type(), std::move(t)));
        continue;
      }
      if (const auto* fl = value.as_float_array()) {
        auto t = *fl;
        t.resize(target, 0.0);
        v.kv.emplace_back(key, GgufValue::of_float_array(value.array_type(), std::move(t)));
        continue;
      }
    }
    v.kv.emplace_back(key, value);
  }
  v.n_vocab = static_cast<int32_t>(target);
  if (target > n) v.source += " (padded from " + std::to_string(n) + " tokens)";
  return v;
}

Result<SynthVocab> placeholder_vocab(int32_t n_vocab,
                                     std::span<const std::string_view> control_tokens) {
  const int32_t n_control = static_cast<int32_t>(control_tokens.size());
  if (n_vocab < 259 + n_control)
    return invalid_argument("a placeholder vocabulary needs at least " +
                            std::to_string(259 + n_control) + " tokens, not " +
                            std::to_string(n_vocab));
  const int32_t n_text = n_vocab - n_control;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int64_t> types = {kTokUnknown, kTokControl, kTokControl};
  std::vector<double> scores = {0, 0, 0};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(kTokByte);
    scores.push_back(0);
  }
  const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
  auto add = [&](std::string piece) {
    if (static_cast<int32_t>(tokens.size()) >= n_text) return;
    scores.push_back(-static_cast<double>(tokens.size()));
    tokens.push_back(std::move(piece));
    types.push_back(kTokNormal);
  };
  add(kSpace);
  for (int c = 33; c < 127; ++c) add(std::string(1, static_cast<char>(c)));
  // Letter strings in frequency order, word-initial first, lengthening until full.
  static const std::string kLetters = "etaoinshrdlcumwfgypbvkjxqz";
  std::vector<std::string> level = {""};
  while (static_cast<int32_t>(tokens.size()) < n_text) {
    std::vector<std::string> next;
    for (const auto& prefix : level)
      for (char c : kLetters) next.push_back(prefix + c);
    for (const auto& s : next) add(kSpace + s);
    for (const auto& s : next)
      if (s.size() > 1) add(s);
    level = std::move(next);
  }
  for (std::string_view t : control_tokens) {
    tokens.emplace_back(t);
    types.push_back(kTokControl);
    scores.push_back(0);
  }
  SynthVocab v;
  v.n_vocab = n_vocab;
  v.placeholder = true;
  v.source = "placeholder: generated SentencePiece-style vocabulary of " + std::to_string(n_vocab) +
             " tokens (no real tokenizer for this preset)";
  v.kv.emplace_back(std::string(names::kTokenizerModel), GgufValue::of_string("llama"));
  v.kv.emplace_back(std::string(names::kTokenizerPre), GgufValue::of_string("default"));
  v.kv.emplace_back(std::string(names::kTokenizerTokens),
                    GgufValue::of_string_array(std::move(tokens)));
  v.kv.emplace_back(std::string(names::kTokenizerScores),
                    GgufValue::of_float_array(GgufType::kF32, std::move(scores)));
  v.kv.emplace_back(std::string(names::kTokenizerTokenType),
                    GgufValue::of_int_array(GgufType::kI32, std::move(types)));
  v.kv.emplace_back(std::string(names::kTokenizerBos), GgufValue::of_uint(GgufType::kU32, 1));
  v.kv.emplace_back(std::string(names::kTokenizerEos), GgufValue::of_uint(GgufType::kU32, 2));
  v.kv.emplace_back("tokenizer.ggml.unknown_token_id", GgufValue::of_uint(GgufType::kU32, 0));
  v.kv.emplace_back(std::string(names::kTokenizerAddBos), GgufValue::of_bool(true));
  v.kv.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::of_bool(false));
  // A chat format's text follows its markers directly ("<|message|>Hi"), as in the byte-level
  // BPE vocabularies such formats come with: no word-boundary space before each fragment.
  if (n_control > 0)
    v.kv.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::of_bool(false));
  return v;
}

std::string find_vocab_fixture(std::string_view file_name) {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("LOOM_VOCAB_DIR")) {
    fs::path p = fs::path(dir) / file_name;
    if (file_exists(p)) return p.string();
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = exe.parent_path();
    for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
      fs::path p = dir / "tests" / "data" / "vocab" / file_name;
      if (file_exists(p)) return p.string();
      if (dir == dir.parent_path()) break;
    }
  }
  fs::path p = fs::current_path(ec) / "tests" / "data" / "vocab" / file_name;
  if (!ec && file_exists(p)) return p.string();
  return "";
}

}  // namespace loom
