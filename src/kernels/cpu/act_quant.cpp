// Activation quantization for matmul (see act_quant.h).
#include "kernels/cpu/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace loom::kernels::cpu {

size_t act_row_bytes(ActFormat f, int64_t cols) {
  size_t n = 0;
  switch (f) {
    case ActFormat::kF32:
      n = cols * sizeof(float);
      break;
    case ActFormat::kBF16:
      n = cols * sizeof(uint16_t);
      break;
    case ActFormat::kQ8_32:
    case ActFormat::kQ8_32U:
      n = cols + 2 * (cols / 32) * sizeof(float);
      break;
    case ActFormat::kQ8_K:
      n = (cols / kQKK) * sizeof(BlockQ8_K);
      break;
  }
  return (n + 63) & ~size_t{63};
}

void quantize_act_row(ActFormat f, const float* x, int64_t cols, uint8_t* dst) {
  switch (f) {
    case ActFormat::kF32:
      std::memcpy(dst, x, cols * sizeof(float));
      return;
    case ActFormat::kBF16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t j = 0; j < cols; ++j) h[j] = f32_to_bf16(x[j]);
      return;
    }
    case ActFormat::kQ8_K:
      ref::quantize_row(Dtype::kQ8_K, x, dst, cols);
      return;
    case ActFormat::kQ8_32U: {
      quantize_act_row(ActFormat::kQ8_32, x, cols, dst);
      for (int64_t j = 0; j < cols; ++j) dst[j] ^= 0x80;  // q + 128 as u8, q in [-127, 127]
      return;
    }
    case ActFormat::kQ8_32: {
      auto* qs = reinterpret_cast<int8_t*>(dst);
      auto* d = reinterpret_cast<float*>(dst + cols);
      float* s = d + cols / 32;
      for (int64_t b = 0; b < cols / 32; ++b) {
        const float* xb = x + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float db = amax / 127;
        const float id = db ? 1.0f / db : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
          // |x * id| <= 127 up to rounding; the clamp keeps -128 out (sign tricks need it).
          const int q = std::clamp(ref::nearest_int(xb[j] * id), -127, 127);
          qs[32 * b + j] = static_cast<int8_t>(q);
          sum += q;
        }
        d[b] = db;
        s[b] = db * static_cast<float>(sum);
      }
      return;
    }
  }
}

}  // namespace loom::kernels::cpu
