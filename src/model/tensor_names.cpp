// Name construction and the Hugging Face ↔ GGUF tensor-name table.
#include "model/tensor_names.h"

#include <charconv>

#include "model/arch.h"
#include "model/archs/archs.h"

namespace loom::names {
namespace {

struct NamePair {
  std::string_view hf;
  std::string_view gguf;
};

// Global tensors.
constexpr NamePair kGlobalNames[] = {
    {"model.embed_tokens.weight", kTokenEmbd},
    {"model.norm.weight", kOutputNorm},
    {"lm_head.weight", kOutput},
};

constexpr std::string_view kHfLayerPrefix = "model.layers.";
constexpr std::string_view kGgufLayerPrefix = "blk.";

// Parses "<prefix>N.<rest>" into (N, rest).
std::optional<LayerTensorName> split_layer(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  int layer = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || p == name.data() || layer < 0) return std::nullopt;
  size_t used = static_cast<size_t>(p - name.data());
  if (used >= name.size() || name[used] != '.') return std::nullopt;
  return LayerTensorName{layer, std::string(name.substr(used + 1))};
}

}  // namespace

std::string arch_key(std::string_view arch, std::string_view suffix) {
  std::string k(arch);
  k += '.';
  k += suffix;
  return k;
}

std::string layer_tensor(int layer, std::string_view suffix) {
  std::string s(kGgufLayerPrefix);
  s += std::to_string(layer);
  s += '.';
  s += suffix;
  return s;
}

std::optional<LayerTensorName> parse_layer_tensor(std::string_view name) {
  return split_layer(name, kGgufLayerPrefix);
}

std::optional<std::string> hf_to_gguf(const ArchSpec& arch, std::string_view hf_name) {
  for (const auto& p : kGlobalNames)
    if (p.hf == hf_name) return std::string(p.gguf);
  auto l = split_layer(hf_name, kHfLayerPrefix);
  if (!l) return std::nullopt;
  for (const auto& p : arch.layer_tensors)
    if (p.hf == l->suffix) return layer_tensor(l->layer, p.gguf);
  return std::nullopt;
}

std::optional<std::string> gguf_to_hf(const ArchSpec& arch, std::string_view gguf_name) {
  for (const auto& p : kGlobalNames)
    if (p.gguf == gguf_name) return std::string(p.hf);
  auto l = split_layer(gguf_name, kGgufLayerPrefix);
  if (!l) return std::nullopt;
  for (const auto& p : arch.layer_tensors)
    if (p.gguf == l->suffix) {
      std::string s(kHfLayerPrefix);
      s += std::to_string(l->layer);
      s += '.';
      s += p.hf;
      return s;
    }
  return std::nullopt;
}

std::optional<std::string> gguf_to_hf(const ArchSpec& arch, std::string_view gguf_name,
                                      int32_t n_layer) {
  auto l = split_layer(gguf_name, kGgufLayerPrefix);
  if (arch.hf_mtp_prefix.empty() || !l || l->layer < n_layer) return gguf_to_hf(arch, gguf_name);
  // A module's shared tensors ("mtp.fc.weight"), else its block ("mtp.layers.0.…").
  for (const auto& p : arch.mtp_tensors)
    if (p.gguf == l->suffix) return std::string(arch.hf_mtp_prefix) + std::string(p.hf);
  for (const auto& p : arch.layer_tensors)
    if (p.gguf == l->suffix) {
      std::string s(arch.hf_mtp_prefix);
      s += "layers.";
      s += std::to_string(l->layer - n_layer);
      s += '.';
      s += p.hf;
      return s;
    }
  return std::nullopt;
}

std::optional<std::string> hf_to_gguf(std::string_view hf_name) {
  return hf_to_gguf(archs::kLlama, hf_name);
}
std::optional<std::string> gguf_to_hf(std::string_view gguf_name) {
  return gguf_to_hf(archs::kLlama, gguf_name);
}

bool is_rope_permuted_tensor(std::string_view gguf_name) {
  auto l = parse_layer_tensor(gguf_name);
  if (!l) return false;
  return l->suffix == kAttnQ || l->suffix == kAttnK || l->suffix == kAttnQBias ||
         l->suffix == kAttnKBias;
}

}  // namespace loom::names
