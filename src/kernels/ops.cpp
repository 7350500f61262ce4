// CPU element-wise and attention ops. Plain loops with explicit fixed-width partial sums, so
// the compiler vectorizes them without -ffast-math and the summation order stays fixed.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"

namespace loom::kernels {
namespace {

constexpr int kLanes = 8;

// Sum of a[i]*b[i] with kLanes interleaved partial sums combined in a fixed tree.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

inline float sum_squares(const float* a, int64_t n) {
  return dot(a, a, n);
}

}  // namespace

float vec_dot(const float* a, const float* b, int64_t n) {
  if (active_isa() == Isa::kAvx512) return cpu::dot_f32_avx512(a, b, n);
  return dot(a, b, n);
}

void vec_axpy(float a, const float* x, float* y, int64_t n) {
  if (active_isa() == Isa::kAvx512) return cpu::axpy_f32_avx512(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  float mean = sum_squares(x, n) / static_cast<float>(n);
  float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void rope_angles(int32_t pos, const float* inv_freq, int64_t half, float* cs, float* sn) {
  for (int64_t i = 0; i < half; ++i) {
    double a = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    cs[i] = static_cast<float>(std::cos(a));
    sn[i] = static_cast<float>(std::sin(a));
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, const float* cs, const float* sn,
                 bool neox) {
  const int64_t half = head_dim / 2;
  if (active_isa() == Isa::kAvx512 && half % 16 == 0) {
    cpu::rope_rotate_avx512(x, n_heads, head_dim, cs, sn, neox);
    return;
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    if (neox) {
      for (int64_t i = 0; i < half; ++i) {
        float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[i] - x1 * sn[i];
        v[i + half] = x0 * sn[i] + x1 * cs[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cs[i] - x1 * sn[i];
        v[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const float* inv_freq,
          bool neox) {
  const int64_t half = head_dim / 2;
  // cos/sin depend only on (pos, i): compute them once for all heads.
  float cs[512], sn[512];
  LOOM_CHECK(half <= 512);
  rope_angles(pos, inv_freq, half, cs, sn);
  rope_rotate(x, n_heads, head_dim, cs, sn, neox);
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (active_isa() == Isa::kAvx512) {
    cpu::silu_mul_avx512(gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void store_kv(Dtype dtype, const float* src, void* dst, int64_t n) {
  if (dtype != Dtype::kF32 && active_isa() == Isa::kAvx512) {
    cpu::store_kv_half_avx512(dtype == Dtype::kBF16, src, static_cast<uint16_t*>(dst), n);
    return;
  }
  switch (dtype) {
    case Dtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case Dtype::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case Dtype::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    default:
      LOOM_CHECK(false && "KV dtype must be f32, f16 or bf16");
  }
}

namespace {
// Elements of `size` bytes from a dense array to dst with a stride: a fixed size per copy, so
// each is one load and one store (a runtime size made every element a call to memcpy:
// a decode token's dim-major K, 1,024 values, 1.4 us).
template <size_t kSize>
void scatter_elements(const uint8_t* src, uint8_t* dst, int64_t n, uint64_t stride) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * stride, src + i * kSize, kSize);
}
}  // namespace

void store_kv_strided(Dtype dtype, const float* src, void* dst, int64_t n, uint64_t stride) {
  const uint64_t esize = dtype == Dtype::kF32 ? 4 : 2;
  if (stride == esize) return store_kv(dtype, src, dst, n);
  uint8_t converted[256 * 4];
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    const int64_t m = std::min<int64_t>(256, n - i0);
    store_kv(dtype, src + i0, converted, m);
    uint8_t* d = static_cast<uint8_t*>(dst) + i0 * stride;
    if (esize == 4)
      scatter_elements<4>(converted, d, m, stride);
    else
      scatter_elements<2>(converted, d, m, stride);
  }
}

void load_kv(Dtype dtype, const void* src, float* dst, int64_t n) {
  if (dtype != Dtype::kF32 && active_isa() == Isa::kAvx512) {  // exact either way
    cpu::load_kv_half_avx512(dtype == Dtype::kBF16, static_cast<const uint16_t*>(src), dst, n);
    return;
  }
  switch (dtype) {
    case Dtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case Dtype::kF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case Dtype::kBF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    default:
      LOOM_CHECK(false && "KV dtype must be f32, f16 or bf16");
  }
}

void attention(const float* q, const PagedHead& k, const PagedHead& v, int64_t head_dim,
               int32_t n_kv, float scale, float* scratch, float* out, int32_t kv_begin,
               float softcap, float sink) {
  LOOM_CHECK(kv_begin >= 0);
  float* scores = scratch;      // scores[j - kv_begin] for j in [kv_begin, n_kv)
  float* row = scratch + n_kv;  // one K or V token converted to float
  const bool k_f32 = k.dtype == Dtype::kF32 && k.row_layout();
  const bool v_f32 = v.dtype == Dtype::kF32 && v.row_layout();
  // One token of a head as floats in `row` (or in place when it already is a float row).
  auto load_token = [&](const PagedHead& h, int32_t j) {
    if (h.row_layout()) {
      load_kv(h.dtype, h.token(j), row, head_dim);
    } else {
      for (int64_t d = 0; d < head_dim; ++d) load_kv(h.dtype, h.at(j, d), row + d, 1);
    }
  };
  for (int32_t j = kv_begin; j < n_kv; ++j) {
    const float* kj = reinterpret_cast<const float*>(k.token(j));
    if (!k_f32) {
      load_token(k, j);
      kj = row;
    }
    float& s = scores[j - kv_begin];
    s = dot(q, kj, head_dim) * scale;
    if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
  }
  if (n_kv > kv_begin && sink == -INFINITY) {
    softmax(scores, n_kv - kv_begin);
  } else if (n_kv > kv_begin) {  // the sink's term joins the max and the denominator
    const int32_t n = n_kv - kv_begin;
    float mx = sink;
    for (int32_t j = 0; j < n; ++j) mx = std::max(mx, scores[j]);
    float sum = std::exp(sink - mx);
    for (int32_t j = 0; j < n; ++j) sum += scores[j] = std::exp(scores[j] - mx);
    const float inv = 1.0f / sum;
    for (int32_t j = 0; j < n; ++j) scores[j] *= inv;
  }
  std::fill(out, out + head_dim, 0.0f);
  for (int32_t j = kv_begin; j < n_kv; ++j) {
    const float* vj = reinterpret_cast<const float*>(v.token(j));
    if (!v_f32) {
      load_token(v, j);
      vj = row;
    }
    const float p = scores[j - kv_begin];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * vj[d];
  }
}

}  // namespace loom::kernels
