#include "bench/random_dataset.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace loom::bench {
namespace {

using Json = nlohmann::json;

Result<Json> parse_ok_json(const Result<HttpResponse>& r, const char* what) {
  if (!r.is_ok()) return r.status();
  if (r->status != 200) return invalid_argument(std::string(what) + " answered HTTP " + std::to_string(r->status));
  Json j = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(std::string(what) + " answered non-JSON");
  return j;
}

Result<std::vector<int32_t>> tokens_of(const Json& j) {
  auto it = j.find("tokens");
  if (it == j.end() || !it->is_array()) return invalid_argument("/tokenize answer has no 'tokens' list");
  std::vector<int32_t> ids;
  for (const Json& t : *it) {
    if (t.is_number_integer()) ids.push_back(t.get<int32_t>());
    else if (t.is_object() && t.contains("id") && t["id"].is_number_integer()) ids.push_back(t["id"].get<int32_t>());
    else return invalid_argument("/tokenize answer holds a token that is not an id");
  }
  return ids;
}

// Short common words, for chat prompts when the server offers no tokenizer (about one token
// each in most vocabularies).
constexpr const char* kWords[] = {"the", "of", "and", "to", "in", "is", "was", "for", "on", "as", "with", "by",
                                  "he", "at", "from", "his", "an", "were", "are", "which", "this", "be", "or",
                                  "has", "had", "one", "not", "but", "first", "new", "after", "who", "they",
                                  "her", "she", "two", "been", "other", "when", "there", "all", "time", "can",
                                  "year", "would", "into", "more", "also", "city", "may", "over", "world"};

}  // namespace

std::unique_ptr<ServerTokenizer> ServerTokenizer::probe(const BaseUrl& url, const std::string& model,
                                                        const HttpOptions& http) {
  for (Style style : {Style::kVllm, Style::kLlamaCpp}) {
    ServerTokenizer t(url, model, http, style);
    auto ids = t.tokenize("Hello world");
    if (!ids.is_ok() || ids->empty()) continue;
    auto text = t.detokenize(*ids);
    if (!text.is_ok()) continue;
    return std::unique_ptr<ServerTokenizer>(new ServerTokenizer(std::move(t)));
  }
  return nullptr;
}

Result<std::vector<int32_t>> ServerTokenizer::tokenize(const std::string& text) {
  Json body = style_ == Style::kVllm ? Json{{"model", model_}, {"prompt", text}, {"add_special_tokens", false}}
                                     : Json{{"content", text}, {"add_special", false}};
  LOOM_ASSIGN_OR_RETURN(Json j, parse_ok_json(http_post_json(url_, "/tokenize", body.dump(), http_), "/tokenize"));
  return tokens_of(j);
}

Result<HttpResponse> ServerTokenizer::detokenize_raw(const std::vector<int32_t>& ids) {
  Json body = style_ == Style::kVllm ? Json{{"model", model_}, {"tokens", ids}} : Json{{"tokens", ids}};
  return http_post_json(url_, "/detokenize", body.dump(), http_);
}

Result<std::string> ServerTokenizer::detokenize(const std::vector<int32_t>& ids) {
  LOOM_ASSIGN_OR_RETURN(Json j, parse_ok_json(detokenize_raw(ids), "/detokenize"));
  const char* key = style_ == Style::kVllm ? "prompt" : "content";
  if (!j.contains(key) || !j[key].is_string())
    return invalid_argument(std::string("/detokenize answer has no '") + key + "' string");
  return j[key].get<std::string>();
}

Result<int32_t> ServerTokenizer::find_vocab_size() {
  auto usable = [&](int32_t id) -> Result<bool> {
    LOOM_ASSIGN_OR_RETURN(HttpResponse r, detokenize_raw({id}));
    if (r.status != 200) return false;
    auto text = detokenize({id});
    return text.is_ok() && !text->empty();
  };
  constexpr int32_t kMax = 1 << 21;
  LOOM_ASSIGN_OR_RETURN(bool top_ok, usable(kMax - 1));
  if (top_ok) return invalid_argument("cannot find the vocabulary size through /detokenize: pass --vocab-size");
  int32_t lo = 0, hi = kMax - 1;  // invariant: ids < lo+1 assumed usable, hi unusable
  while (hi - lo > 1) {
    int32_t mid = lo + (hi - lo) / 2;
    LOOM_ASSIGN_OR_RETURN(bool ok, usable(mid));
    (ok ? lo : hi) = mid;
  }
  return hi;
}

std::pair<int32_t, int32_t> length_range(int32_t len, double ratio) {
  int32_t lo = static_cast<int32_t>(std::floor(len * (1.0 - ratio)));
  int32_t hi = static_cast<int32_t>(std::ceil(len * (1.0 + ratio)));
  return {std::max(lo, 1), std::max(hi, 1)};
}

Result<std::vector<RandomPrompt>> make_random_prompts(const RandomDatasetOptions& o, ServerTokenizer* tokenizer) {
  if (o.num_prompts <= 0) return invalid_argument("--num-prompts must be positive");
  if (o.input_len <= 0 || o.output_len <= 0) return invalid_argument("--random-input-len and --random-output-len must be positive");
  if (o.range_ratio < 0 || o.range_ratio >= 1) return invalid_argument("--random-range-ratio must be in [0, 1)");
  if (o.prefix_len < 0) return invalid_argument("--random-prefix-len must not be negative");
  if (o.vocab_size <= 1) return invalid_argument("the vocabulary size must be above 1 (see --vocab-size)");
  std::mt19937_64 rng(o.seed);
  std::mt19937_64 prefix_rng(o.prefix_seed);
  std::uniform_int_distribution<int32_t> token(0, o.vocab_size - 1);
  std::vector<int32_t> prefix(o.prefix_len);
  for (int32_t& t : prefix) t = token(prefix_rng);
  auto [in_lo, in_hi] = length_range(o.input_len, o.range_ratio);
  auto [out_lo, out_hi] = length_range(o.output_len, o.range_ratio);
  std::uniform_int_distribution<int32_t> in_len(in_lo, in_hi), out_len(out_lo, out_hi);
  std::uniform_int_distribution<size_t> word(0, std::size(kWords) - 1);

  // The shared prefix, aligned once so that every prompt starts with the same text.
  std::string prefix_text;
  int64_t prefix_count = 0;
  if (tokenizer && o.prefix_len > 0) {
    LOOM_ASSIGN_OR_RETURN(prefix_text, tokenizer->detokenize(prefix));
    LOOM_ASSIGN_OR_RETURN(std::vector<int32_t> prefix_ids, tokenizer->tokenize(prefix_text));
    prefix_count = static_cast<int64_t>(prefix_ids.size());
  }
  std::vector<RandomPrompt> out(o.num_prompts);
  for (RandomPrompt& p : out) {
    const int32_t body_len = in_len(rng);
    p.output_len = out_len(rng);
    p.prompt_len = o.prefix_len + body_len;
    std::vector<int32_t> body(body_len);
    for (int32_t& t : body) t = token(rng);
    if (tokenizer) {
      // Decoding random ids and encoding the text rarely gives the same count back: truncate
      // or top up with fresh random ids and retry, as vLLM does with a local tokenizer.
      p.is_text = true;
      const int64_t target = p.prompt_len;
      std::string text;
      int64_t got = 0;
      for (int attempt = 0; attempt < 6; ++attempt) {
        LOOM_ASSIGN_OR_RETURN(text, tokenizer->detokenize(body));
        LOOM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->tokenize(prefix_text + text));
        got = static_cast<int64_t>(ids.size());
        if (got == target) break;
        // The body as the server's tokenizer sees it, cut or topped up to the missing count.
        const size_t skip = std::min<size_t>(ids.size(), static_cast<size_t>(prefix_count));
        std::vector<int32_t> tail(ids.begin() + skip, ids.end());
        const int64_t want = std::max<int64_t>(1, target - prefix_count);
        if (static_cast<int64_t>(tail.size()) > want) tail.resize(want);
        while (static_cast<int64_t>(tail.size()) < want) tail.push_back(token(rng));
        body = std::move(tail);
      }
      p.text = prefix_text + text;
      p.prompt_len = got;
    } else if (o.need_text) {
      p.is_text = true;
      for (int32_t i = 0; i < p.prompt_len; ++i) {
        if (i) p.text += ' ';
        p.text += kWords[word(rng)];
      }
    } else {
      p.ids = prefix;
      p.ids.insert(p.ids.end(), body.begin(), body.end());
    }
  }
  return out;
}

}  // namespace loom::bench
