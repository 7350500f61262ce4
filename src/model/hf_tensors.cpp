#include "model/hf_tensors.h"

#include <cstring>

#include "model/tensor_names.h"

namespace loom {

Result<std::shared_ptr<HfTensors>> HfTensors::open(const std::string& dir, const ArchSpec& arch) {
  LOOM_ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::open(dir));
  return std::shared_ptr<HfTensors>(new HfTensors(std::move(st), arch));
}

std::string HfTensors::hf_name(std::string_view gguf_name) const {
  return names::gguf_to_hf(arch_, gguf_name).value_or(std::string(gguf_name));
}

const TensorView* HfTensors::find(std::string_view gguf_name) {
  auto hf = names::gguf_to_hf(arch_, gguf_name);
  if (!hf) return nullptr;
  if (hf->find(names::kExpertIndex) == std::string::npos) return st_.find(*hf);
  if (auto it = stacked_.find(gguf_name); it != stacked_.end()) return &it->second->view;
  return stack_experts(std::string(gguf_name), *hf);
}

const TensorView* HfTensors::stack_experts(const std::string& gguf_name,
                                           const std::string& pattern) {
  const size_t at = pattern.find(names::kExpertIndex);
  std::vector<const TensorView*> experts;
  for (int e = 0;; ++e) {
    std::string name = pattern;
    name.replace(at, names::kExpertIndex.size(), std::to_string(e));
    const TensorView* t = st_.find(name);
    if (!t) break;
    if (t->n_dims != 2 ||
        (!experts.empty() && (t->dtype != experts[0]->dtype || t->ne != experts[0]->ne)))
      return nullptr;
    experts.push_back(t);
  }
  if (experts.empty()) return nullptr;
  auto s = std::make_unique<Stacked>();
  const uint64_t each = experts[0]->nbytes;
  s->bytes.resize(each * experts.size());
  for (size_t e = 0; e < experts.size(); ++e)
    std::memcpy(s->bytes.data() + e * each, experts[e]->data, each);
  s->view = *experts[0];
  s->view.n_dims = 3;
  s->view.ne[2] = static_cast<int64_t>(experts.size());
  s->view.data = s->bytes.data();
  s->view.nbytes = s->bytes.size();
  const TensorView* out = &s->view;
  stacked_.emplace(gguf_name, std::move(s));
  return out;
}

}  // namespace loom
