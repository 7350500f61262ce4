// Vocab::finalize (lookup tables, special-token list, end-of-generation ids) and the table of
// pre-tokenizer regexes by tokenizer.ggml.pre name.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>

namespace loom::tok {

Status Vocab::finalize() {
  if (tokens.empty()) return invalid_file("tokenizer has an empty vocabulary");
  token_to_id.clear();
  token_to_id.reserve(tokens.size());
  for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
    // First occurrence wins for duplicate strings (some vocabularies pad with repeats).
    token_to_id.emplace(tokens[i].text, i);
  }

  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    byte_tokens[b] = find(buf);
  }

  merge_table.clear();
  merge_table.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [l, rt] = merges[r];
    int32_t a = find(l), b = find(rt), m = find(l + rt);
    if (a < 0 || b < 0 || m < 0) continue;  // cannot fire on text made of tokens
    merge_table.emplace(pair_key(a, b), Merge{static_cast<int32_t>(r), m});
  }
  merges.clear();
  merges.shrink_to_fit();

  for (int32_t* id : {&bos, &eos, &eot, &eom, &unk, &pad}) {
    if (*id >= static_cast<int32_t>(tokens.size())) *id = -1;
  }

  specials.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
    TokenType t = tokens[i].type;
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !tokens[i].text.empty()) {
      specials.push_back(i);
    }
  }
  std::stable_sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
    return tokens[a].text.size() > tokens[b].text.size();
  });

  // End of turn / generation: the ids the file names plus well-known chat terminators, as
  // llama.cpp does for files that predate the eot/eom keys.
  static const char* const kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                          "<|endoftext|>", "<EOT>", "<|end_of_text|>",
                                          "<｜end▁of▁sentence｜>", "<|eom_id|>", "<|return|>"};
  if (eot < 0) {
    for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>"}) {
      int32_t id = find(t);
      if (id >= 0 && tokens[id].type == TokenType::kControl) {
        eot = id;
        break;
      }
    }
  }
  eog.clear();
  for (int32_t id : {eos, eot, eom}) {
    if (id >= 0) eog.push_back(id);
  }
  for (const char* t : kEotTexts) {
    int32_t id = find(t);
    if (id >= 0 && tokens[id].type == TokenType::kControl) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  return Status::ok();
}

namespace {

// GPT-2's original pattern (also HF ByteLevel's built-in regex).
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3 (tiktoken cl100k-style, digits in groups of up to three). The case-insensitive
// contractions are spelled out with classes so that Unicode case folding (ſ → s) cannot widen
// them, which keeps ids identical to llama.cpp's.
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kCjk = "[一-龥ࠀ-一가-퟿]+";

}  // namespace

bool pre_splits_for_name(std::string_view pre, std::vector<PreSplit>* out, bool* ignore_merges) {
  auto set = [&](std::initializer_list<const char*> rs) {
    out->clear();
    for (const char* r : rs) out->push_back(PreSplit{r});
  };
  *ignore_merges = false;
  if (pre == "default") {
    // llama.cpp's fallback for BPE files without a recognised pre-tokenizer.
    set({"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"});
  } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" ||
             pre == "dbrx" || pre == "smaug-bpe" || pre == "pixtral") {
    set({kLlama3});
    *ignore_merges = pre != "dbrx" && pre != "smaug-bpe";
  } else if (pre == "qwen2" || pre == "stablelm2" || pre == "megrez" || pre == "hunyuan") {
    set({kQwen2});
  } else if (pre == "deepseek-llm") {
    set({"[\\r\\n]",
         "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚ"
         "Ḁ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄ"
         "Ⰰ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
         "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", kCjk, "\\p{N}+"});
  } else if (pre == "deepseek-coder") {
    set({"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"});
  } else if (pre == "falcon") {
    set({"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"});
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
             pre == "codeshell" || pre == "exaone" || pre == "minerva-7b") {
    set({"\\p{N}", kGpt2});
  } else if (pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo" || pre == "jais" ||
             pre == "gpt-neox" || pre == "phi-2" || pre == "jina-es" || pre == "jina-de" ||
             pre == "trillion") {
    set({kGpt2});
  } else if (pre == "chatglm-bpe") {
    set({kLlama3});
  } else if (pre == "poro-chat" || pre == "bloom" || pre == "gpt3-finnish") {
    set({" ?[^(\\s|.,!?…。，、।۔،)]+"});
  } else if (pre == "viking") {
    set({" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"});
  } else {
    return false;
  }
  return true;
}

}  // namespace loom::tok
