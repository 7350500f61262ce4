// HF tokenizer → GGUF tokenizer.ggml.* metadata. The tokenizer.json is loaded through
// vocab_from_hf (the same code that tokenizes from it), and the resulting Vocab is written in
// the form vocab_from_gguf reads back, so both paths share one interpretation of the file.
#include "tokenizer/gguf_export.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/gguf.h"
#include "tokenizer/loaders.h"

namespace loom::tok {

namespace {

using nlohmann::json;

// HF writes the contractions case-insensitively; loom's named regexes spell the same
// alternatives with classes (see vocab.cpp), so rewrite before comparing.
constexpr std::string_view kHfContractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr std::string_view kLoomContractions =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

// The names tried, in order: the first whose regexes and ignore_merges match wins. Aliases
// that share a regex with an earlier name are left out so the canonical name is written.
constexpr const char* kPreNames[] = {"qwen2",          "llama-bpe", "gpt-4o", "dbrx",
                                     "gpt-2",          "starcoder", "falcon", "deepseek-llm",
                                     "deepseek-coder", "bloom",     "viking", "default"};

std::string normalize_regex(std::string r) {
  for (size_t p; (p = r.find(kHfContractions)) != std::string::npos;) {
    r.replace(p, kHfContractions.size(), kLoomContractions);
  }
  return r;
}

Result<std::string> pre_name_for(const Vocab& v) {
  std::vector<std::string> have;
  for (const PreSplit& s : v.pre_splits) {
    if (s.literal || s.invert || s.behavior != SplitBehavior::kIsolated) {
      return unsupported(
          "tokenizer.json pre-tokenizer has a Split that is not a plain isolated regex; "
          "GGUF tokenizer.ggml.pre cannot express it");
    }
    have.push_back(normalize_regex(s.regex));
  }
  for (const char* name : kPreNames) {
    std::vector<PreSplit> want;
    bool ignore_merges = false;
    if (!pre_splits_for_name(name, &want, &ignore_merges)) continue;
    if (ignore_merges != v.ignore_merges || want.size() != have.size()) continue;
    bool same = true;
    for (size_t i = 0; i < want.size() && same; ++i)
      same = normalize_regex(want[i].regex) == have[i];
    if (same) return std::string(name);
  }
  std::string regexes;
  for (const std::string& r : have) regexes += (regexes.empty() ? "" : " , ") + r;
  return unsupported("tokenizer.json pre-tokenizer regex is not one loom knows a GGUF name for (" +
                     (regexes.empty() ? std::string("none") : regexes) +
                     "); the tokenizer cannot be embedded in the GGUF");
}

Result<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return io_error("cannot open " + p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("error reading " + p.string());
  return ss.str();
}

}  // namespace

Result<GgufTokenizerExport> export_hf_tokenizer_json(std::string_view tokenizer_json,
                                                     std::string_view tokenizer_config_json,
                                                     std::string_view chat_template_jinja,
                                                     GgufWriter* out) {
  LOOM_ASSIGN_OR_RETURN(Vocab v, vocab_from_hf(tokenizer_json, tokenizer_config_json));
  if (v.kind != VocabKind::kBpeByteLevel) {
    return unsupported(
        "only byte-level BPE tokenizer.json files (GPT-2 / Llama 3 / Qwen style) can be "
        "embedded in a GGUF yet; this one is Metaspace/SentencePiece-style BPE");
  }
  if (v.add_prefix_space_bytelevel) {
    return unsupported("tokenizer.json ByteLevel add_prefix_space=true has no GGUF equivalent");
  }
  GgufTokenizerExport info;
  info.model = "gpt2";
  LOOM_ASSIGN_OR_RETURN(info.pre, pre_name_for(v));

  const size_t n = v.tokens.size();
  std::vector<std::string> texts(n);
  std::vector<int64_t> types(n);
  int n_strip = 0;
  for (size_t i = 0; i < n; ++i) {
    const TokenData& t = v.tokens[i];
    // Holes in the HF id space get llama.cpp's placeholder so every GGUF id has a string.
    texts[i] =
        t.type == TokenType::kUnused && t.text.empty() ? "[PAD" + std::to_string(i) + "]" : t.text;
    types[i] = static_cast<int64_t>(t.type);
    n_strip += t.lstrip || t.rstrip;
  }
  if (n_strip > 0) {
    info.notes.push_back(
        std::to_string(n_strip) +
        " added token(s) with lstrip/rstrip: GGUF has no key for it, they will not eat "
        "neighbouring whitespace");
  }

  // finalize() folded the merges into merge_table, keeping exactly those that can fire (both
  // pieces and the result are tokens); rank order rebuilds an equivalent merge list.
  std::vector<std::pair<int32_t, uint64_t>> ranked;
  ranked.reserve(v.merge_table.size());
  for (const auto& [key, m] : v.merge_table) ranked.emplace_back(m.rank, key);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> merges;
  merges.reserve(ranked.size());
  for (const auto& [rank, key] : ranked) {
    const std::string& l = v.tokens[static_cast<uint32_t>(key >> 32)].text;
    const std::string& r = v.tokens[static_cast<uint32_t>(key)].text;
    // The GGUF form "left right" is split at the first space after position 0.
    if (l.find(' ', 1) != std::string::npos || r.find(' ') != std::string::npos) {
      return unsupported("tokenizer.json merge '" + l + "' + '" + r +
                         "' contains a space and cannot be written as a GGUF 'left right' merge");
    }
    merges.push_back(l + " " + r);
  }

  // Chat template: tokenizer_config.json's chat_template (a string, or a list of named
  // templates as newer configs write), else chat_template.jinja.
  std::vector<std::pair<std::string, std::string>> templates;  // (GGUF key, template)
  if (!tokenizer_config_json.empty()) {
    json cfg = json::parse(tokenizer_config_json, nullptr, false);  // vocab_from_hf validated it
    auto it = cfg.find("chat_template");
    if (it != cfg.end() && it->is_string()) {
      templates.emplace_back("tokenizer.chat_template", it->get<std::string>());
    } else if (it != cfg.end() && it->is_array()) {
      for (const json& t : *it) {
        if (!t.is_object() || !t.contains("name") || !t.contains("template") ||
            !t["name"].is_string() || !t["template"].is_string()) {
          continue;
        }
        std::string name = t["name"].get<std::string>();
        templates.emplace_back(
            name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name,
            t["template"].get<std::string>());
      }
    }
  }
  if (templates.empty() && !chat_template_jinja.empty()) {
    templates.emplace_back("tokenizer.chat_template", std::string(chat_template_jinja));
  }

  // Everything validated: write.
  out->set_string("tokenizer.ggml.model", info.model);
  out->set_string("tokenizer.ggml.pre", info.pre);
  out->set("tokenizer.ggml.tokens", GgufValue::of_string_array(std::move(texts)));
  out->set("tokenizer.ggml.token_type", GgufValue::of_int_array(GgufType::kI32, std::move(types)));
  out->set("tokenizer.ggml.merges", GgufValue::of_string_array(std::move(merges)));
  // Byte-level BPE ranks merges, it has no scores; write them only if the file had any.
  if (std::any_of(v.tokens.begin(), v.tokens.end(),
                  [](const TokenData& t) { return t.score != 0.0f; })) {
    std::vector<double> scores(n);
    for (size_t i = 0; i < n; ++i) scores[i] = v.tokens[i].score;
    out->set("tokenizer.ggml.scores", GgufValue::of_float_array(GgufType::kF32, std::move(scores)));
  }
  auto id = [&](const char* key, int32_t x) {
    if (x >= 0) out->set_u32(key, static_cast<uint32_t>(x));
  };
  id("tokenizer.ggml.bos_token_id", v.bos);
  id("tokenizer.ggml.eos_token_id", v.eos);
  // llama.cpp reads these as end-of-generation ids too. Ids named only by the generation
  // config have no GGUF key; the real ones are control tokens that the text rule finds again
  // (tokenizer/end_of_generation.h).
  id("tokenizer.ggml.eot_token_id", v.eot);
  id("tokenizer.ggml.eom_token_id", v.eom);
  id("tokenizer.ggml.unknown_token_id", v.unk);
  id("tokenizer.ggml.padding_token_id", v.pad);
  out->set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  out->set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  for (auto& [key, text] : templates) out->set_string(key, std::move(text));
  info.n_tokens = static_cast<int32_t>(n);
  info.chat_template = !templates.empty();
  return info;
}

Result<GgufTokenizerExport> export_hf_tokenizer(const std::string& hf_dir, GgufWriter* out) {
  namespace fs = std::filesystem;
  const fs::path d(hf_dir);
  std::error_code ec;
  if (!fs::is_regular_file(d / "tokenizer.json", ec))
    return not_found("no tokenizer.json in " + hf_dir);
  LOOM_ASSIGN_OR_RETURN(std::string tj, read_file(d / "tokenizer.json"));
  std::string cfg, jinja;
  if (fs::is_regular_file(d / "tokenizer_config.json", ec)) {
    LOOM_ASSIGN_OR_RETURN(cfg, read_file(d / "tokenizer_config.json"));
  }
  if (fs::is_regular_file(d / "chat_template.jinja", ec)) {
    LOOM_ASSIGN_OR_RETURN(jinja, read_file(d / "chat_template.jinja"));
  }
  auto r = export_hf_tokenizer_json(tj, cfg, jinja, out);
  if (!r.is_ok())
    return Status(r.status().code(), (d / "tokenizer.json").string() + ": " + r.status().message());
  return r;
}

}  // namespace loom::tok
