// The architecture table: one row per architecture, each defined in model/archs/<name>.cpp.
#include "model/arch.h"

#include <string>

#include "model/archs/archs.h"

namespace loom {
namespace {

constexpr const ArchSpec* kArchs[] = {
    &archs::kLlama,     &archs::kQwen2,     &archs::kQwen3,    &archs::kGemma2,
    &archs::kGemma3,    &archs::kPhi3,      &archs::kGranite,  &archs::kOlmo2,
    &archs::kSmolLm3,   &archs::kQwen2Moe,  &archs::kQwen3Moe, &archs::kGptOss,
    &archs::kDeepseek2, &archs::kQwen3Next, &archs::kQwen35,   &archs::kQwen35Moe,
};

}  // namespace

std::span<const ArchSpec* const> all_archs() {
  return kArchs;
}

const ArchSpec* find_arch(std::string_view gguf_name) {
  for (const ArchSpec* a : kArchs)
    if (a->name == gguf_name) return a;
  return nullptr;
}

const ArchSpec* find_arch_hf(std::string_view model_type) {
  for (const ArchSpec* a : kArchs)
    for (auto t : a->hf_model_types)
      if (!t.empty() && t == model_type) return a;
  return nullptr;
}

std::string supported_arch_list() {
  std::string s;
  for (const ArchSpec* a : kArchs) {
    if (!s.empty()) s += ", ";
    s += a->name;
  }
  return s;
}

}  // namespace loom
