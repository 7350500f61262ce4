// Pooling metadata readers (see pooling_config.h).
#include "model/pooling_config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/tensor_names.h"

namespace loom {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

std::string base_name(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const size_t slash = d.rfind('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

}  // namespace

std::string_view pooling_type_name(PoolingType t) {
  switch (t) {
    case PoolingType::kNone:
      return "none";
    case PoolingType::kMean:
      return "mean";
    case PoolingType::kCls:
      return "cls";
    case PoolingType::kLast:
      return "last";
    case PoolingType::kRank:
      return "rank";
    case PoolingType::kUnspecified:
      break;
  }
  return "";
}

std::optional<PoolingType> parse_pooling_type(std::string_view name) {
  for (PoolingType t : {PoolingType::kNone, PoolingType::kMean, PoolingType::kCls,
                        PoolingType::kLast, PoolingType::kRank})
    if (pooling_type_name(t) == name) return t;
  return std::nullopt;
}

Status read_gguf_pooling(const GgufFile& f, ModelConfig& c) {
  const std::string key = names::arch_key(c.arch, names::kPoolingType);
  if (const GgufValue* v = f.find(key)) {
    const std::optional<int64_t> t = v->as_int();
    if (!t || *t < 0 || *t > static_cast<int64_t>(PoolingType::kRank))
      return invalid_file("GGUF metadata key " + key +
                          " must be 0..4 (none, mean, cls, last, rank)");
    c.pooling = static_cast<PoolingType>(*t);
  }
  if (const GgufValue* v = f.find(names::arch_key(c.arch, names::kClassifierOutputLabels)))
    if (const std::vector<std::string>* labels = v->as_string_array())
      c.classifier_labels = *labels;
  if (auto t = f.get_string(names::kRerankTemplate)) c.rerank_template = *t;
  return Status::ok();
}

Status read_hf_pooling(const std::string& dir, std::string_view config_json, ModelConfig& c) {
  // sentence-transformers: modules.json lists the Pooling module's folder.
  if (auto modules_text = read_text(dir + "/modules.json")) {
    const nlohmann::json modules = nlohmann::json::parse(*modules_text, nullptr, false);
    if (modules.is_discarded() || !modules.is_array())
      return invalid_file(dir + "/modules.json: not a JSON array");
    for (const nlohmann::json& m : modules) {
      if (!m.is_object() || !m.contains("type") ||
          m["type"] != "sentence_transformers.models.Pooling")
        continue;
      if (m.contains("path") && !m["path"].is_string())
        return invalid_file(dir + "/modules.json: the Pooling module's \"path\" must be a string");
      const std::string path = dir + "/" +
                               (m.contains("path") ? m["path"].get<std::string>() : "1_Pooling") +
                               "/config.json";
      auto text = read_text(path);
      if (!text) return invalid_file("cannot open " + path + " (named by modules.json)");
      const nlohmann::json p = nlohmann::json::parse(*text, nullptr, false);
      if (p.is_discarded() || !p.is_object()) return invalid_file(path + ": not a JSON object");
      auto on = [&](const char* k) {
        return p.contains(k) && p[k].is_boolean() && p[k].get<bool>();
      };
      if (on("pooling_mode_max_tokens") || on("pooling_mode_weightedmean_tokens") ||
          on("pooling_mode_mean_sqrt_len_tokens"))
        return unsupported(path +
                           ": max, weighted-mean and sqrt-length pooling are not supported "
                           "(lasttoken, mean_tokens, cls_token)");
      if (on("pooling_mode_lasttoken"))
        c.pooling = PoolingType::kLast;
      else if (on("pooling_mode_mean_tokens"))
        c.pooling = PoolingType::kMean;
      else if (on("pooling_mode_cls_token"))
        c.pooling = PoolingType::kCls;
      return Status::ok();
    }
  }
  // A Qwen3-Reranker checkpoint is a plain causal LM; only its name says what it is for.
  const nlohmann::json j = nlohmann::json::parse(config_json, nullptr, false);
  std::string hints = lower(base_name(dir));
  if (j.is_object() && j.contains("_name_or_path") && j["_name_or_path"].is_string())
    hints += " " + lower(j["_name_or_path"].get<std::string>());
  const std::string readme = lower(read_text(dir + "/README.md").value_or(""));
  if (hints.find("reranker") != std::string::npos ||
      readme.find("# qwen3-reranker") != std::string::npos)
    c.pooling = PoolingType::kRank;
  return Status::ok();
}

}  // namespace loom
