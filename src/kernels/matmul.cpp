// kernels::matmul: picks the micro-kernel for (weight dtype, active ISA), quantizes the
// activation rows once per call into reusable scratch, and spreads row chunks over the pool.
// Inside a chunk, token tiles run in the outer loop so the chunk's weights stay in cache while
// every tile of tokens passes over them.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "base/status.h"
#include "kernels/cpu/matmul_kernels.h"

namespace loom::kernels {
namespace {

// Grow-only, 64-byte aligned scratch; one per calling thread, so concurrent matmuls from
// different threads do not share it and steady-state calls never allocate.
class Scratch {
 public:
  uint8_t* get(size_t bytes) {
    if (bytes > cap_) {
      cap_ = std::max(bytes, cap_ * 2);
      buf_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (cap_ + 63) & ~size_t{63})));
      LOOM_CHECK(buf_ != nullptr);
    }
    return buf_.get();
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> buf_;
  size_t cap_ = 0;
};

thread_local Scratch t_act_scratch;

}  // namespace

bool matmul_supported(Dtype w) { return cpu::scalar_kernel(w) != nullptr; }

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* out, ThreadPool* pool) {
  const int64_t rows = w.rows(), cols = w.cols();
  if (n_tokens <= 0 || rows <= 0) return;
  const cpu::MatmulKernel* k = cpu::find_kernel(w.dtype, active_isa());
  LOOM_CHECK(k != nullptr);
  LOOM_CHECK(cols % dtype_info(w.dtype).block_size == 0);
  LOOM_CHECK(w.row_stride() * static_cast<uint64_t>(rows) == w.nbytes);

  // Activations: floats are used in place; quantized formats go to scratch.
  const uint8_t* xa = reinterpret_cast<const uint8_t*>(x);
  size_t x_stride = cols * sizeof(float);
  if (k->act != cpu::ActFormat::kF32) {
    x_stride = cpu::act_row_bytes(k->act, cols);
    uint8_t* buf = t_act_scratch.get(x_stride * n_tokens);
    auto quant = [&](int64_t t, int) {
      cpu::quantize_act_row(k->act, x + t * cols, cols, buf + t * x_stride);
    };
    // Parallel only when there is enough work to pay for a pool hand-off.
    if (pool && n_tokens > 1 && n_tokens * cols >= (int64_t{1} << 16))
      pool->parallel_for(n_tokens, quant);
    else
      for (int64_t t = 0; t < n_tokens; ++t) quant(t, 0);
    xa = buf;
  }

  // Row chunks: a multiple of the tile height, small enough to give every thread several.
  const int n_threads = pool ? pool->size() : 1;
  const int64_t tr = k->tile_rows;
  int64_t chunk = tr * std::max<int64_t>(1, rows / (tr * 4 * n_threads));
  chunk = std::min<int64_t>(chunk, tr * 16);
  // One token tile (decode): the call streams the weights from DRAM once, so each thread takes
  // one contiguous slice. Interleaved small chunks would make the threads' prefetch streams
  // run into each other's rows and cut the bandwidth by almost half.
  const bool streaming = n_tokens <= k->tile_tokens;
  if (streaming) chunk = ((rows + n_threads - 1) / n_threads + tr - 1) / tr * tr;
  const int64_t n_chunks = (rows + chunk - 1) / chunk;

  auto run_chunk = [&](int64_t c, int) {
    const int64_t r0 = c * chunk, r1 = std::min(rows, r0 + chunk);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += k->tile_tokens) {
      const int nt = static_cast<int>(std::min<int64_t>(k->tile_tokens, n_tokens - t0));
      for (int64_t r = r0; r < r1; r += tr) {
        cpu::TileArgs a;
        a.w = w.row(r);
        a.w_stride = w.row_stride();
        a.x = xa + t0 * x_stride;
        a.x_stride = x_stride;
        a.out = out + t0 * rows + r;
        a.out_stride = rows;
        a.cols = cols;
        a.prefetch = t0 == 0;
        k->tile(a, static_cast<int>(std::min<int64_t>(tr, r1 - r)), nt);
      }
    }
  };
  if (pool && n_chunks > 1)
    pool->parallel_for(n_chunks, run_chunk);
  else
    for (int64_t c = 0; c < n_chunks; ++c) run_chunk(c, 0);
}

}  // namespace loom::kernels
