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

// Runs the per-token pass (fill and quantization), in parallel when it pays for a hand-off
// (from a few rows on, as CpuModel::for_rows).
template <class F>
void for_each_token(int64_t n_tokens, int64_t cols, ThreadPool* pool, F&& quant) {
  if (pool && n_tokens > 1 && n_tokens * cols >= 8192)
    pool->parallel_for(n_tokens, quant);
  else
    for (int64_t t = 0; t < n_tokens; ++t) quant(t, 0);
}

// The activation rows a kernel reads: the float rows themselves, or rows of `stride` bytes in
// an ActFormat, or (kRows16-packed quantized matrices) PackedActRow rows.
struct ActRows {
  enum Kind { kFloat, kFormat, kPacked } kind;
  cpu::ActFormat format = cpu::ActFormat::kF32;  // kFormat
  size_t stride;
  bool per_256 = false;  // kPacked: with the per-256 part (a K-quant tile reads it)
};

ActRows act_rows_for(const cpu::MatmulKernel* k, int64_t cols) {
  if (k->act == cpu::ActFormat::kF32) return {ActRows::kFloat, k->act, cols * sizeof(float)};
  return {ActRows::kFormat, k->act, cpu::act_row_bytes(k->act, cols)};
}

// Packed F16 takes the float rows as they are, BF16 bf16-rounded rows, the quantized types
// PackedActRow rows.
ActRows packed_act_rows_for(Dtype w, int64_t cols) {
  if (w == Dtype::kF16) return {ActRows::kFloat, cpu::ActFormat::kF32, cols * sizeof(float)};
  if (w == Dtype::kBF16)
    return {ActRows::kFormat, cpu::ActFormat::kBF16,
            cpu::act_row_bytes(cpu::ActFormat::kBF16, cols)};
  return {ActRows::kPacked, cpu::ActFormat::kQ8_32, cpu::packed_act_row_bytes(cols)};
}

void quantize_row(const ActRows& a, const float* x, int64_t cols, uint8_t* dst) {
  const bool q8_32 = a.format == cpu::ActFormat::kQ8_32 || a.format == cpu::ActFormat::kQ8_32U;
  if (a.kind == ActRows::kPacked)
    cpu::quantize_act_row_q8_32_avx512(x, cols, dst, false, true, a.per_256);
  else if (q8_32 && active_isa() == Isa::kAvx512)
    cpu::quantize_act_row_q8_32_avx512(x, cols, dst, a.format == cpu::ActFormat::kQ8_32U);
  else
    cpu::quantize_act_row(a.format, x, cols, dst);
}

// The n_tokens activation rows as the kernels read them: each row filled (when fill is set)
// and quantized into scratch, in one pass; float rows are used in place.
const uint8_t* prepare_activations(const ActRows& a, float* x, int64_t cols, int64_t n_tokens,
                                   ThreadPool* pool, const RowFill* fill) {
  if (a.kind == ActRows::kFloat && !fill) return reinterpret_cast<const uint8_t*>(x);
  uint8_t* buf = a.kind == ActRows::kFloat ? nullptr : t_act_scratch.get(a.stride * n_tokens);
  for_each_token(n_tokens, cols, pool, [&](int64_t t, int) {
    float* row = x + t * cols;
    if (fill) (*fill)(t, row);
    if (buf) quantize_row(a, row, cols, buf + t * a.stride);
  });
  return buf ? buf : reinterpret_cast<const uint8_t*>(x);
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
  // These kernels prefetch on every vendor: they read a tile's rows as separate streams, which
  // the hardware prefetchers alone keep up with poorly (one-token Q4_1 GEMV from DRAM on the AMD
  // host: 9 GB/s without, 19 with; `loom_kernels_bench prefetch`), unlike the packed layout.
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

// Prefill (more than kStreamingTokens tokens): a task's groups stay in L2 while every token
// tile passes over them, and every task reads all the activation rows again, so tasks as large
// as L2 allows read them least. 4 groups a task (139 KiB at 2,048 Q8_0 columns) read 4,096
// rows' activations 96 times per 6,144-row matrix; 512 KiB a task (14 groups) 27 times:
// Q8_0 2048x6144 x4096 tokens, 2 threads, three alternating pairs 1,176 / 1,156 / 973 ->
// 1,218 / 1,239 / 1,126 GFLOP/s (LOOM_BENCH_GEMM=2048x6144x4096 loom_kernels_bench q8_0; more
// when another guest loaded the host's L3). Half of a 1 MiB L2, leaving room for the activation
// and output lines passing through.
constexpr uint64_t kPrefillTaskWeightBytes = 512 << 10;

// Prefill calls pass over the weights in blocks of this many tokens (a whole number of token
// tiles, of 6 tokens, of the per-256 K-quant tiles' 3 or of AMX's 16): every task of one block
// before any of the next, so the block's activation rows (1.2 MiB at 2,048 Q8_0 columns) are what
// all tasks share from L3 while each keeps its weights in L2. Without blocks a 4,096-token call
// re-read 9.4 MiB of activations per task, and Qwen3.5-2B Q8_0's pp4096 in one call ran 204-207
// tok/s against 221-233 with blocks of 516 (three alternating pairs).
constexpr int64_t kPrefillTokenBlock = 88 * cpu::kPackedTileTokens;  // 528
static_assert(kPrefillTokenBlock % cpu::kAmxTileTokens == 0);
static_assert(kPrefillTokenBlock % cpu::kPackedPer256TileTokens == 0);

// matmul_multi for kRows16-packed matrices (kernels/packed.h): tasks are ranges of 16-row
// groups, split and ordered as for the row kernels (kStreamingTokens).
void matmul_packed(const MatmulTarget* targets, int n, float* x, int64_t n_tokens, ThreadPool* pool,
                   const RowFill* fill) {
  const int64_t cols = targets[0].w->cols();
  ActRows act = packed_act_rows_for(targets[0].w->dtype, cols);
  for (int i = 0; i < n; ++i) act.per_256 = act.per_256 || cpu::reads_per_256(targets[i].w->dtype);
  const size_t x_stride = act.stride;
  const uint8_t* xa = prepare_activations(act, x, cols, n_tokens, pool, fill);
  const int n_threads = pool ? pool->size() : 1;
  const bool streaming = n_tokens <= kStreamingTokens;
  // A one-token GEMV (decode) streams at the vendor's distance (weight_prefetch_bytes: none on
  // AMD); tiles of more tokens compute long enough per byte that they keep prefetching
  // (qwen3moe-2b Q4_K_M x16, whose experts mostly get 2-3 tokens: 411-469 tok/s with it, 337
  // without, on the AMD host).
  const int64_t prefetch = n_tokens == 1 ? weight_prefetch_bytes() : cpu::kPrefetchAheadBytes;
  struct Slices {
    int64_t groups, per_task, first_task;
  };
  Slices slices[8];
  int64_t n_tasks = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t groups = (targets[i].w->rows() + kPackRows - 1) / kPackRows;
    int64_t per = (groups + n_threads - 1) / n_threads;
    if (!streaming) {
      // As many groups as fit kPrefillTaskWeightBytes, a whole number of two-group tiles, and
      // at least 4 tasks per thread.
      const int64_t fit = static_cast<int64_t>(
          kPrefillTaskWeightBytes / PackedMatrix::group_bytes(targets[i].w->dtype, cols));
      per = std::min<int64_t>(fit, groups / (4 * n_threads));
      per = std::max<int64_t>(1, per / cpu::kPackedTileGroups * cpu::kPackedTileGroups);
    }
    slices[i] = {groups, per, n_tasks};
    n_tasks += (groups + per - 1) / per;
  }
  // Tasks of token block b are [b * n_tasks, (b + 1) * n_tasks) (streaming calls: one block).
  const int64_t block_tokens = streaming ? n_tokens : kPrefillTokenBlock;
  const int64_t n_blocks = (n_tokens + block_tokens - 1) / block_tokens;
  auto run_task = [&](int64_t block_task, int) {
    const int64_t tok_begin = block_task / n_tasks * block_tokens;
    const int64_t tok_end = std::min(n_tokens, tok_begin + block_tokens);
    const int64_t task = block_task % n_tasks;
    int i = n - 1;
    while (slices[i].first_task > task) --i;
    const TensorView& w = *targets[i].w;
    const uint64_t group_bytes = PackedMatrix::group_bytes(w.dtype, cols);
    const int64_t rows = w.rows();
    const int64_t g0 = (task - slices[i].first_task) * slices[i].per_task;
    const int64_t g1 = std::min(slices[i].groups, g0 + slices[i].per_task);
    // One token tile (decode) reads one group at a time: a single linear weight stream
    // prefetches best (1-thread GEMV from DRAM 50 GB/s vs 24-32 with two groups interleaved).
    // K-quant tiles of 2-6 tokens (an expert's share of a batched MoE step) take two groups:
    // their per-sub-block epilogue is shared by more rows (qwen3moe-2b Q4_K_M tg128x16 +4-9%).
    const int64_t TT = cpu::packed_tile_tokens(w.dtype);
    const bool one_group = n_tokens == 1 || !packed_super_blocks(w.dtype);
    const int64_t G = n_tokens <= TT && one_group ? 1 : cpu::kPackedTileGroups;
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
        a.prefetch_ahead = t0 == tok_begin ? prefetch : 0;
      } else {  // each token tile prefetches its share of the next groups' records
        a.prefetch_ahead = static_cast<int64_t>(gstep * group_bytes);
        a.prefetch_part = static_cast<int>(t0 / TT);
        a.prefetch_parts = static_cast<int>(n_tiles);
      }
      // Not past the task's last group: those bytes belong to another thread's slice (read
      // already) or another matrix (an expert this step may not use). qwen3moe-2b Q4_K_M x16
      // +1.5-2%: a 16 KiB overshoot per expert matrix of 296 KiB is 5% more bytes.
      const int64_t left = static_cast<int64_t>((g1 - g - gstep) * group_bytes);
      a.prefetch_ahead = std::min(a.prefetch_ahead, left);
      cpu::packed_tile(w.dtype, a, static_cast<int>(std::min<int64_t>(TT, n_tokens - t0)));
    };
    if (streaming) {
      for (int64_t g = g0; g < g1; g += G)
        for (int64_t t0 = 0; t0 < n_tokens; t0 += TT) tile(g, t0, std::min<int64_t>(G, g1 - g));
    } else {
      for (int64_t t0 = tok_begin; t0 < tok_end; t0 += TT)
        for (int64_t g = g0; g < g1; g += G) tile(g, t0, std::min<int64_t>(G, g1 - g));
    }
  };
  const int64_t total_tasks = n_blocks * n_tasks;
  if (pool && total_tasks > 1)
    pool->parallel_for(total_tasks, run_task);
  else
    for (int64_t t = 0; t < total_tasks; ++t) run_task(t, 0);
}

void matmul_multi_impl(const MatmulTarget* targets, int n, float* x, int64_t n_tokens,
                       ThreadPool* pool, const RowFill* fill) {
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
    matmul_packed(targets, n, x, n_tokens, pool, fill);
    return;
  }
  const int64_t cols = targets[0].w->cols();
  // Matrices whose kernels want different activation formats cannot share them: the rows are
  // filled once and each matrix runs on its own.
  auto one_by_one = [&] {
    if (fill)
      prepare_activations({ActRows::kFloat, cpu::ActFormat::kF32, 0}, x, cols, n_tokens, pool,
                          fill);
    for (int i = 0; i < n; ++i) matmul_multi_impl(&targets[i], 1, x, n_tokens, pool, nullptr);
  };
  if (any_packed) return one_by_one();  // a mix of layouts or activation formats
  const cpu::MatmulKernel* k = checked_kernel(*targets[0].w);
  for (int i = 1; i < n; ++i) {
    LOOM_CHECK(targets[i].w->cols() == cols);
    if (checked_kernel(*targets[i].w)->act != k->act) return one_by_one();
  }
  const ActRows act = act_rows_for(k, cols);
  const size_t x_stride = act.stride;
  const uint8_t* xa = prepare_activations(act, x, cols, n_tokens, pool, fill);

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

}  // namespace

// Without a fill, x is only read (the const_casts below hand it to the shared implementation).
void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* out, ThreadPool* pool) {
  const MatmulTarget target{&w, out};
  matmul_multi_impl(&target, 1, const_cast<float*>(x), n_tokens, pool, nullptr);
}

void matmul(const TensorView& w, float* x, int64_t n_tokens, float* out, ThreadPool* pool,
            const RowFill& fill) {
  const MatmulTarget target{&w, out};
  matmul_multi_impl(&target, 1, x, n_tokens, pool, &fill);
}

void matmul_multi(const MatmulTarget* targets, int n, const float* x, int64_t n_tokens,
                  ThreadPool* pool) {
  matmul_multi_impl(targets, n, const_cast<float*>(x), n_tokens, pool, nullptr);
}

void matmul_multi(const MatmulTarget* targets, int n, float* x, int64_t n_tokens, ThreadPool* pool,
                  const RowFill& fill) {
  matmul_multi_impl(targets, n, x, n_tokens, pool, &fill);
}

}  // namespace loom::kernels
