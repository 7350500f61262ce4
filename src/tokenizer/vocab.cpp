// Vocab::finalize (lookup tables, special-token list, end-of-generation ids) and the table of
// pre-tokenizer regexes by tokenizer.ggml.pre name.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/end_of_generation.h"

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

  if (eot < 0) eot = implied_eot(*this);
  eog = end_of_generation_ids(*this);
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
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// o200k (GPT-4o's and gpt-oss's tiktoken pattern; llama.cpp's "gpt-4o"): a word keeps its
// capitalised run and lower-case tail together and takes a contraction, digits go in threes,
// a punctuation run takes the newlines and slashes after it.
constexpr const char* kO200k =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Written with \x{..} escapes: the literal characters include compatibility code points
// (U+212A KELVIN SIGN, U+1FBE, ...) that editors silently normalize to other characters.
constexpr const char* kCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

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
         "\\s?["
         "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
         "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}-\\x{377}"
         "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
         "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
         "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
         "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
         "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}"
         "\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
         "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
         "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
         "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}"
         "\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
         "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
         "\\x{2183}-\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
         "\\x{2CF2}-\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
         "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
         "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
         "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
         "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
         "\\s?[!-/"
         ":-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
         "\\s+$", kCjk, "\\p{N}+"});
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
  } else if (pre == "gpt-4o") {
    set({kO200k});
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
