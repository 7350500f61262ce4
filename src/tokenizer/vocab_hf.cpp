// Vocab from a Hugging Face tokenizer.json (+ tokenizer_config.json): BPE models with a
// ByteLevel pre-tokenizer (GPT-2 / Llama 3 / Qwen style) or with Metaspace / Prepend+Replace
// normalization and byte fallback (Llama 2 / Mistral style).
#include <nlohmann/json.hpp>
#include <string>

#include "base/json_depth.h"
#include "tokenizer/loaders.h"

namespace loom::tok {

namespace {

using nlohmann::json;

constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kSpaceMark = "\xE2\x96\x81";  // ▁

struct HfState {
  bool byte_level = false;
  bool metaspace = false;
};

// A member by reference (json::value() would copy, and model.vocab is megabytes); null json
// when absent.
const json& member(const json& j, const char* k) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(k);
  return it == j.end() ? kNull : *it;
}

std::string str_or(const json& j, const char* k, std::string def) {
  auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}
bool bool_or(const json& j, const char* k, bool def) {
  auto it = j.find(k);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

Status parse_behavior(const std::string& b, SplitBehavior* out) {
  if (b == "Isolated")
    *out = SplitBehavior::kIsolated;
  else if (b == "Removed")
    *out = SplitBehavior::kRemoved;
  else if (b == "MergedWithPrevious")
    *out = SplitBehavior::kMergedWithPrevious;
  else if (b == "MergedWithNext")
    *out = SplitBehavior::kMergedWithNext;
  else
    return unsupported("tokenizer.json split behavior '" + b + "' is not supported");
  return Status::ok();
}

Status parse_pre(const json& p, Vocab* v, HfState* st) {
  if (p.is_null()) return Status::ok();
  if (!p.is_object() || !member(p, "type").is_string())
    return invalid_file("tokenizer.json pre_tokenizer must be an object with a \"type\", got " +
                        p.dump().substr(0, 80));
  std::string type = str_or(p, "type", "");
  if (type == "Sequence") {
    for (const json& q : member(p, "pretokenizers")) LOOM_RETURN_IF_ERROR(parse_pre(q, v, st));
  } else if (type == "Split") {
    PreSplit s;
    const json& pat = member(p, "pattern");
    if (member(pat, "Regex").is_string()) {
      s.regex = member(pat, "Regex").get<std::string>();
    } else if (member(pat, "String").is_string()) {
      s.regex = member(pat, "String").get<std::string>();
      s.literal = true;
    } else {
      return invalid_file("tokenizer.json Split pre-tokenizer has no Regex or String pattern");
    }
    LOOM_RETURN_IF_ERROR(parse_behavior(str_or(p, "behavior", "Isolated"), &s.behavior));
    s.invert = bool_or(p, "invert", false);
    v->pre_splits.push_back(std::move(s));
  } else if (type == "ByteLevel") {
    st->byte_level = true;
    v->add_prefix_space_bytelevel = bool_or(p, "add_prefix_space", false);
    if (bool_or(p, "use_regex", true)) v->pre_splits.push_back(PreSplit{kGpt2Regex});
  } else if (type == "Metaspace") {
    st->metaspace = true;
    if (str_or(p, "replacement", kSpaceMark) != kSpaceMark) {
      return unsupported("tokenizer.json Metaspace replacement other than U+2581 is not supported");
    }
    std::string scheme =
        str_or(p, "prepend_scheme", bool_or(p, "add_prefix_space", true) ? "always" : "never");
    v->add_space_prefix = scheme != "never";
    v->escape_spaces = true;
    if (bool_or(p, "split", true)) {
      v->pre_splits.push_back(PreSplit{kSpaceMark, SplitBehavior::kMergedWithNext, true});
    }
  } else if (type == "Digits") {
    v->pre_splits.push_back(
        PreSplit{bool_or(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+"});
  } else if (type == "Punctuation") {
    PreSplit s{"\\p{P}"};
    LOOM_RETURN_IF_ERROR(parse_behavior(str_or(p, "behavior", "Isolated"), &s.behavior));
    v->pre_splits.push_back(std::move(s));
  } else if (type == "WhitespaceSplit") {
    v->pre_splits.push_back(PreSplit{"\\s+", SplitBehavior::kRemoved});
  } else if (type == "Whitespace") {
    v->pre_splits.push_back(PreSplit{"\\w+|[^\\w\\s]+", SplitBehavior::kRemoved, false, true});
  } else {
    return unsupported("tokenizer.json pre-tokenizer '" + type + "' is not supported");
  }
  return Status::ok();
}

Status parse_normalizer(const json& n, Vocab* v) {
  if (n.is_null()) return Status::ok();
  if (!n.is_object() || !member(n, "type").is_string())
    return invalid_file("tokenizer.json normalizer must be an object with a \"type\", got " +
                        n.dump().substr(0, 80));
  std::string type = str_or(n, "type", "");
  if (type == "Sequence") {
    for (const json& q : member(n, "normalizers")) LOOM_RETURN_IF_ERROR(parse_normalizer(q, v));
  } else if (type == "NFC") {
    // Accepted but not applied: text that is already NFC (nearly all text) tokenizes the same,
    // and llama.cpp's GGUF path does not normalize either.
  } else if (type == "Prepend") {
    if (str_or(n, "prepend", "") != kSpaceMark)
      return unsupported("tokenizer.json Prepend normalizer other than U+2581");
    v->add_space_prefix = true;
  } else if (type == "Replace") {
    const json& pat = member(n, "pattern");
    if (str_or(pat, "String", "") != " " || str_or(n, "content", "") != kSpaceMark) {
      return unsupported("tokenizer.json Replace normalizer other than ' ' → U+2581");
    }
    v->escape_spaces = true;
  } else {
    return unsupported("tokenizer.json normalizer '" + type + "' is not supported");
  }
  return Status::ok();
}

// "<s>", {"content": "<s>", ...} or null.
std::string token_string(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) return str_or(j, "content", "");
  return "";
}

}  // namespace

Result<Vocab> vocab_from_hf(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                            std::vector<int32_t> named_eog) {
  // Copying and printing a value recurse once per level; no tokenizer nests more than a few.
  for (auto [name, text] : {std::pair{"tokenizer.json", tokenizer_json},
                            {"tokenizer_config.json", tokenizer_config_json}})
    if (json_nesting_exceeds(text))
      return invalid_file(std::string(name) + " nests arrays and objects deeper than " +
                          std::to_string(kMaxJsonDepth) + " levels");
  json j = json::parse(tokenizer_json, nullptr, false);
  if (j.is_discarded()) return invalid_file("tokenizer.json is not valid JSON");
  if (!j.is_object()) return invalid_file("tokenizer.json is not a JSON object");
  json cfg = json::object();
  if (!tokenizer_config_json.empty()) {
    cfg = json::parse(tokenizer_config_json, nullptr, false);
    if (cfg.is_discarded()) return invalid_file("tokenizer_config.json is not valid JSON");
    if (!cfg.is_object()) return invalid_file("tokenizer_config.json is not a JSON object");
  }

  const json& model = member(j, "model");
  std::string mtype = str_or(model, "type", "BPE");
  if (mtype != "BPE")
    return unsupported("tokenizer.json model '" + mtype + "' is not supported (only BPE)");
  const json& vocab = member(model, "vocab");
  if (!vocab.is_object() || vocab.empty())
    return invalid_file("tokenizer.json model.vocab is missing or empty");

  Vocab v;
  v.escape_spaces = false;
  v.byte_fallback = bool_or(model, "byte_fallback", false);
  v.ignore_merges = bool_or(model, "ignore_merges", false);

  // Ids may have holes and added tokens may extend the vocabulary, but the table is sized by
  // the largest id: Hugging Face's files number their tokens densely (a few reserved slots
  // aside), so an id far beyond the number of tokens is a broken file, not a gigabyte table.
  const json& added = member(j, "added_tokens");
  if (!added.is_null() && !added.is_array())
    return invalid_file("tokenizer.json added_tokens must be a list");
  const int64_t n_defined = static_cast<int64_t>(vocab.size() + added.size());
  const int64_t id_bound = 2 * n_defined + 1024;
  auto check_id = [&](const std::string& what, const json& id) -> Status {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      return invalid_file("tokenizer.json " + what + " has a bad id " + id.dump() +
                          " (must be a non-negative integer)");
    if (id.get<int64_t>() >= id_bound)
      return invalid_file("tokenizer.json " + what + " has id " + id.dump() + ", beyond the " +
                          std::to_string(n_defined) +
                          " tokens the file defines (ids must be numbered densely, below " +
                          std::to_string(id_bound) + ")");
    return Status::ok();
  };
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab.items()) {
    LOOM_RETURN_IF_ERROR(check_id("vocab entry '" + piece + "'", id));
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("id"))
      return invalid_file("tokenizer.json added_tokens entry without an id");
    LOOM_RETURN_IF_ERROR(check_id("added token '" + str_or(a, "content", "") + "'", a["id"]));
    max_id = std::max<int64_t>(max_id, a["id"].get<int64_t>());
  }
  v.tokens.resize(static_cast<size_t>(max_id + 1));
  for (auto& t : v.tokens) t.type = TokenType::kUnused;
  for (const auto& [piece, id] : vocab.items()) {
    TokenData& t = v.tokens[id.get<int64_t>()];
    t.text = piece;
    t.type = TokenType::kNormal;
    if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>')
      t.type = TokenType::kByte;
  }
  for (const json& a : added) {
    TokenData& t = v.tokens[a["id"].get<int64_t>()];
    t.text = str_or(a, "content", "");
    t.type = bool_or(a, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
    t.lstrip = bool_or(a, "lstrip", false);
    t.rstrip = bool_or(a, "rstrip", false);
  }

  for (const json& m : member(model, "merges")) {
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos)
        return invalid_file("tokenizer.json merge '" + s + "' is not 'left right'");
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return invalid_file("tokenizer.json merge entries must be \"a b\" strings or [a, b] pairs");
    }
  }

  HfState st;
  LOOM_RETURN_IF_ERROR(parse_normalizer(member(j, "normalizer"), &v));
  LOOM_RETURN_IF_ERROR(parse_pre(member(j, "pre_tokenizer"), &v, &st));
  v.kind = st.byte_level ? VocabKind::kBpeByteLevel : VocabKind::kBpeMerges;
  if (st.byte_level) {
    v.escape_spaces = false;
    v.add_space_prefix = false;
  }

  auto find_id = [&](const std::string& s) -> int32_t {
    if (s.empty()) return -1;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      if (v.tokens[i].text == s) return static_cast<int32_t>(i);
    }
    return -1;
  };
  v.unk = find_id(str_or(model, "unk_token", ""));

  // BOS/EOS added by a TemplateProcessing post-processor ("$A" framed by special tokens).
  const json& post = member(j, "post_processor");
  auto template_of = [](const json& p) -> const json* {
    if (p.is_object() && str_or(p, "type", "") == "TemplateProcessing" && p.contains("single"))
      return &p["single"];
    return nullptr;
  };
  const json* single = template_of(post);
  if (!single && post.is_object() && str_or(post, "type", "") == "Sequence") {
    for (const json& q : member(post, "processors")) {
      if ((single = template_of(q))) break;
    }
  }
  if (single && single->is_array() && !single->empty()) {
    const json& first = single->front();
    const json& last = single->back();
    if (first.contains("SpecialToken")) {
      v.bos = find_id(str_or(first["SpecialToken"], "id", ""));
      v.add_bos = v.bos >= 0;
    }
    if (single->size() > 1 && last.contains("SpecialToken")) {
      v.eos = find_id(str_or(last["SpecialToken"], "id", ""));
      v.add_eos = v.eos >= 0;
    }
  }

  if (cfg.contains("bos_token")) {
    int32_t id = find_id(token_string(cfg["bos_token"]));
    if (id >= 0) v.bos = id;
  }
  if (cfg.contains("eos_token")) {
    int32_t id = find_id(token_string(cfg["eos_token"]));
    if (id >= 0) v.eos = id;
  }
  if (cfg.contains("pad_token")) v.pad = find_id(token_string(cfg["pad_token"]));
  if (cfg.contains("unk_token") && v.unk < 0) v.unk = find_id(token_string(cfg["unk_token"]));
  v.add_bos = bool_or(cfg, "add_bos_token", v.add_bos) && v.bos >= 0;
  v.add_eos = bool_or(cfg, "add_eos_token", v.add_eos) && v.eos >= 0;
  v.named_eog = std::move(named_eog);

  LOOM_RETURN_IF_ERROR(v.finalize());
  return v;
}

Result<std::vector<int32_t>> generation_eos_ids(std::string_view json_text) {
  json g = json::parse(json_text, nullptr, false);
  if (g.is_discarded() || !g.is_object()) return invalid_file("not a JSON object");
  const json& e = member(g, "eos_token_id");
  std::vector<int32_t> out;
  if (e.is_null()) return out;
  for (const json& x : e.is_array() ? e : json::array({e})) {
    if (!x.is_number_integer())
      return invalid_file("eos_token_id must be a token id or a list of token ids");
    // Out-of-range ids (-1 for "none") are dropped here or by end_of_generation_ids.
    if (x.get<int64_t>() >= 0 && x.get<int64_t>() < (1 << 30)) out.push_back(x.get<int32_t>());
  }
  return out;
}

}  // namespace loom::tok
