#include "model/mla_kv_b.h"

#include <cstring>

#include "kernels/quant.h"

namespace loom {

bool split_kv_b(const TensorView& kv_b, const MlaConfig& mla, int64_t n_head, bool keys,
                std::vector<uint8_t>* bytes, TensorView* view) {
  const int64_t H = n_head, N = mla.qk_nope_head_dim, Dv = mla.v_head_dim, R = kv_b.ne[0];
  if (kv_b.n_dims != 2 || H <= 0 || N <= 0 || Dv <= 0 || R != mla.kv_lora_rank ||
      kv_b.ne[1] != H * (N + Dv))
    return false;
  const DtypeInfo& in = dtype_info(kv_b.dtype);
  const Dtype out_type = in.quantized || in.block_size != 1 ? Dtype::kF16 : kv_b.dtype;
  const int64_t es = dtype_info(out_type).block_bytes;
  // Source rows in out_type: as stored, or dequantized (and re-encoded as F16) one at a time.
  std::vector<float> f32(static_cast<size_t>(R));
  std::vector<uint8_t> row(static_cast<size_t>(R * es));
  auto source_row = [&](int64_t r) -> const uint8_t* {
    if (out_type == kv_b.dtype) return kv_b.row(r);
    kernels::dequantize_row(kv_b.dtype, kv_b.row(r), f32.data(), R);
    (void)kernels::quantize_row(out_type, f32.data(), row.data(), R);
    return row.data();
  };
  const int64_t per_head = keys ? N : Dv;
  bytes->assign(static_cast<size_t>(H * per_head * R * es), 0);
  uint8_t* out = bytes->data();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < per_head; ++d) {
      const uint8_t* src = source_row(h * (N + Dv) + (keys ? 0 : N) + d);
      if (keys) {  // key row d of head h becomes column d of k_b[h] (R rows of N)
        for (int64_t r = 0; r < R; ++r)
          std::memcpy(out + ((h * R + r) * N + d) * es, src + r * es, es);
      } else {  // value row d of head h stays row d of v_b[h] (Dv rows of R)
        std::memcpy(out + (h * Dv + d) * R * es, src, R * es);
      }
    }
  *view = TensorView{};
  view->dtype = out_type;
  view->n_dims = 3;
  view->ne = keys ? std::array<int64_t, 4>{N, R, H, 1} : std::array<int64_t, 4>{R, Dv, H, 1};
  view->data = bytes->data();
  view->nbytes = bytes->size();
  return true;
}

}  // namespace loom
