// Binding and shape-checking of model tensors.
#include "model/weights.h"

#include <string>

#include "kernels/ops.h"
#include "model/tensor_names.h"

namespace loom {
namespace {

std::string dims(std::initializer_list<int64_t> ne) {
  std::string s = "[";
  for (auto v : ne) {
    if (s.size() > 1) s += ", ";
    s += std::to_string(v);
  }
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const TensorLookup& find) : find_(find) {}

  // A matrix with ne = {cols, rows}.
  Status matrix(std::string_view name, int64_t cols, int64_t rows, TensorView* out) {
    const TensorView* t = find_(name);
    if (!t) return missing(name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
      return invalid_file("tensor " + std::string(name) + " has shape " + shape_string(*t) +
                          ", expected " + dims({cols, rows}));
    *out = *t;
    return Status::ok();
  }

  // A 1-D tensor of n elements, converted to float. Absent + !required → empty vector.
  Status vector(std::string_view name, int64_t n, bool required, std::vector<float>* out) {
    const TensorView* t = find_(name);
    if (!t) return required ? missing(name) : Status::ok();
    if (t->numel() != n || t->n_dims > 1 && t->ne[0] != n)
      return invalid_file("tensor " + std::string(name) + " has shape " + shape_string(*t) +
                          ", expected " + dims({n}));
    if (t->dtype != Dtype::kF32 && t->dtype != Dtype::kF16 && t->dtype != Dtype::kBF16)
      return unsupported("tensor " + std::string(name) + " has dtype " +
                         std::string(dtype_name(t->dtype)) +
                         "; 1-D tensors must be f32, f16 or bf16");
    out->resize(n);
    kernels::load_kv(t->dtype, t->data, out->data(), n);
    return Status::ok();
  }

  bool has(std::string_view name) const { return find_(name) != nullptr; }

  // A norm weight (n floats): 1 is added when the source stores the offset form.
  Status norm(std::string_view name, int64_t n, bool required, std::vector<float>* out) {
    LOOM_RETURN_IF_ERROR(vector(name, n, required, out));
    if (norm_plus_one)
      for (float& w : *out) w += 1.0f;
    return Status::ok();
  }
  bool norm_plus_one = false;

 private:
  static Status missing(std::string_view name) {
    return invalid_file("required tensor " + std::string(name) + " is missing");
  }
  const TensorLookup& find_;
};

// Rows [first, first + n) of a row-major matrix view.
TensorView row_range(const TensorView& t, int64_t first, int64_t n) {
  TensorView v = t;
  v.ne[1] = n;
  v.data = t.row(first);
  v.nbytes = t.row_stride() * static_cast<uint64_t>(n);
  return v;
}

}  // namespace

Result<Weights> Weights::bind(ModelConfig& c, const ArchSpec& arch, const TensorLookup& find,
                              bool norm_plus_one) {
  namespace n = names;
  Binder b(find);
  b.norm_plus_one = norm_plus_one;
  Weights w;
  const TensorView* embd = find(n::kTokenEmbd);
  if (!embd) return invalid_file("required tensor " + std::string(n::kTokenEmbd) + " is missing");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd)
    return invalid_file("tensor " + std::string(n::kTokenEmbd) + " has shape " +
                        shape_string(*embd) + ", expected [" + std::to_string(c.n_embd) +
                        ", n_vocab]");
  if (c.n_vocab > 0 && c.n_vocab != embd->ne[1])
    return invalid_file("vocabulary size " + std::to_string(c.n_vocab) + " in the config but " +
                        std::string(n::kTokenEmbd) + " has " + std::to_string(embd->ne[1]) +
                        " rows");
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  w.token_embd = *embd;
  LOOM_RETURN_IF_ERROR(b.norm(n::kOutputNorm, c.n_embd, true, &w.output_norm));
  if (!c.tied_embeddings && b.has(n::kOutput)) {
    LOOM_RETURN_IF_ERROR(b.matrix(n::kOutput, c.n_embd, c.n_vocab, &w.output));
  } else {
    c.tied_embeddings = true;
    w.output = w.token_embd;
  }
  LOOM_RETURN_IF_ERROR(
      b.vector(n::kRopeFreqs, (c.n_rot > 0 ? c.n_rot : c.head_dim) / 2, false, &w.rope_freqs));

  const int64_t E = c.n_embd, D = c.head_dim, F = c.n_ff;
  const int64_t q_dim = c.n_head * D, kv_dim = c.n_head_kv * D;
  // Optional groups are decided by layer 0 and then required of every layer.
  auto group_present = [&](TensorNeed need, std::string_view suffix) {
    return need == TensorNeed::kRequired ||
           (need == TensorNeed::kOptional && b.has(n::layer_tensor(0, suffix)));
  };
  c.qkv_bias = group_present(arch.qkv_bias, n::kAttnQBias);
  c.qk_norm = group_present(arch.qk_norm, n::kAttnQNorm);

  const bool pre_norms = c.norm_placement != NormPlacement::kPost;
  const bool post_norms = c.norm_placement != NormPlacement::kPre;
  const bool whole_qk = c.qk_norm_kind == QkNorm::kWhole;
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[l];
    auto name = [&](std::string_view s) { return n::layer_tensor(l, s); };
    if (pre_norms) LOOM_RETURN_IF_ERROR(b.norm(name(n::kAttnNorm), E, true, &L.attn_norm));
    if (c.fused_qkv) {
      TensorView qkv;
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kAttnQkv), E, q_dim + 2 * kv_dim, &qkv));
      L.wq = row_range(qkv, 0, q_dim);
      L.wk = row_range(qkv, q_dim, kv_dim);
      L.wv = row_range(qkv, q_dim + kv_dim, kv_dim);
    } else {
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kAttnQ), E, q_dim, &L.wq));
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kAttnK), E, kv_dim, &L.wk));
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kAttnV), E, kv_dim, &L.wv));
    }
    if (c.qkv_bias) {
      LOOM_RETURN_IF_ERROR(b.vector(name(n::kAttnQBias), q_dim, true, &L.bq));
      LOOM_RETURN_IF_ERROR(b.vector(name(n::kAttnKBias), kv_dim, true, &L.bk));
      LOOM_RETURN_IF_ERROR(b.vector(name(n::kAttnVBias), kv_dim, true, &L.bv));
    }
    if (c.qk_norm) {
      LOOM_RETURN_IF_ERROR(b.norm(name(n::kAttnQNorm), whole_qk ? q_dim : D, true, &L.q_norm));
      LOOM_RETURN_IF_ERROR(b.norm(name(n::kAttnKNorm), whole_qk ? kv_dim : D, true, &L.k_norm));
    }
    LOOM_RETURN_IF_ERROR(b.matrix(name(n::kAttnOutput), q_dim, E, &L.wo));
    if (post_norms)
      LOOM_RETURN_IF_ERROR(b.norm(name(n::kAttnPostNorm), E, true, &L.attn_post_norm));
    if (pre_norms) LOOM_RETURN_IF_ERROR(b.norm(name(n::kFfnNorm), E, true, &L.ffn_norm));
    if (c.fused_gate_up) {
      TensorView gate_up;
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kFfnUp), E, 2 * F, &gate_up));
      L.w_gate = row_range(gate_up, 0, F);
      L.w_up = row_range(gate_up, F, F);
    } else {
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kFfnGate), E, F, &L.w_gate));
      LOOM_RETURN_IF_ERROR(b.matrix(name(n::kFfnUp), E, F, &L.w_up));
    }
    LOOM_RETURN_IF_ERROR(b.matrix(name(n::kFfnDown), F, E, &L.w_down));
    if (post_norms) LOOM_RETURN_IF_ERROR(b.norm(name(n::kFfnPostNorm), E, true, &L.ffn_post_norm));
  }
  return w;
}

uint64_t Weights::bytes_per_token() const {
  uint64_t total = output.nbytes;
  for (const auto& L : layers)
    total += L.wq.nbytes + L.wk.nbytes + L.wv.nbytes + L.wo.nbytes + L.w_gate.nbytes +
             L.w_up.nbytes + L.w_down.nbytes;
  return total;
}

}  // namespace loom
