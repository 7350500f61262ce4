// Test helpers: tiny random-weight GGUF models built in memory (independent of `loom synth`,
// so the tests control every shape and flag), and small comparison utilities.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/tensor_names.h"

namespace loom::test {

struct TinySpec {
  std::string arch = "llama";
  int32_t n_layer = 2, n_embd = 64, n_head = 4, n_head_kv = 2, head_dim = 16, n_ff = 96;
  int32_t n_vocab = 97;
  Dtype type = Dtype::kF32;  // of 2-D matrices
  bool tied = false;
  bool qkv_bias = false, qk_norm = false;
  float rope_theta = 10000.0f;
  float llama3_factor = 0.0f;  // > 0: write llama3 rope scaling keys
  bool rope_freqs_tensor = false;
  uint64_t seed = 1;
};

inline TinySpec tiny_spec(const std::string& arch, Dtype type = Dtype::kF32) {
  TinySpec s;
  s.arch = arch;
  s.type = type;
  s.qkv_bias = arch == "qwen2";
  s.qk_norm = arch == "qwen3";
  if (arch == "qwen3") s.head_dim = 32, s.tied = true;  // head_dim != n_embd / n_head
  if (dtype_info(type).block_size == 256) {             // K-quants need rows of 256
    s.n_embd = 256, s.n_head = 4, s.head_dim = 64, s.n_ff = 256;
  }
  return s;
}

// Holds tensor data until the bytes are built.
inline std::shared_ptr<std::vector<uint8_t>> build_tiny_gguf(const TinySpec& s) {
  namespace n = names;
  std::mt19937_64 rng(s.seed);
  GgufWriter w;
  w.set_string(std::string(n::kGeneralArchitecture), s.arch);
  auto k = [&](std::string_view suffix) { return n::arch_key(s.arch, suffix); };
  w.set_u32(k(n::kEmbeddingLength), s.n_embd);
  w.set_u32(k(n::kBlockCount), s.n_layer);
  w.set_u32(k(n::kHeadCount), s.n_head);
  w.set_u32(k(n::kHeadCountKv), s.n_head_kv);
  w.set_u32(k(n::kKeyLength), s.head_dim);
  w.set_u32(k(n::kValueLength), s.head_dim);
  w.set_u32(k(n::kFeedForwardLength), s.n_ff);
  w.set_u32(k(n::kContextLength), 256);
  w.set_f32(k(n::kRmsEps), 1e-5f);
  w.set_f32(k(n::kRopeFreqBase), s.rope_theta);
  if (s.llama3_factor > 0) {
    w.set_string(k(n::kRopeScalingType), "llama3");
    w.set_f32(k(n::kRopeScalingFactor), s.llama3_factor);
    w.set_f32(k(n::kRopeScalingLowFreqFactor), 1.0f);
    w.set_f32(k(n::kRopeScalingHighFreqFactor), 4.0f);
    w.set_u32(k(n::kRopeScalingOrigCtx), 64);
  }
  std::vector<std::vector<uint8_t>> store;
  store.reserve(256);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, Dtype dt, float lo, float hi) {
    int64_t numel = 1;
    for (auto v : ne) numel *= v;
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> f(numel);
    for (auto& x : f) x = d(rng);
    const int64_t cols = ne[0], rows = numel / cols;
    const uint64_t rb = *row_bytes(dt, cols);
    store.emplace_back(rb * rows);
    for (int64_t r = 0; r < rows; ++r) {
      Status st = kernels::quantize_row(dt, &f[r * cols], store.back().data() + r * rb, cols);
      LOOM_CHECK(st.is_ok());
    }
    Status st = w.add_tensor(name, dt, ne, store.back().data(), store.back().size());
    LOOM_CHECK(st.is_ok());
  };
  const int64_t E = s.n_embd, D = s.head_dim, F = s.n_ff;
  const float ae = 1.0f / std::sqrt(static_cast<float>(E)) * 1.7f;
  add(std::string(n::kTokenEmbd), {E, s.n_vocab}, s.type, -1.0f, 1.0f);
  add(std::string(n::kOutputNorm), {E}, Dtype::kF32, 0.7f, 1.3f);
  if (!s.tied) add(std::string(n::kOutput), {E, s.n_vocab}, s.type, -ae, ae);
  if (s.rope_freqs_tensor) add(std::string(n::kRopeFreqs), {D / 2}, Dtype::kF32, 1.0f, 8.0f);
  for (int l = 0; l < s.n_layer; ++l) {
    auto nm = [&](std::string_view suf) { return n::layer_tensor(l, suf); };
    add(nm(n::kAttnNorm), {E}, Dtype::kF32, 0.7f, 1.3f);
    add(nm(n::kAttnQ), {E, s.n_head * D}, s.type, -ae, ae);
    add(nm(n::kAttnK), {E, s.n_head_kv * D}, s.type, -ae, ae);
    add(nm(n::kAttnV), {E, s.n_head_kv * D}, s.type, -ae, ae);
    if (s.qkv_bias) {
      add(nm(n::kAttnQBias), {s.n_head * D}, Dtype::kF32, -0.3f, 0.3f);
      add(nm(n::kAttnKBias), {s.n_head_kv * D}, Dtype::kF32, -0.3f, 0.3f);
      add(nm(n::kAttnVBias), {s.n_head_kv * D}, Dtype::kF32, -0.3f, 0.3f);
    }
    if (s.qk_norm) {
      add(nm(n::kAttnQNorm), {D}, Dtype::kF32, 0.7f, 1.3f);
      add(nm(n::kAttnKNorm), {D}, Dtype::kF32, 0.7f, 1.3f);
    }
    const float ao = 1.0f / std::sqrt(static_cast<float>(s.n_head * D)) * 1.7f;
    add(nm(n::kAttnOutput), {s.n_head * D, E}, s.type, -ao, ao);
    add(nm(n::kFfnNorm), {E}, Dtype::kF32, 0.7f, 1.3f);
    add(nm(n::kFfnGate), {E, F}, s.type, -ae, ae);
    add(nm(n::kFfnUp), {E, F}, s.type, -ae, ae);
    const float af = 1.0f / std::sqrt(static_cast<float>(F)) * 1.7f;
    add(nm(n::kFfnDown), {F, E}, s.type, -af, af);
  }
  return std::make_shared<std::vector<uint8_t>>(w.to_bytes());
}

inline std::vector<int32_t> random_tokens(int n, int32_t n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, n_vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

// max|a - b| / max|b| over the whole array (b is the reference).
inline double rel_err(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::fmax(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::fmax(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

inline int32_t argmax(const float* x, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = static_cast<int32_t>(i);
  return best;
}

// Runs one sequence through the model in chunks (each chunk one forward call), using blocks
// [first_block, first_block + n_blocks) of `kv` in order (and, for a model with recurrent
// layers, the cache's state slot 0); returns logits for every position.
inline Result<std::vector<float>> run_sequence(Model& m, KvCache& kv,
                                               const std::vector<int32_t>& tokens, int chunk,
                                               int32_t first_block = 0) {
  const int32_t V = m.config().n_vocab;
  const int32_t n = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> table((n + kv.block_size() - 1) / kv.block_size());
  for (size_t i = 0; i < table.size(); ++i) table[i] = first_block + static_cast<int32_t>(i);
  std::vector<float> out(static_cast<size_t>(n) * V);
  for (int32_t start = 0; start < n; start += chunk) {
    const int32_t len = std::min(chunk, n - start);
    Batch b;
    b.sequences.push_back({table.data(), static_cast<int32_t>(table.size()), start, len, 0});
    if (kv.num_state_slots() > 0) b.sequences[0].state_slot = 0;
    for (int32_t i = 0; i < len; ++i) {
      b.tokens.push_back(tokens[start + i]);
      b.pos.push_back(start + i);
      b.seq.push_back(0);
      b.logits_rows.push_back(i);
    }
    LOOM_RETURN_IF_ERROR(m.forward(b, kv, &out[static_cast<size_t>(start) * V]));
  }
  return out;
}

}  // namespace loom::test
