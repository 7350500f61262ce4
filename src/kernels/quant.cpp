// Public dequantize_row / quantize_row: validate, then run the reference converters (which
// are exact by construction; the matmul hot path never dequantizes whole rows).
#include "kernels/quant.h"

#include <string>

#include "kernels/ref/ref.h"

namespace loom::kernels {

void dequantize_row(Dtype t, const void* src, float* dst, int64_t n) {
  LOOM_CHECK(ref::can_dequantize(t));
  LOOM_CHECK(n % dtype_info(t).block_size == 0);
  ref::dequantize_row(t, src, dst, n);
}

Status quantize_row(Dtype t, const float* src, void* dst, int64_t n) {
  if (!ref::can_quantize(t))
    return unsupported("loom cannot quantize to " + std::string(dtype_name(t)));
  const int64_t bs = dtype_info(t).block_size;
  if (n < 0 || n % bs != 0)
    return invalid_argument("row of " + std::to_string(n) + " elements is not a multiple of " +
                            std::string(dtype_name(t)) + "'s block size " + std::to_string(bs));
  ref::quantize_row(t, src, dst, n);
  return Status::ok();
}

}  // namespace loom::kernels
