// kernels::matmul: picks the micro-kernel for (weight dtype, active ISA), quantizes the
// activation rows once per call into reusable scratch, and spreads row slices over the pool.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "base/status.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/packed.h"

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

bool matmul_supported(Dtype w) {
  return cpu::scalar_kernel(w) != nullptr;
}

namespace {

// Runs the quantization of n_tokens activation rows, in parallel when it pays for a hand-off
// (from a few rows on, as CpuModel::for_rows).
template <class F>
void for_each_token(int64_t n_tokens, int64_t cols, ThreadPool* pool, F&& quant) {
  if (pool && n_tokens > 1 && n_tokens * cols >= 8192)
    pool->parallel_for(n_tokens, quant);
  else
    for (int64_t t = 0; t < n_tokens; ++t) quant(t, 0);
}

// Quantizes the n_tokens activation rows for kernel k into scratch (floats are used in place).
const uint8_t* prepare_activations(const cpu::MatmulKernel* k, const float* x, int64_t cols,
                                   int64_t n_tokens, ThreadPool* pool, size_t* x_stride) {
  if (k->act == cpu::ActFormat::kF32) {
    *x_stride = cols * sizeof(float);
    return reinterpret_cast<const uint8_t*>(x);
  }
  const size_t stride = cpu::act_row_bytes(k->act, cols);
  *x_stride = stride;
  uint8_t* buf = t_act_scratch.get(stride * n_tokens);
  const bool q8_32 = k->act == cpu::ActFormat::kQ8_32 || k->act == cpu::ActFormat::kQ8_32U;
  const bool fast = q8_32 && active_isa() == Isa::kAvx512;
  auto quant = [&](int64_t t, int) {
    if (fast)
      cpu::quantize_act_row_q8_32_avx512(x + t * cols, cols, buf + t * stride,
                                         k->act == cpu::ActFormat::kQ8_32U);
    else
      cpu::quantize_act_row(k->act, x + t * cols, cols, buf + t * stride);
  };
  for_each_token(n_tokens, cols, pool, quant);
  return buf;
}

// Up to this many tokens a call is weight-streaming (decode, batched decode): each thread
// takes one contiguous slice of rows, reads it from DRAM once, and runs all token tiles over a
// row tile while it is in L1. Larger batches (prefill) use many smaller chunks, token tiles
// outermost, so a chunk's weights stay in L2 while the token tiles pass over them.
constexpr int64_t kStreamingTokens = 64;

// Rows per task for one matrix: a multiple of the tile height. Streaming calls give each
// thread one contiguous slice (interleaved small chunks make the threads' prefetch streams run
// into each other's rows and cut the bandwidth by almost half); otherwise small enough to give
// every thread several.
int64_t rows_per_task(const cpu::MatmulKernel* k, int64_t rows, int64_t n_tokens, int n_threads) {
  const int64_t tr = k->tile_rows;
  if (n_tokens <= kStreamingTokens) return ((rows + n_threads - 1) / n_threads + tr - 1) / tr * tr;
  const int64_t chunk = tr * std::max<int64_t>(1, rows / (tr * 4 * n_threads));
  return std::min<int64_t>(chunk, tr * 16);
}

// Rows [r0, r1) of w for every token, in the loop order kStreamingTokens describes.
void run_rows(const cpu::MatmulKernel* k, const TensorView& w, const uint8_t* xa, size_t x_stride,
              int64_t n_tokens, float* out, int64_t r0, int64_t r1) {
  const int64_t rows = w.rows(), tr = k->tile_rows;
  auto tile = [&](int64_t r, int64_t t0) {
    cpu::TileArgs a;
    a.w = w.row(r);
    a.w_stride = w.row_stride();
    a.x = xa + t0 * x_stride;
    a.x_stride = x_stride;
    a.out = out + t0 * rows + r;
    a.out_stride = rows;
    a.cols = w.cols();
    a.prefetch = t0 == 0;
    k->tile(a, static_cast<int>(std::min<int64_t>(tr, r1 - r)),
            static_cast<int>(std::min<int64_t>(k->tile_tokens, n_tokens - t0)));
  };
  if (n_tokens <= kStreamingTokens) {
    for (int64_t r = r0; r < r1; r += tr)
      for (int64_t t0 = 0; t0 < n_tokens; t0 += k->tile_tokens) tile(r, t0);
  } else {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += k->tile_tokens)
      for (int64_t r = r0; r < r1; r += tr) tile(r, t0);
  }
}

const cpu::MatmulKernel* checked_kernel(const TensorView& w) {
  const cpu::MatmulKernel* k = cpu::find_kernel(w.dtype, active_isa());
  LOOM_CHECK(k != nullptr);
  LOOM_CHECK(w.cols() % dtype_info(w.dtype).block_size == 0);
  LOOM_CHECK(w.row_stride() * static_cast<uint64_t>(w.rows()) == w.nbytes);
  return k;
}

}  // namespace

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* out, ThreadPool* pool) {
  const MatmulTarget target{&w, out};
  matmul_multi(&target, 1, x, n_tokens, pool);
}

namespace {

// matmul_multi for kRows16-packed matrices (kernels/packed.h): tasks are ranges of 16-row
// groups, split and ordered as for the row kernels (kStreamingTokens).
void matmul_packed(const MatmulTarget* targets, int n, const float* x, int64_t n_tokens,
                   ThreadPool* pool) {
  const int64_t cols = targets[0].w->cols();
  // F16 takes the float rows as they are, BF16 bf16-rounded rows, the quantized types int8 rows.
  const Dtype wt = targets[0].w->dtype;
  size_t x_stride = cols * sizeof(float);
  const uint8_t* xa = reinterpret_cast<const uint8_t*>(x);
  if (wt == Dtype::kBF16) {
    x_stride = cpu::act_row_bytes(cpu::ActFormat::kBF16, cols);
    uint8_t* buf = t_act_scratch.get(x_stride * n_tokens);
    for_each_token(n_tokens, cols, pool, [&](int64_t t, int) {
      cpu::quantize_act_row(cpu::ActFormat::kBF16, x + t * cols, cols, buf + t * x_stride);
    });
    xa = buf;
  } else if (wt != Dtype::kF16) {
    x_stride = cpu::packed_act_row_bytes(cols);
    uint8_t* buf = t_act_scratch.get(x_stride * n_tokens);
    for_each_token(n_tokens, cols, pool, [&](int64_t t, int) {
      cpu::quantize_act_row_q8_32_avx512(x + t * cols, cols, buf + t * x_stride, false, true);
    });
    xa = buf;
  }
  const int n_threads = pool ? pool->size() : 1;
  const bool streaming = n_tokens <= kStreamingTokens;
  struct Slices {
    int64_t groups, per_task, first_task;
  };
  Slices slices[8];
  int64_t n_tasks = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t groups = (targets[i].w->rows() + kPackRows - 1) / kPackRows;
    const int64_t per = streaming
                            ? (groups + n_threads - 1) / n_threads
                            : std::max<int64_t>(1, std::min<int64_t>(4, groups / (4 * n_threads)));
    slices[i] = {groups, per, n_tasks};
    n_tasks += (groups + per - 1) / per;
  }
  auto run_task = [&](int64_t task, int) {
    int i = n - 1;
    while (slices[i].first_task > task) --i;
    const TensorView& w = *targets[i].w;
    const uint64_t group_bytes = PackedMatrix::group_bytes(w.dtype, cols);
    const int64_t rows = w.rows();
    const int64_t g0 = (task - slices[i].first_task) * slices[i].per_task;
    const int64_t g1 = std::min(slices[i].groups, g0 + slices[i].per_task);
    // One token tile (decode) reads one group at a time: a single linear weight stream
    // prefetches best (1-thread GEMV from DRAM 50 GB/s vs 24-32 with two groups interleaved).
    constexpr int64_t TT = cpu::kPackedTileTokens;
    const int64_t G = n_tokens <= TT ? 1 : cpu::kPackedTileGroups;
    const int64_t n_tiles = (n_tokens + TT - 1) / TT;
    auto tile = [&](int64_t g, int64_t t0, int64_t gstep) {
      cpu::PackedArgs a;
      a.w = static_cast<const uint8_t*>(w.data) + g * group_bytes;
      a.x = xa + t0 * x_stride;
      a.x_stride = x_stride;
      a.cols = cols;
      a.out = targets[i].out + t0 * rows + g * kPackRows;
      a.out_stride = rows;
      a.n_rows = static_cast<int>(std::min<int64_t>(gstep * kPackRows, rows - g * kPackRows));
      if (n_tiles == 1 || !streaming) {
        a.prefetch_ahead = t0 == 0 ? cpu::kPrefetchAheadBytes : 0;
      } else {  // each token tile prefetches its share of the next groups' records
        a.prefetch_ahead = static_cast<int64_t>(gstep * group_bytes);
        a.prefetch_part = static_cast<int>(t0 / TT);
        a.prefetch_parts = static_cast<int>(n_tiles);
      }
      cpu::packed_tile(w.dtype, a, static_cast<int>(std::min<int64_t>(TT, n_tokens - t0)));
    };
    if (streaming) {
      for (int64_t g = g0; g < g1; g += G)
        for (int64_t t0 = 0; t0 < n_tokens; t0 += TT) tile(g, t0, std::min<int64_t>(G, g1 - g));
    } else {
      for (int64_t t0 = 0; t0 < n_tokens; t0 += TT)
        for (int64_t g = g0; g < g1; g += G) tile(g, t0, std::min<int64_t>(G, g1 - g));
    }
  };
  if (pool && n_tasks > 1)
    pool->parallel_for(n_tasks, run_task);
  else
    for (int64_t t = 0; t < n_tasks; ++t) run_task(t, 0);
}

}  // namespace

void matmul_multi(const MatmulTarget* targets, int n, const float* x, int64_t n_tokens,
                  ThreadPool* pool) {
  if (n_tokens <= 0 || n <= 0) return;
  LOOM_CHECK(n <= 8);
  bool all_packed = true, any_packed = false;
  for (int i = 0; i < n; ++i) {
    const bool p = targets[i].w->layout == TensorLayout::kRows16;
    all_packed = all_packed && p;
    any_packed = any_packed || p;
  }
  // Packed F16 takes float activations, BF16 bf16 ones, the quantized types int8 ones.
  auto act_kind = [](Dtype t) { return t == Dtype::kF16 ? 0 : t == Dtype::kBF16 ? 1 : 2; };
  bool same_act = true;
  for (int i = 1; i < n; ++i)
    same_act = same_act && act_kind(targets[i].w->dtype) == act_kind(targets[0].w->dtype);
  if (all_packed && same_act) {
    for (int i = 1; i < n; ++i) LOOM_CHECK(targets[i].w->cols() == targets[0].w->cols());
    matmul_packed(targets, n, x, n_tokens, pool);
    return;
  }
  if (any_packed) {  // a mix of layouts or activation formats: each matrix on its own
    for (int i = 0; i < n; ++i) matmul_multi(&targets[i], 1, x, n_tokens, pool);
    return;
  }
  const int64_t cols = targets[0].w->cols();
  const cpu::MatmulKernel* k = checked_kernel(*targets[0].w);
  for (int i = 1; i < n; ++i) {
    LOOM_CHECK(targets[i].w->cols() == cols);
    // Matrices whose kernels want different activation formats cannot share them.
    if (checked_kernel(*targets[i].w)->act != k->act) {
      for (int j = 0; j < n; ++j) matmul_multi(&targets[j], 1, x, n_tokens, pool);
      return;
    }
  }
  size_t x_stride = 0;
  const uint8_t* xa = prepare_activations(k, x, cols, n_tokens, pool, &x_stride);

  // Tasks: row slices of every matrix, in matrix order, all handed to the pool at once.
  const int n_threads = pool ? pool->size() : 1;
  struct Slices {
    const cpu::MatmulKernel* k;
    int64_t per_task, first_task;
  };
  Slices slices[8];
  int64_t n_tasks = 0;
  for (int i = 0; i < n; ++i) {
    const TensorView& w = *targets[i].w;
    slices[i].k = checked_kernel(w);
    slices[i].per_task = rows_per_task(slices[i].k, w.rows(), n_tokens, n_threads);
    slices[i].first_task = n_tasks;
    n_tasks += (w.rows() + slices[i].per_task - 1) / slices[i].per_task;
  }
  auto run_task = [&](int64_t task, int) {
    int i = n - 1;
    while (slices[i].first_task > task) --i;
    const TensorView& w = *targets[i].w;
    const int64_t r0 = (task - slices[i].first_task) * slices[i].per_task;
    run_rows(slices[i].k, w, xa, x_stride, n_tokens, targets[i].out, r0,
             std::min(w.rows(), r0 + slices[i].per_task));
  };
  if (pool && n_tasks > 1)
    pool->parallel_for(n_tasks, run_task);
  else
    for (int64_t t = 0; t < n_tasks; ++t) run_task(t, 0);
}

}  // namespace loom::kernels
