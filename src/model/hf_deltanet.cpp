#include "model/hf_deltanet.h"

#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "model/tensor_names.h"

namespace loom {
namespace {

// The tensor's rows: its last dimension, each row everything before it (a conv1d's [C][1][K]
// is C rows of K taps; a 1-D tensor is rows of one element).
int64_t n_rows(const TensorView& t) {
  return t.n_dims == 1 ? t.ne[0] : t.ne[t.n_dims - 1];
}

// in_proj_qkvz [Hk][dk q | dk k | r·dv v | r·dv z][E]: the q, k, v rows of every key head
// (all q, then all k, then all v) or their z rows.
bool split_qkvz(const uint8_t* in, uint64_t row_bytes, const DeltaNetConfig& d, bool z,
                std::vector<uint8_t>* out) {
  const int64_t r = d.n_v_heads / d.n_k_heads;
  const int64_t per_head = 2 * d.d_k + 2 * r * d.d_v;
  const int64_t vz = r * d.d_v;
  std::vector<int64_t> src_rows;  // the output's rows in order, as input row indices
  if (z) {
    for (int64_t g = 0; g < d.n_k_heads; ++g)
      for (int64_t i = 0; i < vz; ++i) src_rows.push_back(g * per_head + 2 * d.d_k + vz + i);
  } else {
    for (int64_t part = 0; part < 3; ++part)
      for (int64_t g = 0; g < d.n_k_heads; ++g) {
        const int64_t begin = part == 0 ? 0 : part == 1 ? d.d_k : 2 * d.d_k;
        const int64_t len = part == 2 ? vz : d.d_k;
        for (int64_t i = 0; i < len; ++i) src_rows.push_back(g * per_head + begin + i);
      }
  }
  out->resize(src_rows.size() * row_bytes);
  for (size_t o = 0; o < src_rows.size(); ++o)
    std::memcpy(out->data() + o * row_bytes, in + src_rows[o] * row_bytes, row_bytes);
  return true;
}

// Grouped value head g·r + i (key head g) goes to tiled position i·Hk + g.
int64_t tiled_index(int64_t grouped, const DeltaNetConfig& d) {
  const int64_t r = d.n_v_heads / d.n_k_heads;
  return (grouped % r) * d.n_k_heads + grouped / r;
}

}  // namespace

bool is_deltanet_derivation(std::string_view op) {
  return op.starts_with(names::kDeriveQkvzQkv) || op.starts_with(names::kDeriveQkvzZ) ||
         op.starts_with(names::kDeriveTileRows) || op.starts_with(names::kDeriveNegExp);
}

bool derive_deltanet_tensor(const TensorView& src, std::string_view ops, const DeltaNetConfig& d,
                            std::vector<uint8_t>* bytes, TensorView* view) {
  const DtypeInfo& info = dtype_info(src.dtype);
  if (info.quantized || info.block_size != 1 || d.n_k_heads < 1 || d.n_v_heads % d.n_k_heads)
    return false;
  *view = src;
  bytes->assign(static_cast<const uint8_t*>(src.data),
                static_cast<const uint8_t*>(src.data) + src.nbytes);
  std::vector<uint8_t> out;
  while (!ops.empty()) {
    const size_t next = ops.find('#', 1);
    const std::string_view op = ops.substr(0, next);
    ops = next == std::string_view::npos ? std::string_view() : ops.substr(next);
    const int64_t es = dtype_info(view->dtype).block_bytes;
    const int64_t rows = n_rows(*view);
    const uint64_t row_bytes = view->nbytes / static_cast<uint64_t>(rows);
    const int64_t Z = int64_t{d.n_v_heads} * d.d_v;
    if (op == names::kDeriveQkvzQkv || op == names::kDeriveQkvzZ) {
      const int64_t r = d.n_v_heads / d.n_k_heads;
      if (view->n_dims != 2 || rows != d.n_k_heads * (2 * d.d_k + 2 * r * d.d_v)) return false;
      const bool z = op == names::kDeriveQkvzZ;
      split_qkvz(bytes->data(), row_bytes, d, z, &out);
      view->ne[1] = z ? Z : d.conv_dim();
    } else if (op == names::kDeriveTileRows) {
      // The value heads' rows are the last Hv·u: u = d_v rows per head, or one (b, a, A, dt).
      const int64_t u = rows == d.n_v_heads ? 1 : d.d_v;
      const int64_t first = rows - d.n_v_heads * u;
      if (first < 0) return false;
      out = *bytes;
      for (int64_t h = 0; h < d.n_v_heads; ++h)
        std::memcpy(out.data() + (first + tiled_index(h, d) * u) * row_bytes,
                    bytes->data() + (first + h * u) * row_bytes, u * row_bytes);
    } else if (op == names::kDeriveTileCols) {
      if (view->n_dims != 2 || view->ne[0] != Z) return false;
      out = *bytes;
      const uint64_t head_bytes = d.d_v * es;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t h = 0; h < d.n_v_heads; ++h)
          std::memcpy(out.data() + row * row_bytes + tiled_index(h, d) * head_bytes,
                      bytes->data() + row * row_bytes + h * head_bytes, head_bytes);
    } else if (op == names::kDeriveNegExp) {  // A_log → -exp(A_log), in F32
      const int64_t n = view->numel();
      std::vector<float> x(n);
      kernels::load_kv(view->dtype, bytes->data(), x.data(), n);
      for (float& v : x) v = -std::exp(v);
      out.resize(n * sizeof(float));
      std::memcpy(out.data(), x.data(), out.size());
      view->dtype = Dtype::kF32;
    } else {
      return false;
    }
    bytes->swap(out);
    view->nbytes = bytes->size();
  }
  return true;
}

}  // namespace loom
