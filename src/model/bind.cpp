#include "model/bind.h"

#include <map>
#include <memory>

#include "base/thread_pool.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/hf_tensors.h"
#include "model/mla_kv_b.h"
#include "model/tensor_names.h"

namespace loom {

namespace {

// The file, and the tensors made from its own at load (mla_kv_b.h: a legacy DeepSeek file's
// attn_k_b / attn_v_b split from attn_kv_b).
struct GgufHolder {
  explicit GgufHolder(GgufFile f) : file(std::move(f)) {}
  GgufFile file;
  struct Made {
    std::vector<uint8_t> bytes;
    TensorView view;
  };
  std::map<std::string, std::unique_ptr<Made>, std::less<>> made;

  const TensorView* find(std::string_view name, const ModelConfig& c) {
    if (const GgufTensorInfo* t = file.find_tensor(name)) return &t->view;
    if (auto it = made.find(name); it != made.end()) return &it->second->view;
    auto l = names::parse_layer_tensor(name);
    if (!l || (l->suffix != names::kAttnKB && l->suffix != names::kAttnVB)) return nullptr;
    const GgufTensorInfo* kv_b = file.find_tensor(names::layer_tensor(l->layer, names::kAttnKvB));
    if (!kv_b) return nullptr;
    auto m = std::make_unique<Made>();
    if (!split_kv_b(kv_b->view, c.mla, c.n_head, l->suffix == names::kAttnKB, &m->bytes, &m->view))
      return nullptr;
    return &made.emplace(std::string(name), std::move(m)).first->second->view;
  }
};

}  // namespace

Result<BoundModel> bind_gguf(GgufFile file) {
  auto holder = std::make_shared<GgufHolder>(std::move(file));
  BoundModel b;
  LOOM_ASSIGN_OR_RETURN(b.config, config_from_gguf(holder->file));
  const ArchSpec* arch = find_arch(b.config.arch);
  TensorLookup find = [&](std::string_view name) { return holder->find(name, b.config); };
  LOOM_ASSIGN_OR_RETURN(b.weights, Weights::bind(b.config, *arch, find));
  b.weights.keepalive = holder;
  return b;
}

Result<BoundModel> bind_hf_dir(const std::string& dir) {
  BoundModel b;
  LOOM_ASSIGN_OR_RETURN(b.config, config_from_hf_dir(dir));
  const ArchSpec* arch = find_arch(b.config.arch);
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<HfTensors> holder, HfTensors::open(dir, *arch, b.config));
  holder->set_load_threads(ThreadPool::physical_cores());
  holder->dequantize_all_fp8();
  TensorLookup find = [&](std::string_view name) { return holder->find(name); };
  // Experts are bound in place, one view each: no stacked copy of every expert at load.
  ExpertLookup experts = [&](std::string_view name) { return holder->experts(name); };
  LOOM_ASSIGN_OR_RETURN(b.weights,
                        Weights::bind(b.config, *arch, find, arch->hf_norm_plus_one, experts));
  b.weights.keepalive = holder;
  // keepalive holds the holder as long as these weights (and their release hook) live.
  b.weights.release_copied = [h = holder.get()](std::span<const void* const> copied,
                                                std::span<const void* const> in_use) {
    h->release(copied, in_use);
  };
  b.weights.loader_made_bytes = [h = holder.get()] { return h->made_bytes(); };
  return b;
}

}  // namespace loom
