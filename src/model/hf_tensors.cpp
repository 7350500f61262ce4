#include "model/hf_tensors.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <unordered_set>

#include "kernels/quant_blocks.h"
#include "model/hf_deltanet.h"
#include "model/mla_kv_b.h"
#include "model/tensor_names.h"

namespace loom {

Result<std::shared_ptr<HfTensors>> HfTensors::open(const std::string& dir, const ArchSpec& arch,
                                                   const ModelConfig& config) {
  LOOM_ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::open(dir));
  LOOM_ASSIGN_OR_RETURN(std::optional<Fp8BlockSize> fp8, read_fp8_quantization(dir, st));
  return std::shared_ptr<HfTensors>(new HfTensors(std::move(st), arch, config, fp8));
}

std::string HfTensors::hf_name(std::string_view gguf_name) const {
  return names::gguf_to_hf(arch_, gguf_name, n_layer_).value_or(std::string(gguf_name));
}

const TensorView* HfTensors::lookup(const std::string& hf) {
  std::string name = hf;
  const TensorView* t = st_.find(name);
  // A vision-language checkpoint keeps its language model under model.language_model.
  // (config_reader's unwrap_text_config); lm_head stays at the top.
  constexpr std::string_view kModel = "model.";
  if (!t && hf.compare(0, kModel.size(), kModel) == 0) {
    name = "model.language_model." + hf.substr(kModel.size());
    t = st_.find(name);
  }
  if (t && fp8_ && st_.is_f8_e4m3(name)) return dequantize_fp8(name, *t);
  return t;
}

const TensorView* HfTensors::dequantize_fp8(const std::string& hf, const TensorView& codes) {
  const std::string key = "fp8:" + hf;  // HF names never start so (GGUF ones neither)
  if (auto it = stacked_.find(key); it != stacked_.end()) return &it->second->view;
  std::unique_ptr<Stacked> s = dequantized(hf, codes);
  const TensorView* out = &s->view;
  stacked_.emplace(key, std::move(s));
  return out;
}

std::unique_ptr<HfTensors::Stacked> HfTensors::dequantized(const std::string& hf,
                                                           const TensorView& codes) const {
  auto s = std::make_unique<Stacked>();
  // read_fp8_quantization checked that every F8_E4M3 tensor has its scales.
  dequantize_fp8_blocks(codes, *st_.find(hf + "_scale_inv"), *fp8_, &s->bytes, &s->view);
  s->view.data = s->bytes.data();
  return s;
}

void HfTensors::parallel_ranges(int64_t n, const std::function<void(int64_t, int64_t)>& fn) const {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(load_threads_, n));
  std::vector<std::thread> helpers;
  for (int64_t p = 1; p < parts; ++p) helpers.emplace_back(fn, n * p / parts, n * (p + 1) / parts);
  fn(0, n / parts);
  for (std::thread& h : helpers) h.join();
}

void HfTensors::dequantize_all_fp8() {
  if (!fp8_) return;
  std::vector<std::pair<const std::string*, const TensorView*>> todo;
  for (const auto& [name, view] : st_.tensors())
    if (st_.is_f8_e4m3(name) && !stacked_.count("fp8:" + name)) todo.push_back({&name, &view});
  std::vector<std::unique_ptr<Stacked>> made(todo.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();)
      made[i] = dequantized(*todo[i].first, *todo[i].second);
  };
  parallel_ranges(load_threads_, [&](int64_t, int64_t) { work(); });
  for (size_t i = 0; i < todo.size(); ++i)
    stacked_.emplace("fp8:" + *todo[i].first, std::move(made[i]));
}

const TensorView* HfTensors::find(std::string_view gguf_name) {
  const TensorView* t = find_or_make(gguf_name);
  // Whatever was made for it is a served view now, not a source to free once derivations ran.
  for (auto& [name, s] : stacked_)
    if (&s->view == t) s->served = true;
  return t;
}

const TensorView* HfTensors::find_or_make(std::string_view gguf_name) {
  auto hf = names::gguf_to_hf(arch_, gguf_name, n_layer_);
  if (!hf) return nullptr;
  const bool derived = hf->find('#') != std::string::npos;
  if (!derived && hf->find(names::kExpertIndex) == std::string::npos) return lookup(*hf);
  if (auto it = stacked_.find(gguf_name); it != stacked_.end()) return &it->second->view;
  if (derived) return derive(std::string(gguf_name), *hf);
  return stack_experts(std::string(gguf_name), *hf);
}

void HfTensors::release(std::span<const void* const> copied, std::span<const void* const> in_use) {
  // Sorted once: a MoE model makes thousands of tensors, and a backend releases them in
  // several rounds as its copies are made.
  auto sorted = [](std::span<const void* const> ptrs) {
    std::vector<const uint8_t*> v;
    v.reserve(ptrs.size());
    for (const void* p : ptrs) v.push_back(static_cast<const uint8_t*>(p));
    std::sort(v.begin(), v.end());
    return v;
  };
  const std::vector<const uint8_t*> used = sorted(in_use), done = sorted(copied);
  for (auto it = stacked_.begin(); it != stacked_.end();) {
    const Stacked& s = *it->second;
    const uint8_t* begin = s.bytes.data();
    const auto first_used = std::lower_bound(used.begin(), used.end(), begin);
    const bool in_use_now = first_used != used.end() && *first_used < begin + s.bytes.size();
    const bool gone = !s.served || std::binary_search(done.begin(), done.end(), begin);
    it = gone && !in_use_now ? stacked_.erase(it) : std::next(it);
  }
}

bool HfTensors::made_here(const TensorView* view) const {
  return std::any_of(stacked_.begin(), stacked_.end(),
                     [&](const auto& entry) { return &entry.second->view == view; });
}

uint64_t HfTensors::made_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, s] : stacked_) n += s->bytes.size();
  return n;
}

std::vector<const TensorView*> HfTensors::expert_views(const std::string& pattern) {
  const size_t at = pattern.find(names::kExpertIndex);
  std::vector<const TensorView*> experts;
  for (int e = 0;; ++e) {
    std::string name = pattern;
    name.replace(at, names::kExpertIndex.size(), std::to_string(e));
    const TensorView* t = lookup(name);
    if (!t) break;
    experts.push_back(t);
  }
  return experts;
}

std::vector<const TensorView*> HfTensors::experts(std::string_view gguf_name) {
  auto hf = names::gguf_to_hf(arch_, gguf_name, n_layer_);
  if (!hf || hf->find('#') != std::string::npos ||
      hf->find(names::kExpertIndex) == std::string::npos)
    return {};
  std::vector<const TensorView*> views = expert_views(*hf);
  // An FP8 checkpoint's experts were dequantized one by one: served views now, freed only
  // once copied (release).
  const std::unordered_set<const TensorView*> served(views.begin(), views.end());
  for (auto& [name, s] : stacked_)
    if (served.count(&s->view)) s->served = true;
  return views;
}

const TensorView* HfTensors::stack_experts(const std::string& gguf_name,
                                           const std::string& pattern) {
  const std::vector<const TensorView*> experts = expert_views(pattern);
  for (const TensorView* t : experts)
    if (t->n_dims != 2 || t->dtype != experts[0]->dtype || t->ne != experts[0]->ne) return nullptr;
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
  // An FP8 checkpoint's experts were dequantized one by one: the stack holds them now.
  for (auto it = stacked_.begin(); it != stacked_.end();) {
    const bool expert =
        std::find(experts.begin(), experts.end(), &it->second->view) != experts.end();
    it = expert ? stacked_.erase(it) : std::next(it);
  }
  return out;
}

}  // namespace loom

namespace loom {

// gpt-oss's experts as llama.cpp's converter writes them. Elements are copied as bytes, so
// any plain dtype (F32, F16, BF16) keeps its type. "#even" / "#odd": the even (gate) or odd
// (up) columns of [X][E][2F] (ne {2F, E, X}), transposed to ne {E, F, X}; or of a bias
// [X][2F] (ne {2F, X}) as ne {F, X}. "#t": each expert's [F][E] (ne {E, F, X}) transposed to
// ne {F, E, X}.
const TensorView* HfTensors::derive(const std::string& gguf_name, const std::string& hf) {
  const size_t hash = hf.find('#');
  const std::string op = hf.substr(hash);
  const TensorView* t = lookup(hf.substr(0, hash));
  if (!t && (op == names::kDeriveEvenCols || op == names::kDeriveOddCols ||
             op == names::kDeriveTransposed))
    return derive_mxfp4(gguf_name, hf.substr(0, hash), op);
  if (!t || dtype_info(t->dtype).quantized || dtype_info(t->dtype).block_size != 1) return nullptr;
  if (is_deltanet_derivation(op)) {
    auto s = std::make_unique<Stacked>();
    if (!derive_deltanet_tensor(*t, op, deltanet_, &s->bytes, &s->view)) return nullptr;
    s->view.data = s->bytes.data();
    const TensorView* result = &s->view;
    stacked_.emplace(gguf_name, std::move(s));
    return result;
  }
  if (op == names::kDeriveMlaKeys || op == names::kDeriveMlaValues) {
    // kv_b_proj is what a legacy GGUF's attn_kv_b holds (model/mla_kv_b.h).
    auto s = std::make_unique<Stacked>();
    if (!split_kv_b(*t, mla_, n_head_, op == names::kDeriveMlaKeys, &s->bytes, &s->view))
      return nullptr;
    const TensorView* result = &s->view;
    stacked_.emplace(gguf_name, std::move(s));
    return result;
  }
  const int64_t es = dtype_info(t->dtype).block_bytes;
  auto s = std::make_unique<Stacked>();
  s->view = *t;
  const auto* in = static_cast<const uint8_t*>(t->data);
  s->bytes.resize(t->nbytes);
  uint8_t* out = s->bytes.data();
  auto copy = [&](int64_t dst, int64_t src) { std::memcpy(out + dst * es, in + src * es, es); };
  if (op == names::kDeriveTransposed) {
    if (t->n_dims != 3) return nullptr;
    const int64_t E = t->ne[0], F = t->ne[1], X = t->ne[2];
    for (int64_t x = 0; x < X; ++x)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t o = 0; o < E; ++o) copy((x * E + o) * F + f, (x * F + f) * E + o);
    s->view.ne = {F, E, X, 1};
  } else if (op == names::kDeriveEvenCols || op == names::kDeriveOddCols) {
    const int64_t parity = op == names::kDeriveOddCols ? 1 : 0;
    if (t->ne[0] % 2 != 0) return nullptr;
    const int64_t F = t->ne[0] / 2;
    if (t->n_dims == 3) {
      const int64_t E = t->ne[1], X = t->ne[2];
      for (int64_t x = 0; x < X; ++x)
        for (int64_t f = 0; f < F; ++f)
          for (int64_t i = 0; i < E; ++i)
            copy((x * F + f) * E + i, (x * E + i) * 2 * F + 2 * f + parity);
      s->view.ne = {E, F, X, 1};
    } else if (t->n_dims == 2) {
      const int64_t X = t->ne[1];
      for (int64_t x = 0; x < X; ++x)
        for (int64_t f = 0; f < F; ++f) copy(x * F + f, x * 2 * F + 2 * f + parity);
      s->view.ne = {F, X, 1, 1};
    } else {
      return nullptr;
    }
    s->bytes.resize(t->nbytes / 2);
  } else {
    return nullptr;
  }
  s->view.data = s->bytes.data();
  s->view.nbytes = s->bytes.size();
  const TensorView* result = &s->view;
  stacked_.emplace(gguf_name, std::move(s));
  return result;
}

// gpt-oss as OpenAI publishes it: each expert matrix as `NAME_blocks` (U8 [X][R][G][16]: per
// output row R, G blocks of 32 E2M1 codes, element 2i in the low nibble of byte i and 2i + 1 in
// the high one) and `NAME_scales` (U8 [X][R][G]: E8M0, 2^(s - 127)), rows being outputs:
// gate_up's 2F rows alternate gate and up (op #even / #odd), down's are its E outputs (op #t,
// which the float checkpoint needs to transpose). GGUF's MXFP4 (BlockMxfp4) is the same codes
// and scale byte, element j in the low nibble of qs[j % 16] for j < 16 and the high one after:
// only the nibbles move.
const TensorView* HfTensors::derive_mxfp4(const std::string& gguf_name, const std::string& base,
                                          const std::string& op) {
  const TensorView* blocks = lookup(base + "_blocks");
  const TensorView* scales = lookup(base + "_scales");
  if (!blocks || !scales || blocks->dtype != Dtype::kI8 || scales->dtype != Dtype::kI8 ||
      blocks->n_dims != 4 || blocks->ne[0] != 16 || scales->n_dims != 3 ||
      scales->ne[0] != blocks->ne[1] || scales->ne[1] != blocks->ne[2] ||
      scales->ne[2] != blocks->ne[3])
    return nullptr;
  const int64_t G = blocks->ne[1], R = blocks->ne[2], X = blocks->ne[3];
  const bool split = op != names::kDeriveTransposed;  // gate_up: every other row
  if (split && R % 2 != 0) return nullptr;
  const int64_t rows = split ? R / 2 : R, parity = op == names::kDeriveOddCols ? 1 : 0;
  const auto* in = static_cast<const uint8_t*>(blocks->data);
  const auto* sc = static_cast<const uint8_t*>(scales->data);
  auto s = std::make_unique<Stacked>();
  s->bytes.resize(static_cast<size_t>(X * rows * G) * sizeof(kernels::BlockMxfp4));
  auto* out = reinterpret_cast<kernels::BlockMxfp4*>(s->bytes.data());
  // Every expert byte of the model moves here before the server answers: rows on every core.
  parallel_ranges(X * rows, [&](int64_t first, int64_t last) {
    for (int64_t xr = first; xr < last; ++xr) {
      const int64_t x = xr / rows, r = xr % rows;
      const int64_t src_row = x * R + (split ? 2 * r + parity : r);
      for (int64_t g = 0; g < G; ++g) {
        const uint8_t* b = in + (src_row * G + g) * 16;
        kernels::BlockMxfp4& o = out[xr * G + g];
        o.e = sc[src_row * G + g];
        // qs[j]: element j low, j + 16 high; element k is nibble k % 2 of b[k / 2].
        for (int j = 0; j < 16; j += 2) {
          const uint8_t lo = b[j / 2], hi = b[8 + j / 2];
          o.qs[j] = static_cast<uint8_t>((lo & 0x0F) | (hi << 4));
          o.qs[j + 1] = static_cast<uint8_t>((lo >> 4) | (hi & 0xF0));
        }
      }
    }
  });
  s->view = *blocks;
  s->view.dtype = Dtype::kMXFP4;
  s->view.n_dims = 3;
  s->view.ne = {G * 32, rows, X, 1};
  s->view.data = s->bytes.data();
  s->view.nbytes = s->bytes.size();
  const TensorView* result = &s->view;
  stacked_.emplace(gguf_name, std::move(s));
  return result;
}

}  // namespace loom
