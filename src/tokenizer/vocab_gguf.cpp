// Vocab from GGUF metadata (tokenizer.ggml.*), following the keys llama.cpp's converter
// writes: model, tokens, scores, token_type, merges, pre, special ids and add_* flags.
#include <string>

#include "format/gguf.h"
#include "tokenizer/loaders.h"

namespace loom::tok {

namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

std::string key(std::string_view k) {
  return std::string(kPrefix) + std::string(k);
}

}  // namespace

Result<Vocab> vocab_from_gguf(const GgufFile& gguf) {
  Vocab v;
  auto model = gguf.get_string(key("model"));
  if (!model) return invalid_file("GGUF file has no tokenizer (missing tokenizer.ggml.model)");
  // llama.cpp's word for a file without a vocabulary (its LLAMA_VOCAB_TYPE_NONE).
  if (*model == "none" || *model == "no_vocab")
    return invalid_file("GGUF file has no tokenizer (tokenizer.ggml.model is \"" + *model + "\")");
  if (*model == "llama") {
    v.kind = VocabKind::kSpm;
    v.bos = 1, v.eos = 2, v.unk = 0;  // SentencePiece defaults when the file names none
    v.add_bos = true;
    v.add_space_prefix = true;
  } else if (*model == "gpt2") {
    v.kind = VocabKind::kBpeByteLevel;
    v.add_bos = false;
  } else {
    return unsupported("tokenizer model '" + *model +
                       "' is not supported (loom supports 'llama' (SentencePiece) and 'gpt2' "
                       "(byte-level BPE))");
  }

  const GgufValue* tokens = gguf.find(key("tokens"));
  const std::vector<std::string>* texts = tokens ? tokens->as_string_array() : nullptr;
  if (!texts || texts->empty())
    return invalid_file("GGUF tokenizer.ggml.tokens is missing or not a string array");
  const size_t n = texts->size();
  v.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) v.tokens[i].text = (*texts)[i];

  if (const GgufValue* s = gguf.find(key("scores"))) {
    const auto* sc = s->as_float_array();
    if (!sc || sc->size() != n)
      return invalid_file(
          "GGUF tokenizer.ggml.scores must be a float array with one score per token");
    for (size_t i = 0; i < n; ++i) v.tokens[i].score = static_cast<float>((*sc)[i]);
  }
  if (const GgufValue* t = gguf.find(key("token_type"))) {
    const auto* tt = t->as_int_array();
    if (!tt || tt->size() != n)
      return invalid_file(
          "GGUF tokenizer.ggml.token_type must be an int array with one type per token");
    for (size_t i = 0; i < n; ++i) {
      int64_t x = (*tt)[i];
      if (x < 0 || x > 6)
        return invalid_file("GGUF token " + std::to_string(i) + " has unknown token type " +
                            std::to_string(x));
      v.tokens[i].type = static_cast<TokenType>(x);
    }
  }

  if (v.kind == VocabKind::kBpeByteLevel) {
    const GgufValue* m = gguf.find(key("merges"));
    const auto* ms = m ? m->as_string_array() : nullptr;
    if (!ms) return invalid_file("GGUF byte-level BPE tokenizer has no tokenizer.ggml.merges");
    v.merges.reserve(ms->size());
    for (const std::string& s : *ms) {
      // "left right"; the search starts at 1 so that a left piece may itself be a space.
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos)
        return invalid_file("GGUF merge '" + s + "' is not of the form 'left right'");
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
    std::string pre = gguf.get_string(key("pre")).value_or("default");
    if (!pre_splits_for_name(pre, &v.pre_splits, &v.ignore_merges)) {
      return unsupported("pre-tokenizer '" + pre + "' (tokenizer.ggml.pre) is not supported");
    }
  }

  auto id = [&](std::string_view k, int32_t* out) -> Status {
    if (auto x = gguf.get_int(key(k))) {
      if (*x < -1 || *x >= static_cast<int64_t>(n)) {
        return invalid_file("GGUF " + key(k) + " = " + std::to_string(*x) +
                            " is outside the vocabulary of " + std::to_string(n));
      }
      *out = static_cast<int32_t>(*x);
    }
    return Status::ok();
  };
  LOOM_RETURN_IF_ERROR(id("bos_token_id", &v.bos));
  LOOM_RETURN_IF_ERROR(id("eos_token_id", &v.eos));
  LOOM_RETURN_IF_ERROR(id("eot_token_id", &v.eot));
  LOOM_RETURN_IF_ERROR(id("eom_token_id", &v.eom));
  LOOM_RETURN_IF_ERROR(id("unknown_token_id", &v.unk));
  LOOM_RETURN_IF_ERROR(id("padding_token_id", &v.pad));
  if (auto b = gguf.get_bool(key("add_bos_token"))) v.add_bos = *b;
  if (auto b = gguf.get_bool(key("add_eos_token"))) v.add_eos = *b;
  if (auto b = gguf.get_bool(key("add_space_prefix"))) v.add_space_prefix = *b;
  if (v.kind != VocabKind::kSpm) v.add_space_prefix = false;
  LOOM_RETURN_IF_ERROR(v.finalize());
  return v;
}

}  // namespace loom::tok
