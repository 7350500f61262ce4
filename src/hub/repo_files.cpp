#include "hub/repo_files.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace loom::hub {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_hex(const std::string& s, size_t len) {
  if (s.size() != len) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Files beside a model that are not the model (llama.cpp skips the same names).
bool gguf_is_model(const std::string& path) {
  if (!ends_with(lower(path), ".gguf")) return false;
  const std::string name = lower(base_name(path));
  for (const char* other : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"})
    if (name.find(other) != std::string::npos) return false;
  return true;
}

// `tag` followed by '.' or '-' anywhere in the path, ignoring case.
bool matches_tag(const std::string& path, const std::string& tag) {
  const std::string p = lower(path), t = lower(tag);
  for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at + 1)) {
    const size_t end = at + t.size();
    if (end < p.size() && (p[end] == '.' || p[end] == '-')) return true;
  }
  return false;
}

bool is_checkpoint_file(const std::string& path) {
  if (path.find('/') != std::string::npos) return false;  // the root folder only
  const std::string name = lower(path);
  if (ends_with(name, ".safetensors") || name == "model.safetensors.index.json") return true;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                        "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                        "vocab.json", "merges.txt", "chat_template.jinja", "chat_template.json"})
    if (name == f) return true;
  return false;
}

std::string list_gguf(const std::vector<RepoFile>& files) {
  std::string out;
  for (const RepoFile& f : files)
    if (ends_with(lower(f.path), ".gguf")) out += "\n  " + f.path;
  return out.empty() ? " (none)" : out;
}

}  // namespace

bool is_safe_relative_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find('\\') != std::string::npos ||
      path.find('\0') != std::string::npos)
    return false;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    const std::string part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

Result<std::vector<RepoFile>> parse_tree_listing(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return invalid_file("the Hub's file listing is not a JSON array");
  std::vector<RepoFile> files;
  for (const nlohmann::json& e : j) {
    if (!e.is_object() || !e.contains("path") || !e["path"].is_string())
      return invalid_file("the Hub's file listing has an entry without a path");
    if (e.value("type", "file") != "file") continue;
    RepoFile f;
    f.path = e["path"].get<std::string>();
    if (!is_safe_relative_path(f.path))
      return invalid_file("the Hub's file listing names an unsafe path '" + f.path + "'");
    if (!e.contains("size") || !e["size"].is_number_unsigned())
      return invalid_file("the Hub's file listing gives no size for '" + f.path + "'");
    f.size = e["size"].get<uint64_t>();
    if (e.contains("lfs") && e["lfs"].is_object()) {
      const nlohmann::json& lfs = e["lfs"];
      const std::string oid = lfs.value("oid", lfs.value("sha256", std::string()));
      if (!is_hex(oid, 64))
        return invalid_file("the Hub's file listing gives '" + f.path + "' a malformed sha256");
      f.sha256 = f.blob_id = oid;
      if (lfs.contains("size") && lfs["size"].is_number_unsigned())
        f.size = lfs["size"].get<uint64_t>();
    } else {
      f.blob_id = e.value("oid", std::string());
      if (!is_hex(f.blob_id, 40) && !is_hex(f.blob_id, 64))
        return invalid_file("the Hub's file listing gives '" + f.path + "' a malformed oid");
    }
    files.push_back(std::move(f));
  }
  return files;
}

std::optional<SplitInfo> gguf_split_info(const std::string& path) {
  if (!ends_with(lower(path), ".gguf")) return std::nullopt;
  SplitInfo s;
  s.prefix = path.substr(0, path.size() - 5);
  // -NNNNN-of-NNNNN: the suffix llama.cpp's gguf-split writes.
  const std::string& p = s.prefix;
  if (p.size() > 16 && p.compare(p.size() - 15, 1, "-") == 0 &&
      lower(p.substr(p.size() - 9, 4)) == "-of-") {
    const std::string a = p.substr(p.size() - 14, 5), b = p.substr(p.size() - 5);
    auto digits = [](const std::string& x) {
      return std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (digits(a) && digits(b)) {
      s.index = std::stoi(a);
      s.count = std::stoi(b);
      s.prefix = p.substr(0, p.size() - 15);
    }
  }
  return s;
}

Result<Selection> select_files(const std::vector<RepoFile>& files, const std::string& tag,
                               const std::string& repo) {
  Selection sel;
  if (lower(tag) != "safetensors") {
    std::vector<std::string> tags;
    if (!tag.empty())
      tags = {tag};
    else
      tags = {"Q4_K_M", "Q8_0", ""};  // "" = the first model file
    const RepoFile* primary = nullptr;
    for (const std::string& t : tags) {
      for (const RepoFile& f : files) {
        if (!gguf_is_model(f.path) || (!t.empty() && !matches_tag(f.path, t))) continue;
        const auto split = gguf_split_info(f.path);
        if (split->count > 1 && split->index != 1) continue;
        primary = &f;
        break;
      }
      if (primary) break;
    }
    if (primary) {
      const SplitInfo first = *gguf_split_info(primary->path);
      sel.primary = primary->path;
      for (int i = 1; i <= first.count; ++i) {
        const RepoFile* part = nullptr;
        for (const RepoFile& f : files) {
          const auto s = gguf_split_info(f.path);
          if (s && s->prefix == first.prefix && s->count == first.count && s->index == i) part = &f;
        }
        if (!part)
          return not_found(repo + ": '" + primary->path + "' is part 1 of " +
                           std::to_string(first.count) + " but part " + std::to_string(i) +
                           " is not in the repository");
        sel.files.push_back(*part);
      }
      return sel;
    }
    if (!tag.empty())
      return not_found(repo + " has no GGUF file for quant tag '" + tag +
                       "'; its GGUF files:" + list_gguf(files));
  }
  // A safetensors checkpoint: weights, index, config and tokenizer files at the root.
  bool has_weights = false;
  for (const RepoFile& f : files) {
    if (!is_checkpoint_file(f.path)) continue;
    has_weights |= ends_with(lower(f.path), ".safetensors");
    sel.files.push_back(f);
  }
  if (!has_weights)
    return not_found(repo + " holds neither a GGUF model nor safetensors weights; its GGUF files:" +
                     list_gguf(files));
  sel.safetensors = true;
  return sel;
}

}  // namespace loom::hub
