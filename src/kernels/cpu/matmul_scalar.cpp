// Generic (portable C++) matmul kernels for every weight dtype: one dot product per output,
// weights kept quantized, activations pre-quantized (Q8 per 32-block or Q8_K), integer sums
// per block and float accumulation in block order.
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ternary_ref.h"

namespace loom::kernels::cpu {
namespace {

using DotFn = float (*)(const uint8_t* w, const uint8_t* x, int64_t cols);

float dot_f32(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const float* a = reinterpret_cast<const float*>(w);
  const float* b = reinterpret_cast<const float*>(x);
  float acc = 0;
  for (int64_t k = 0; k < cols; ++k) acc += a[k] * b[k];
  return acc;
}

float dot_f16(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const uint16_t* a = reinterpret_cast<const uint16_t*>(w);
  const float* b = reinterpret_cast<const float*>(x);
  float acc = 0;
  for (int64_t k = 0; k < cols; ++k) acc += fp16_to_f32(a[k]) * b[k];
  return acc;
}

float dot_bf16(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const uint16_t* a = reinterpret_cast<const uint16_t*>(w);
  const float* b = reinterpret_cast<const float*>(x);
  float acc = 0;
  for (int64_t k = 0; k < cols; ++k) acc += bf16_to_f32(a[k]) * b[k];
  return acc;
}

// Element j of a legacy 32-block as an integer, with its offset (q - 8 etc.) or not.
inline int q4_elem(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
}
inline int q5_elem(const uint8_t* qs, uint32_t qh, int j) {
  return q4_elem(qs, j) | (((qh >> j) & 1) << 4);
}

float dot_q8_0(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(w);
  const ActQ8_32Row a = act_q8_32_row(x, cols);
  float acc = 0;
  for (int64_t i = 0; i < cols / 32; ++i) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += b[i].qs[j] * a.qs[32 * i + j];
    acc += (fp16_to_f32(b[i].d) * a.d[i]) * static_cast<float>(sum);
  }
  return acc;
}

float dot_q4_0(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ4_0*>(w);
  const ActQ8_32Row a = act_q8_32_row(x, cols);
  float acc = 0;
  for (int64_t i = 0; i < cols / 32; ++i) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += (q4_elem(b[i].qs, j) - 8) * a.qs[32 * i + j];
    acc += (fp16_to_f32(b[i].d) * a.d[i]) * static_cast<float>(sum);
  }
  return acc;
}

// The 4-bit grid formats: the nibbles index an integer table (MXFP4: E2M1 doubled, the IQ4
// formats' grid; quant_blocks.h), so each 32 is one int8 dot product scaled by the block's
// scale times d_x. Fmt gives block i's nibbles and scale.
template <class Fmt>
float dot_grid4(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const ActQ8_32Row a = act_q8_32_row(x, cols);
  float acc = 0;
  for (int64_t i = 0; i < cols / 32; ++i) {
    const uint8_t* qs = Fmt::qs(w, i);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += Fmt::kValues[q4_elem(qs, j)] * a.qs[32 * i + j];
    acc += (Fmt::scale(w, i) * a.d[i]) * static_cast<float>(sum);
  }
  return acc;
}
struct Mxfp4Grid {  // scale 2^(e - 128)
  static constexpr const int8_t* kValues = kMxfp4Values;
  static const BlockMxfp4& block(const uint8_t* w, int64_t i) {
    return reinterpret_cast<const BlockMxfp4*>(w)[i];
  }
  static const uint8_t* qs(const uint8_t* w, int64_t i) { return block(w, i).qs; }
  static float scale(const uint8_t* w, int64_t i) { return e8m0_half(block(w, i).e); }
};
struct Iq4NlGrid {
  static constexpr const int8_t* kValues = kIq4NlValues;
  static const BlockIq4Nl& block(const uint8_t* w, int64_t i) {
    return reinterpret_cast<const BlockIq4Nl*>(w)[i];
  }
  static const uint8_t* qs(const uint8_t* w, int64_t i) { return block(w, i).qs; }
  static float scale(const uint8_t* w, int64_t i) { return fp16_to_f32(block(w, i).d); }
};
struct Iq4XsGrid {  // 32-column block i: sub-block i % 8 of super-block i / 8, d * (ls - 32)
  static constexpr const int8_t* kValues = kIq4NlValues;
  static const BlockIq4Xs& block(const uint8_t* w, int64_t i) {
    return reinterpret_cast<const BlockIq4Xs*>(w)[i / 8];
  }
  static const uint8_t* qs(const uint8_t* w, int64_t i) { return block(w, i).qs + 16 * (i % 8); }
  static float scale(const uint8_t* w, int64_t i) {
    const BlockIq4Xs& b = block(w, i);
    return fp16_to_f32(b.d) * static_cast<float>(iq4_xs_scale(b, static_cast<int>(i % 8)));
  }
};

float dot_q4_1(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ4_1*>(w);
  const ActQ8_32Row a = act_q8_32_row(x, cols);
  float acc = 0;
  for (int64_t i = 0; i < cols / 32; ++i) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q4_elem(b[i].qs, j) * a.qs[32 * i + j];
    acc += (fp16_to_f32(b[i].d) * a.d[i]) * static_cast<float>(sum);
    acc += fp16_to_f32(b[i].m) * a.s[i];
  }
  return acc;
}

float dot_q5_0(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ5_0*>(w);
  const ActQ8_32Row a = act_q8_32_row(x, cols);
  float acc = 0;
  for (int64_t i = 0; i < cols / 32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += (q5_elem(b[i].qs, qh, j) - 16) * a.qs[32 * i + j];
    acc += (fp16_to_f32(b[i].d) * a.d[i]) * static_cast<float>(sum);
  }
  return acc;
}

float dot_q5_1(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ5_1*>(w);
  const ActQ8_32Row a = act_q8_32_row(x, cols);
  float acc = 0;
  for (int64_t i = 0; i < cols / 32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q5_elem(b[i].qs, qh, j) * a.qs[32 * i + j];
    acc += (fp16_to_f32(b[i].d) * a.d[i]) * static_cast<float>(sum);
    acc += fp16_to_f32(b[i].m) * a.s[i];
  }
  return acc;
}

// K-quants: per super-block, exact integer sums of scale * (q . x) and of min * sum(x); then
// fused multiply-adds per super-block, exactly what the SIMD kernels do, so that K-quant
// results are bit-identical on every ISA.
float dot_q2_k(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(w);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(x);
  float acc = 0;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 16; ++j) {
      // Sub-block j: elements 16j..16j+15 sit in qs[32*(j/8) + 16*(j%2) + l], bits 2*((j/2)%4).
      const uint8_t* q = b[i].qs + 32 * (j / 8) + 16 * (j % 2);
      const int shift = 2 * ((j / 2) % 4);
      int s = 0;
      for (int l = 0; l < 16; ++l) s += ((q[l] >> shift) & 3) * a[i].qs[16 * j + l];
      isum += (b[i].scales[j] & 0xF) * s;
      msum += (b[i].scales[j] >> 4) * a[i].bsums[j];
    }
    const float d = fp16_to_f32(b[i].d) * a[i].d;
    const float dmin = fp16_to_f32(b[i].dmin) * a[i].d;
    acc = std::fma(d, static_cast<float>(isum), acc);
    acc = std::fma(-dmin, static_cast<float>(msum), acc);
  }
  return acc;
}

float dot_q3_k(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(w);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(x);
  float acc = 0;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    int8_t sc[16];
    q3k_scales(b[i].scales, sc);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int base = 32 * (j / 8) + 16 * (j % 2);  // same placement as Q2_K
      const int shift = 2 * ((j / 2) % 4);
      const uint8_t hbit = static_cast<uint8_t>(1 << (j / 2));
      int s = 0;
      for (int l = 0; l < 16; ++l) {
        const int q =
            ((b[i].qs[base + l] >> shift) & 3) - ((b[i].hmask[16 * (j % 2) + l] & hbit) ? 0 : 4);
        s += q * a[i].qs[16 * j + l];
      }
      isum += sc[j] * s;
    }
    acc = std::fma(fp16_to_f32(b[i].d) * a[i].d, static_cast<float>(isum), acc);
  }
  return acc;
}

float dot_q4_k(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ4_K*>(w);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(x);
  float acc = 0;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k_scale_min(j, b[i].scales, &sc, &m);
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int s = 0;
      for (int l = 0; l < 32; ++l) s += ((q[l] >> shift) & 0xF) * a[i].qs[32 * j + l];
      isum += sc * s;
      msum += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    const float d = fp16_to_f32(b[i].d) * a[i].d;
    const float dmin = fp16_to_f32(b[i].dmin) * a[i].d;
    acc = std::fma(d, static_cast<float>(isum), acc);
    acc = std::fma(-dmin, static_cast<float>(msum), acc);
  }
  return acc;
}

float dot_q5_k(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ5_K*>(w);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(x);
  float acc = 0;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k_scale_min(j, b[i].scales, &sc, &m);
      const uint8_t* q = b[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0xF) | (((b[i].qh[l] >> j) & 1) << 4);
        s += v * a[i].qs[32 * j + l];
      }
      isum += sc * s;
      msum += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    const float d = fp16_to_f32(b[i].d) * a[i].d;
    const float dmin = fp16_to_f32(b[i].dmin) * a[i].d;
    acc = std::fma(d, static_cast<float>(isum), acc);
    acc = std::fma(-dmin, static_cast<float>(msum), acc);
  }
  return acc;
}

float dot_q6_k(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(w);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(x);
  float acc = 0;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      // Sub-block j (16 elements) of 128-group g = j/8: quarter p = (j%8)/2 uses ql low/high
      // nibble of ql[64g + 32*(p%2) + l'] and qh bits 2p of qh[32g + l'].
      const int g = j / 8, p = (j % 8) / 2, half = j % 2;
      int s = 0;
      for (int l = 0; l < 16; ++l) {
        const int lp = 16 * half + l;
        const uint8_t lo = b[i].ql[64 * g + 32 * (p % 2) + lp];
        const int q =
            ((p < 2 ? lo & 0xF : lo >> 4) | (((b[i].qh[32 * g + lp] >> (2 * p)) & 3) << 4)) - 32;
        s += q * a[i].qs[16 * j + l];
      }
      isum += b[i].scales[j] * s;
    }
    acc = std::fma(fp16_to_f32(b[i].d) * a[i].d, static_cast<float>(isum), acc);
  }
  return acc;
}

// TQ1_0 / TQ2_0: the trits t in 0..2 against the int8 activations (S), and the activations'
// sum (M) for the value's - 1, then per super-block acc += d_x * (d * S - d * M) in the packed
// Q2_K tile's float order: the packed copy of a ternary matrix is the Q2_K matrix with the same
// values (every scale and min 1, dmin = d; kernels/packed.h), so every path gives the same floats.
template <class Block, int (*kTrit)(const Block&, int)>
float dot_ternary(const uint8_t* w, const uint8_t* x, int64_t cols) {
  const auto* b = reinterpret_cast<const Block*>(w);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(x);
  float acc = 0;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    int isum = 0, xsum = 0;
    for (int k = 0; k < kQKK; ++k) isum += kTrit(b[i], k) * a[i].qs[k];
    for (int j = 0; j < kQKK / 16; ++j) xsum += a[i].bsums[j];
    const float d = fp16_to_f32(b[i].d);
    const float v = std::fma(static_cast<float>(isum), d, -(static_cast<float>(xsum) * d));
    acc = std::fma(v, a[i].d, acc);
  }
  return acc;
}

template <DotFn kDot>
void tile(const TileArgs& a, int n_rows, int n_tok) {
  for (int t = 0; t < n_tok; ++t)
    for (int r = 0; r < n_rows; ++r)
      a.out[t * a.out_stride + r] = kDot(a.w + r * a.w_stride, a.x + t * a.x_stride, a.cols);
}

constexpr MatmulKernel kF32{ActFormat::kF32, tile<dot_f32>, 4, 4};
constexpr MatmulKernel kF16{ActFormat::kF32, tile<dot_f16>, 4, 4};
constexpr MatmulKernel kBF16{ActFormat::kF32, tile<dot_bf16>, 4, 4};
constexpr MatmulKernel kQ8_0{ActFormat::kQ8_32, tile<dot_q8_0>, 4, 4};
constexpr MatmulKernel kQ4_0{ActFormat::kQ8_32, tile<dot_q4_0>, 4, 4};
constexpr MatmulKernel kQ4_1{ActFormat::kQ8_32, tile<dot_q4_1>, 4, 4};
constexpr MatmulKernel kMxfp4{ActFormat::kQ8_32, tile<dot_grid4<Mxfp4Grid>>, 4, 4};
constexpr MatmulKernel kQ5_0{ActFormat::kQ8_32, tile<dot_q5_0>, 4, 4};
constexpr MatmulKernel kIq4Nl{ActFormat::kQ8_32, tile<dot_grid4<Iq4NlGrid>>, 4, 4};
constexpr MatmulKernel kIq4Xs{ActFormat::kQ8_32, tile<dot_grid4<Iq4XsGrid>>, 4, 4};
constexpr MatmulKernel kQ5_1{ActFormat::kQ8_32, tile<dot_q5_1>, 4, 4};
constexpr MatmulKernel kQ2_K{ActFormat::kQ8_K, tile<dot_q2_k>, 4, 4};
constexpr MatmulKernel kQ3_K{ActFormat::kQ8_K, tile<dot_q3_k>, 4, 4};
constexpr MatmulKernel kQ4_K{ActFormat::kQ8_K, tile<dot_q4_k>, 4, 4};
constexpr MatmulKernel kQ5_K{ActFormat::kQ8_K, tile<dot_q5_k>, 4, 4};
constexpr MatmulKernel kQ6_K{ActFormat::kQ8_K, tile<dot_q6_k>, 4, 4};
constexpr MatmulKernel kTq1_0{ActFormat::kQ8_K, tile<dot_ternary<BlockTq1_0, ref::tq1_0_trit>>, 4,
                              4};
constexpr MatmulKernel kTq2_0{ActFormat::kQ8_K, tile<dot_ternary<BlockTq2_0, ref::tq2_0_trit>>, 4,
                              4};

}  // namespace

const MatmulKernel* scalar_kernel(Dtype w) {
  switch (w) {
    case Dtype::kF32:
      return &kF32;
    case Dtype::kF16:
      return &kF16;
    case Dtype::kBF16:
      return &kBF16;
    case Dtype::kQ8_0:
      return &kQ8_0;
    case Dtype::kQ4_0:
      return &kQ4_0;
    case Dtype::kQ4_1:
      return &kQ4_1;
    case Dtype::kMXFP4:
      return &kMxfp4;
    case Dtype::kQ5_0:
      return &kQ5_0;
    case Dtype::kQ5_1:
      return &kQ5_1;
    case Dtype::kIQ4_NL:
      return &kIq4Nl;
    case Dtype::kIQ4_XS:
      return &kIq4Xs;
    case Dtype::kQ2_K:
      return &kQ2_K;
    case Dtype::kQ3_K:
      return &kQ3_K;
    case Dtype::kQ4_K:
      return &kQ4_K;
    case Dtype::kQ5_K:
      return &kQ5_K;
    case Dtype::kQ6_K:
      return &kQ6_K;
    case Dtype::kTQ1_0:
      return &kTq1_0;
    case Dtype::kTQ2_0:
      return &kTq2_0;
    default:
      return nullptr;
  }
}

const MatmulKernel* find_kernel(Dtype w, Isa isa) {
  if (isa == Isa::kAvx512)
    if (const MatmulKernel* k = avx512_kernel(w)) return k;
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2)
    if (const MatmulKernel* k = avx2_kernel(w)) return k;
  return scalar_kernel(w);
}

}  // namespace loom::kernels::cpu
