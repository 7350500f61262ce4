// Kernel micro-benchmark (not a test): GEMV weight-read bandwidth (GB/s) and 512-token GEMM
// throughput (GFLOP/s) of kernels::matmul per weight dtype, on the active ISA (LOOM_ISA to
// override) and a pool of one thread per physical core (LOOM_BENCH_THREADS to override).
//   loom_kernels_bench [filter-substring]   (attn, attn-dram, attn-long, peak, experts, prefetch,
//   tiles, calls: below)
// Prints the best of several timed runs (see time_call); small shapes fit in cache, so their GB/s
// is cache, not DRAM, bandwidth.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "base/huge_buffer.h"
#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "kernels/quant.h"
#include "peak_bench.h"

using namespace loom;
using Clock = std::chrono::steady_clock;

namespace {

struct Matrix {
  TensorView view;
  std::vector<uint8_t> bytes;
};

// Quantizes 64 random rows and repeats them (quantizing 32M values per matrix is slow).
Matrix make_matrix(Dtype t, int64_t rows, int64_t cols) {
  Matrix m;
  const uint64_t rb = *row_bytes(t, cols);
  m.bytes.resize(rb * rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> src(cols);
  const int64_t distinct = std::min<int64_t>(rows, 64);
  for (int64_t r = 0; r < distinct; ++r) {
    for (auto& v : src) v = dist(rng);
    if (!kernels::quantize_row(t, src.data(), m.bytes.data() + r * rb, cols).is_ok()) std::abort();
  }
  for (int64_t r = distinct; r < rows; ++r)
    std::memcpy(m.bytes.data() + r * rb, m.bytes.data() + (r % distinct) * rb, rb);
  m.view.dtype = t;
  m.view.n_dims = 2;
  m.view.ne = {cols, rows, 1, 1};
  m.view.data = m.bytes.data();
  m.view.nbytes = m.bytes.size();
  return m;
}

// Seconds now: wall clock, or this thread's CPU time with LOOM_BENCH_CPU_TIME=1 (with one
// thread, that measures the kernel itself on a machine other jobs are also using).
double now_s() {
  static const bool cpu = std::getenv("LOOM_BENCH_CPU_TIME") != nullptr;
  if (cpu) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Seconds per call over `runs` timed batches of calls lasting >= ~50 ms each: the fastest
// batch, which on a machine shared with other jobs is the least disturbed one (the median
// moves with the load; LOOM_BENCH_MEDIAN=1 reports it instead).
template <class F>
double time_call(F&& f, int runs = 7) {
  f();
  double t0 = now_s();
  int reps = 0;
  while (now_s() - t0 < 0.05) {
    f();
    ++reps;
  }
  std::vector<double> v;
  for (int i = 0; i < runs; ++i) {
    t0 = now_s();
    for (int k = 0; k < reps; ++k) f();
    v.push_back((now_s() - t0) / reps);
  }
  std::sort(v.begin(), v.end());
  static const bool median = std::getenv("LOOM_BENCH_MEDIAN") != nullptr;
  return median ? v[v.size() / 2] : v.front();
}

// Attention of one KV head over a 512-token f16 cache in the CPU model's layout (K dim-major,
// blocks of 16, scattered): a prefill task (16 rows x 2 query heads, the model's
// attn_rows_per_task for GQA 2) and a decode task (2 query heads), one thread. GFLOP/s counts
// 4 * head_dim per (query, key): the QK dot and the V sum.
// One head's K and V of `tokens` random f16 rows in the CPU model's layout (K dim-major, V
// rows, blocks of 16 in a scattered order).
struct PagedKv {
  static constexpr int32_t kBlock = 16;
  std::vector<uint16_t> k, v;
  std::vector<int32_t> table;
  kernels::PagedHead kh{}, vh{};
  PagedKv(int64_t D, int32_t tokens, std::mt19937& rng) {
    const int32_t blocks = (tokens + kBlock - 1) / kBlock;
    k.resize(static_cast<size_t>(blocks) * kBlock * D);
    v.resize(k.size());
    std::normal_distribution<float> dist(0.f, 1.f);
    for (size_t i = 0; i < k.size(); ++i) {
      const float a = dist(rng), b = dist(rng);
      kernels::store_kv(Dtype::kF16, &a, &k[i], 1);
      kernels::store_kv(Dtype::kF16, &b, &v[i], 1);
    }
    table.resize(blocks);
    for (int32_t i = 0; i < blocks; ++i) table[i] = (i * 7 + 3) % blocks;
    const uint64_t block_bytes = kBlock * D * 2;
    kh = {reinterpret_cast<const uint8_t*>(k.data()),
          Dtype::kF16,
          table.data(),
          kBlock,
          block_bytes,
          2,
          kBlock * 2};
    vh = {reinterpret_cast<const uint8_t*>(v.data()),
          Dtype::kF16,
          table.data(),
          kBlock,
          block_bytes,
          static_cast<uint64_t>(D) * 2,
          0};
  }
};

// Attention of one prefill task of a long prompt in the CPU model's layout (K dim-major, V
// rows, f16, blocks of 16 scattered): `rows` consecutive tokens' `group` query heads each (the
// model's attn_rows_per_task x GQA group) over a cache `tokens` deep, one thread. The default
// is Qwen3.5-2B's (head_dim 256, GQA 8, 4 rows a task) halfway through a 4,096-token prompt.
//   loom_kernels_bench attn-long   (LOOM_BENCH_ATTN=HEAD_DIM,TOKENS,ROWS,GROUP to change)
void bench_attention_long() {
  int64_t D = 256;
  int32_t tokens = 2048, rows = 4, group = 8;
  if (const char* e = std::getenv("LOOM_BENCH_ATTN")) {
    long long d = 0;
    if (std::sscanf(e, "%lld,%d,%d,%d", &d, &tokens, &rows, &group) != 4 || d % 16 || d > 256 ||
        tokens < rows || rows < 1 || group < 1) {
      std::fprintf(stderr, "LOOM_BENCH_ATTN must be HEAD_DIM,TOKENS,ROWS,GROUP\n");
      std::exit(1);
    }
    D = d;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 1.f);
  const PagedKv kv(D, tokens, rng);
  const kernels::PagedHead &kh = kv.kh, &vh = kv.vh;
  const int n_q = rows * group;
  std::vector<float> q(n_q * D), out(n_q * D);
  for (auto& x : q) x = 0.1f * dist(rng);
  std::vector<kernels::AttentionQuery> qs;
  double pairs = 0;
  for (int i = 0; i < n_q; ++i) {  // rows in order, each row's query heads together
    const int32_t n_kv = tokens - rows + 1 + i / group;
    qs.push_back({&q[i * D], &out[i * D], n_kv});
    pairs += n_kv;
  }
  std::vector<float> scratch(kernels::attention_scratch_floats(n_q, tokens, D));
  const double t = time_call(
      [&] { kernels::attention_multi(qs.data(), n_q, kh, vh, D, 0.088f, scratch.data()); });
  std::printf(
      "attn  prefill %d rows x %d heads x %d keys, head_dim %lld  %8.1f us  %6.1f GFLOP/s "
      "(1 thread)\n",
      rows, group, tokens, static_cast<long long>(D), t * 1e6, 4.0 * D * pairs / t / 1e9);
}

void bench_attention() {
  constexpr int64_t D = 128;
  constexpr int32_t kTokens = 512;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 1.f);
  const PagedKv kv(D, kTokens, rng);
  const kernels::PagedHead &kh = kv.kh, &vh = kv.vh;
  for (const int rows : {16, 1}) {
    const int n_q = 2 * rows;
    std::vector<float> q(n_q * D), out(n_q * D);
    for (auto& x : q) x = 0.1f * dist(rng);
    std::vector<kernels::AttentionQuery> qs;
    double pairs = 0;
    for (int i = 0; i < n_q; ++i) {
      const int32_t n_kv = kTokens - rows + 1 + i / 2;
      qs.push_back({&q[i * D], &out[i * D], n_kv});
      pairs += n_kv;
    }
    std::vector<float> scratch(kernels::attention_scratch_floats(n_q, kTokens, D));
    const double t = time_call(
        [&] { kernels::attention_multi(qs.data(), n_q, kh, vh, D, 0.088f, scratch.data()); });
    std::printf("attn  %-7s %2d queries x %d keys  %8.1f us  %6.1f GFLOP/s (1 thread)\n",
                rows > 1 ? "prefill" : "decode", n_q, kTokens, t * 1e6, 4.0 * D * pairs / t / 1e9);
  }
  // A decode step's task in the model: one sequence's 16 query heads over its 8 KV heads
  // (kernels::attention_multi_heads), short contexts, K/V in cache.
  for (const int32_t n_kv : {32, 64}) {
    constexpr int kHeads = 8, n_q = 16;
    std::vector<float> q(n_q * D), out(n_q * D);
    for (auto& x : q) x = 0.1f * dist(rng);
    std::vector<kernels::AttentionQuery> qs;
    for (int i = 0; i < n_q; ++i) qs.push_back({&q[i * D], &out[i * D], n_kv});
    std::vector<kernels::PagedHead> khs(kHeads, kh), vhs(kHeads, vh);
    std::vector<float> scratch(kernels::attention_scratch_floats(n_q, n_kv, D));
    const double t = time_call([&] {
      kernels::attention_multi_heads(qs.data(), n_q, khs.data(), vhs.data(), kHeads, D, 0.088f,
                                     scratch.data());
    });
    std::printf("attn  decode 16 queries x 8 heads x %d keys  %6.2f us per head (1 thread)\n", n_kv,
                t * 1e6 / kHeads);
  }
}

// Decode attention with the cache out of every cache, laid out as the model's (per block, the
// 8 KV heads' K then V spans adjacent): 512 sequences of 128 tokens (256 MiB of f16 K/V), each
// attended once by 2 query heads per KV head, on one thread. Per head: one call per KV head,
// each prefetching the next (the model's prefill-style tasks); all heads: one
// attention_multi_heads call per sequence (the model's decode tasks).
void bench_attention_dram() {
  constexpr int64_t D = 128;
  constexpr int kHeads = 8, kQueries = 2 * kHeads;
  constexpr int32_t kTokens = 128, kBlock = 16, kBlocksPer = kTokens / kBlock, kSeqs = 512;
  const uint64_t head_bytes = kBlock * D * 2, block_bytes = kHeads * head_bytes;
  const uint64_t bytes = uint64_t{kSeqs} * kBlocksPer * block_bytes;
  HugeBuffer k = allocate_huge(bytes, true), v = allocate_huge(bytes, true);
  for (uint64_t i = 0; i < bytes; ++i) {
    k.get()[i] = i % 2 ? 0x3c : static_cast<uint8_t>(i * 7);  // f16 values near 1
    v.get()[i] = i % 2 ? 0x3c : static_cast<uint8_t>(i * 13);
  }
  std::vector<int32_t> table(kSeqs * kBlocksPer);
  for (int32_t i = 0; i < kSeqs * kBlocksPer; ++i) table[i] = (i * 7919) % (kSeqs * kBlocksPer);
  std::vector<float> q(kQueries * D, 0.01f), out(kQueries * D);
  std::vector<float> scratch(kernels::attention_scratch_floats(kQueries, kTokens, D));
  auto head = [&](const HugeBuffer& buf, int s, int h, bool is_k) {
    return kernels::PagedHead{buf.get() + h * head_bytes,
                              Dtype::kF16,
                              &table[s * kBlocksPer],
                              kBlock,
                              block_bytes,
                              is_k ? 2u : uint64_t{D * 2},
                              is_k ? uint64_t{kBlock * 2} : 0};
  };
  std::vector<kernels::AttentionQuery> qs(kQueries);
  for (int i = 0; i < kQueries; ++i) qs[i] = {&q[i * D], &out[i * D], kTokens};
  for (const bool all_heads : {false, true}) {
    const double t = time_call(
        [&] {
          for (int s = 0; s < kSeqs; ++s) {
            kernels::PagedHead kh[kHeads], vh[kHeads];
            for (int h = 0; h < kHeads; ++h) {
              kh[h] = head(k, s, h, true);
              vh[h] = head(v, s, h, false);
            }
            if (all_heads) {
              kernels::attention_multi_heads(qs.data(), kQueries, kh, vh, kHeads, D, 0.088f,
                                             scratch.data());
              continue;
            }
            for (int h = 0; h < kHeads; ++h) {
              const int nh = h + 1 < kHeads ? h + 1 : 0, ns = h + 1 < kHeads ? s : s + 1;
              if (ns < kSeqs)
                kernels::prefetch_attention(head(k, ns, nh, true), head(v, ns, nh, false), kTokens,
                                            D);
              kernels::attention_multi(&qs[2 * h], 2, kh[h], vh[h], D, 0.088f, scratch.data());
            }
          }
        },
        3);
    std::printf("attn  decode from DRAM, %s: %.2f us per (sequence, head), %.1f GB/s (1 thread)\n",
                all_heads ? "all heads per call" : "one head per call", t / (kSeqs * kHeads) * 1e6,
                2.0 * bytes / t / 1e9);
  }
}

// A MoE step's expert matmuls against one dense matrix of the same bytes, both from DRAM
// (cycling through 2,048 copies of an expert's 1024 x 512 matrix, 590 MiB in Q4_K): 8 tasks
// of 3 single-threaded matmuls at random places (how the CPU MoE runs 8 experts' gate, up and
// down) against one 24-matrix GEMV split over the pool, for 1-3 tokens.
//   loom_kernels_bench experts   (LOOM_BENCH_EXPERT_TYPE=q6_k & co. for another type)
void bench_experts(ThreadPool& pool) {
  const int64_t cols = 1024, rows = 512;
  const int n_copies = 2048, per_step = 24;
  const char* type_name = std::getenv("LOOM_BENCH_EXPERT_TYPE");
  const auto type = parse_dtype(type_name ? type_name : "q4_k");
  if (!type) {
    std::fprintf(stderr, "LOOM_BENCH_EXPERT_TYPE: unknown type\n");
    return;
  }
  Matrix m = make_matrix(*type, rows, cols);
  const kernels::PackedMatrix packed = kernels::PackedMatrix::pack_rows16(m.view);
  const TensorView one = packed.view();
  const uint64_t bytes = one.nbytes;
  HugeBuffer copies = allocate_huge(bytes * n_copies, /*commit=*/true);
  for (int i = 0; i < n_copies; ++i) std::memcpy(copies.get() + i * bytes, one.data, bytes);
  auto matrices_at = [&](int first, int n) {  // n consecutive copies as one matrix
    TensorView v = one;
    v.data = copies.get() + first * bytes;
    v.ne[1] = rows * n;
    v.nbytes = bytes * n;
    return v;
  };
  std::vector<float> x(16 * cols), out(static_cast<size_t>(pool.size()) * 16 * rows * per_step);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 7);
  std::mt19937 rng(3);
  std::vector<int> ids(per_step);
  for (int tokens = 1; tokens <= 3; ++tokens) {
    const double experts = time_call([&] {
      for (int& id : ids) id = static_cast<int>(rng() % n_copies);
      pool.parallel_for(per_step / 3, [&](int64_t task, int thread) {
        for (int k = 0; k < 3; ++k)
          kernels::matmul(matrices_at(ids[task * 3 + k], 1), x.data(), tokens,
                          out.data() + static_cast<size_t>(thread) * 16 * rows * per_step, nullptr);
      });
    });
    int next = 0;
    const double dense = time_call([&] {
      kernels::matmul(matrices_at(next, per_step), x.data(), tokens, out.data(), &pool);
      next = (next + per_step) % (n_copies - per_step);
    });
    std::printf(
        "%-5s experts x%d tokens: 8 tasks x 3 matrices %7.1f us %5.1f GB/s; one matrix "
        "%7.1f us %5.1f GB/s\n",
        std::string(dtype_name(*type)).c_str(), tokens, experts * 1e6,
        bytes * per_step / experts / 1e9, dense * 1e6, bytes * per_step / dense / 1e9);
  }
}

// Two-thread (the pool's) streaming read of a huge-page buffer, as the weights are held: the
// bandwidth a round of a DRAM benchmark is compared with, GB/s.
class StreamingRead {
 public:
  StreamingRead(ThreadPool& pool, int64_t bytes)
      : pool_(pool),
        words_(bytes / 8),
        buf_(allocate_huge(bytes, /*commit=*/true)),
        sinks_(static_cast<size_t>(pool.size()) * 8) {
    auto* w = reinterpret_cast<uint64_t*>(buf_.get());
    for (int64_t i = 0; i < words_; ++i) w[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  }
  double gbs() {
    const uint64_t* w = reinterpret_cast<const uint64_t*>(buf_.get());
    const double t0 = now_s();
    pool_.parallel_for(pool_.size(), [&](int64_t task, int) {
      const int64_t b = words_ * task / pool_.size(), e = words_ * (task + 1) / pool_.size();
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int64_t i = b; i + 8 <= e; i += 8) {
        a0 += w[i] + w[i + 4];
        a1 += w[i + 1] + w[i + 5];
        a2 += w[i + 2] + w[i + 6];
        a3 += w[i + 3] + w[i + 7];
      }
      sinks_[task * 8] += a0 ^ a1 ^ a2 ^ a3;
    });
    return words_ * 8.0 / (now_s() - t0) / 1e9;
  }

 private:
  ThreadPool& pool_;
  int64_t words_;
  HugeBuffer buf_;
  std::vector<uint64_t> sinks_;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The rounds whose streaming read was fast (>= 45 GB/s: this host's bursts), or the others; a
// line saying how many and their read's median.
std::vector<int> rounds_where(const std::vector<double>& reads, bool fast) {
  std::vector<int> picked;
  std::vector<double> picked_reads;
  for (int r = 0; r < static_cast<int>(reads.size()); ++r) {
    if ((reads[r] >= 45.0) != fast) continue;
    picked.push_back(r);
    picked_reads.push_back(reads[r]);
  }
  std::printf("%s rounds (%zu of %zu): streaming read %.1f GB/s\n", fast ? "fast" : "slow",
              picked.size(), reads.size(), median_of(picked_reads));
  return picked;
}

// One-token GEMVs from DRAM with and without software prefetch of the weights, alternating
// many times in one process (the host's bandwidth swings between minutes; each round measures
// both, and a plain streaming read, within ~0.2 s): ~1 GiB of packed Q8_0 and of Q4_K, and 8
// experts' gate, up and down as the MoE FFN runs them (8 single-threaded tasks of 3 matrices
// at random places in 590 MiB of Q4_K), and ~0.6 GiB of Q4_1 in the file's row layout (not
// packed: the row kernels' own prefetch). Medians over the rounds whose streaming read was fast
// (>= 45 GB/s) and slow, GB/s. LOOM_BENCH_TOKENS=T: the Q8_0, Q4_K and Q4_1 GEMVs for T tokens
// at once (5: a speculative verify step's shape; its tile computes 5x while the weights stream).
//   loom_kernels_bench prefetch     (LOOM_BENCH_ROUNDS=N: rounds, default 200)
void bench_prefetch(ThreadPool& pool) {
  const int64_t cols = 1024, rows = 960000;
  struct Big {
    HugeBuffer buf;
    TensorView w;
  };
  auto make = [&](Dtype t, int64_t n_rows) {
    Matrix m = make_matrix(t, 64, cols);
    const kernels::PackedMatrix packed = kernels::PackedMatrix::pack_rows16(m.view);
    const TensorView one = packed.view();
    Big b;
    b.w = one;
    b.w.ne[1] = n_rows;
    b.w.nbytes = one.nbytes * static_cast<uint64_t>(n_rows / 64);
    b.buf = allocate_huge(b.w.nbytes, /*commit=*/true);
    for (int64_t i = 0; i < n_rows / 64; ++i)
      std::memcpy(b.buf.get() + i * one.nbytes, one.data, one.nbytes);
    b.w.data = b.buf.get();
    return b;
  };
  Big q8 = make(Dtype::kQ8_0, rows), q4k = make(Dtype::kQ4_K, rows);
  // Q4_1 is not packed: the row-layout kernels, with their own prefetch distances.
  Matrix q41_rows = make_matrix(Dtype::kQ4_1, 64, cols);
  Big q41;
  q41.w = q41_rows.view;
  q41.w.ne[1] = rows;
  q41.w.nbytes = q41_rows.view.nbytes * static_cast<uint64_t>(rows / 64);
  q41.buf = allocate_huge(q41.w.nbytes, /*commit=*/true);
  for (int64_t i = 0; i < rows / 64; ++i)
    std::memcpy(q41.buf.get() + i * q41_rows.view.nbytes, q41_rows.view.data, q41_rows.view.nbytes);
  q41.w.data = q41.buf.get();
  Big experts = make(Dtype::kQ4_K, 512 * 2048);  // 2,048 expert matrices of 512 x 1024
  const uint64_t expert_bytes = experts.w.nbytes / 2048;
  const char* tokens_env = std::getenv("LOOM_BENCH_TOKENS");
  const int64_t nt = tokens_env ? std::clamp<int64_t>(std::atoll(tokens_env), 1, 64) : 1;
  std::vector<float> x(nt * cols, 0.25f), out(static_cast<size_t>(nt * rows));
  std::vector<float> expert_out(static_cast<size_t>(pool.size()) * 512);
  StreamingRead stream(pool, int64_t{1} << 30);
  auto seconds = [](auto&& f) {
    const double t0 = now_s();
    f();
    return now_s() - t0;
  };
  auto gemv = [&](const Big& b) {
    return b.w.nbytes / seconds([&] { kernels::matmul(b.w, x.data(), nt, out.data(), &pool); }) /
           1e9;
  };
  std::mt19937 rng(5);
  auto moe = [&] {
    int ids[24];
    for (int& id : ids) id = static_cast<int>(rng() % 2048);
    return 24.0 * expert_bytes / seconds([&] {
             pool.parallel_for(8, [&](int64_t task, int thread) {
               for (int k = 0; k < 3; ++k) {
                 TensorView v = experts.w;
                 v.ne[1] = 512;
                 v.nbytes = expert_bytes;
                 v.data = experts.buf.get() + ids[task * 3 + k] * expert_bytes;
                 kernels::matmul(v, x.data(), 1, expert_out.data() + thread * 512, nullptr);
               }
             });
           }) /
           1e9;
  };
  const char* env = std::getenv("LOOM_BENCH_ROUNDS");
  const int rounds = env ? std::max(1, std::atoi(env)) : 200;
  const int64_t settings[] = {0, kernels::cpu::kPrefetchAheadBytes};
  const int64_t before = kernels::weight_prefetch_bytes();
  // [setting][what]: q8, q4k, experts, q4_1 rows; stream per round.
  std::vector<double> got[2][4], streams;
  for (int r = 0; r < rounds; ++r) {
    streams.push_back(stream.gbs());
    for (int i = 0; i < 2; ++i) {
      kernels::set_weight_prefetch_bytes(settings[(i + r) % 2]);  // alternate which goes first
      const int s = (i + r) % 2;
      got[s][0].push_back(gemv(q8));
      got[s][1].push_back(gemv(q4k));
      got[s][2].push_back(moe());
      got[s][3].push_back(gemv(q41));
    }
  }
  kernels::set_weight_prefetch_bytes(before);
  const auto median = median_of;
  for (const bool fast : {true, false}) {
    std::vector<double> sel[2][4];
    for (const int r : rounds_where(streams, fast))
      for (int s = 0; s < 2; ++s)
        for (int w = 0; w < 4; ++w) sel[s][w].push_back(got[s][w][r]);
    for (int s = 0; s < 2; ++s)
      std::printf(
          "  prefetch %5lld B: q8_0 gemv x%lld %.1f, q4_k gemv x%lld %.1f, 8 experts q4_k %.1f, "
          "q4_1 (rows) gemv x%lld %.1f GB/s\n",
          static_cast<long long>(settings[s]), static_cast<long long>(nt), median(sel[s][0]),
          static_cast<long long>(nt), median(sel[s][1]), median(sel[s][2]),
          static_cast<long long>(nt), median(sel[s][3]));
  }
}

// One-token packed Q4_K GEMVs on the pool: what a call costs beyond its bytes. From DRAM, each
// call a distinct matrix (copies filling ~400 MB of huge pages) of 0.3, 1.2 and 9.7 MB (512,
// 2,048 and 16,384 rows x 1,024: an expert matrix, a small model's qkv, a large FFN), each
// size's calls timed between two streaming reads, round by round: medians of the calls' share
// of the read over the rounds whose read was fast (>= 45 GB/s) and slow, and of the time a call
// takes beyond its bytes at that read's speed. Then the same matrices hot (one matrix again and
// again: from L2 for 0.3 and 1.2 MB) on the pool and on one thread, and a 16-row one (L1): the
// fixed work of a call, and the tile's speed when its lines are in cache.
//   loom_kernels_bench calls     (LOOM_BENCH_ROUNDS=N: rounds, default 150)
void bench_calls(ThreadPool& pool) {
  const int64_t cols = 1024;
  const int64_t sizes[] = {512, 2048, 16384};
  struct Copies {
    kernels::PackedMatrix packed;
    HugeBuffer buf;
    int n = 0;
    TensorView at(int i) const {
      TensorView v = packed.view();
      v.data = buf.get() + static_cast<uint64_t>(i) * v.nbytes;
      return v;
    }
  };
  Copies sets[3];
  for (int k = 0; k < 3; ++k) {
    sets[k].packed =
        kernels::PackedMatrix::pack_rows16(make_matrix(Dtype::kQ4_K, sizes[k], cols).view);
    const uint64_t bytes = sets[k].packed.view().nbytes;
    sets[k].n = static_cast<int>(400e6 / bytes);
    sets[k].buf = allocate_huge(bytes * sets[k].n, /*commit=*/true);
    for (int i = 0; i < sets[k].n; ++i)
      std::memcpy(sets[k].buf.get() + i * bytes, sets[k].packed.view().data, bytes);
  }
  std::vector<float> x(cols, 0.25f), out(16384);
  StreamingRead stream(pool, int64_t{256} << 20);
  const char* env = std::getenv("LOOM_BENCH_ROUNDS");
  const int rounds = env ? std::max(1, std::atoi(env)) : 150;
  int next[3] = {0, 0, 0};
  std::vector<double> reads, share[3], beyond[3];  // per round
  for (int r = 0; r < rounds; ++r) {
    const double before = stream.gbs();
    double per_call[3];
    for (int k = 0; k < 3; ++k) {
      const uint64_t bytes = sets[k].packed.view().nbytes;
      const int calls = std::max<int>(2, static_cast<int>(20e6 / bytes));
      const double t0 = now_s();
      for (int c = 0; c < calls; ++c) {
        kernels::matmul(sets[k].at(next[k]), x.data(), 1, out.data(), &pool);
        next[k] = (next[k] + 1) % sets[k].n;
      }
      per_call[k] = (now_s() - t0) / calls;
    }
    const double read = (before + stream.gbs()) / 2;
    reads.push_back(read);
    for (int k = 0; k < 3; ++k) {
      const double bytes = static_cast<double>(sets[k].packed.view().nbytes);
      share[k].push_back(bytes / per_call[k] / (read * 1e9));
      beyond[k].push_back(per_call[k] - bytes / (read * 1e9));
    }
  }
  for (const bool fast : {true, false}) {
    std::vector<double> sel_share[3], sel_beyond[3];
    for (const int r : rounds_where(reads, fast))
      for (int k = 0; k < 3; ++k) {
        sel_share[k].push_back(share[k][r]);
        sel_beyond[k].push_back(beyond[k][r]);
      }
    for (int k = 0; k < 3; ++k)
      std::printf(
          "  q4_k %5lld x %lld (%.2f MB) from DRAM: %3.0f%% of the read, %.1f us a call beyond its "
          "bytes\n",
          static_cast<long long>(sizes[k]), static_cast<long long>(cols),
          sets[k].packed.view().nbytes / 1e6, 100 * median_of(sel_share[k]),
          1e6 * median_of(sel_beyond[k]));
  }
  const kernels::PackedMatrix tiny =
      kernels::PackedMatrix::pack_rows16(make_matrix(Dtype::kQ4_K, 16, cols).view);
  for (int k = -1; k < 3; ++k) {
    const TensorView v = k < 0 ? tiny.view() : sets[k].packed.view();
    const double on_pool = time_call([&] { kernels::matmul(v, x.data(), 1, out.data(), &pool); });
    const double alone = time_call([&] { kernels::matmul(v, x.data(), 1, out.data(), nullptr); });
    std::printf(
        "  q4_k %5lld x %lld hot: %.2f us a call on the pool (%.1f GB/s), %.2f us on one thread "
        "(%.1f GB/s)\n",
        static_cast<long long>(v.rows()), static_cast<long long>(cols), on_pool * 1e6,
        v.nbytes / on_pool / 1e9, alone * 1e6, v.nbytes / alone / 1e9);
  }
}

// One packed tile from L1, one thread: for each packable quantized type, ns per 32-row tile
// and 256 columns (two 16-row groups) at every token count the tile takes, and per token.
// The tiles' own cost without DRAM, the pool or the activation quantization (compare types or
// two builds: a change to a tile shows here first).
//   loom_kernels_bench tiles
void bench_tiles() {
  const int64_t cols = 1024, rows = 32;
  for (Dtype t : {Dtype::kQ8_0, Dtype::kQ4_0, Dtype::kMXFP4, Dtype::kIQ4_NL, Dtype::kIQ4_XS,
                  Dtype::kQ2_K, Dtype::kQ3_K, Dtype::kQ4_K, Dtype::kQ5_K, Dtype::kQ6_K}) {
    Matrix m = make_matrix(t, rows, cols);
    if (!kernels::packable(m.view)) continue;
    const kernels::PackedMatrix packed = kernels::PackedMatrix::pack_rows16(m.view);
    const int max_tokens = kernels::cpu::packed_tile_tokens(t);
    const size_t stride = kernels::cpu::packed_act_row_bytes(cols);
    std::vector<uint8_t> act(stride * max_tokens);
    std::mt19937 rng(4);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> x(cols);
    for (int tok = 0; tok < max_tokens; ++tok) {
      for (auto& v : x) v = dist(rng);
      kernels::cpu::quantize_act_row_q8_32_avx512(x.data(), cols, act.data() + tok * stride, false,
                                                  true);
    }
    std::vector<float> out(max_tokens * rows);
    kernels::cpu::PackedArgs a;
    a.w = static_cast<const uint8_t*>(packed.view().data);
    a.x = act.data();
    a.x_stride = stride;
    a.cols = cols;
    a.out = out.data();
    a.out_stride = rows;
    a.n_rows = rows;
    std::printf("%-6s tile of 32 rows, ns per 256 columns (per token):", dtype_name(t).data());
    for (int nt = 1; nt <= max_tokens; ++nt) {
      const double s = time_call([&] { kernels::cpu::packed_tile(t, a, nt); }, 9);
      const double ns = s * 1e9 / (cols / 256);
      std::printf("  x%d %.1f (%.1f)", nt, ns, ns / nt);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string filter = argc > 1 ? argv[1] : "";
  const char* th = std::getenv("LOOM_BENCH_THREADS");
  ThreadPool pool(th ? std::atoi(th) : 0);
  std::printf("isa=%s threads=%d clock=%s\n", kernels::kernels_name().c_str(), pool.size(),
              std::getenv("LOOM_BENCH_CPU_TIME") ? "thread-cpu" : "wall");
  if (filter.empty() || filter == "attn") bench_attention();
  if (filter == "attn-dram") bench_attention_dram();
  if (filter == "attn-long") bench_attention_long();
  if (filter == "peak") bench::print_peak(pool);
  if (filter == "experts") {
    bench_experts(pool);
    return 0;
  }
  if (filter == "prefetch") {
    bench_prefetch(pool);
    return 0;
  }
  if (filter == "tiles") {
    bench_tiles();
    return 0;
  }
  if (filter == "calls") {
    bench_calls(pool);
    return 0;
  }
  const Dtype dtypes[] = {Dtype::kF32,    Dtype::kF16,   Dtype::kBF16,  Dtype::kQ8_0,
                          Dtype::kQ4_0,   Dtype::kQ2_K,  Dtype::kQ3_K,  Dtype::kQ4_K,
                          Dtype::kQ5_K,   Dtype::kQ6_K,  Dtype::kMXFP4, Dtype::kIQ4_NL,
                          Dtype::kIQ4_XS, Dtype::kTQ1_0, Dtype::kTQ2_0};
  struct Shape {
    int64_t cols, rows;
  };
  // LOOM_BENCH_DRAM=1: one 1024 x 128000 matrix instead (256 MiB in F16: out of every cache).
  const bool dram = std::getenv("LOOM_BENCH_DRAM") != nullptr;
  const std::vector<Shape> shapes =
      dram ? std::vector<Shape>{{1024, 128000}}
           : std::vector<Shape>{
                 {1024, 3072}, {3072, 1024}, {1024, 32000}, {1024, 1024}, {1024, 512}};
  // LOOM_BENCH_GEMM=COLSxROWSxTOKENS: that one GEMM only (a model's prefill shape), per dtype.
  if (const char* g = std::getenv("LOOM_BENCH_GEMM")) {
    long long cols = 0, rows = 0, nt = 0;
    if (std::sscanf(g, "%lldx%lldx%lld", &cols, &rows, &nt) != 3 || cols % 256 || rows <= 0 ||
        nt <= 0) {
      std::fprintf(stderr, "LOOM_BENCH_GEMM must be COLSxROWSxTOKENS, COLS a multiple of 256\n");
      return 1;
    }
    for (Dtype t : dtypes) {
      const std::string name(dtype_name(t));
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      Matrix m = make_matrix(t, rows, cols);
      kernels::PackedMatrix packed;  // as below: LOOM_BENCH_ROWS=1 keeps the file's layout
      if (kernels::packable(m.view) && !std::getenv("LOOM_BENCH_ROWS")) {
        packed = kernels::PackedMatrix::pack_rows16(m.view);
        m.view = packed.view();
      }
      std::vector<float> x(nt * cols), out(nt * rows);
      std::mt19937 rng(2);
      std::normal_distribution<float> dist(0.f, 1.f);
      for (auto& v : x) v = dist(rng);
      const double gemm =
          time_call([&] { kernels::matmul(m.view, x.data(), nt, out.data(), &pool); }, 3);
      std::printf("%-5s gemm %5lldx%-6lld x%lld tokens %8.2f ms  %6.1f GFLOP/s\n", name.c_str(),
                  cols, rows, nt, gemm * 1e3, 2.0 * rows * cols * nt / gemm / 1e9);
    }
    return 0;
  }
  for (Dtype t : dtypes) {
    const std::string name(dtype_name(t));
    if (filter.rfind("attn", 0) == 0 || filter == "peak" ||
        (!filter.empty() && name.find(filter) == std::string::npos))
      continue;
    for (const Shape& s : shapes) {
      Matrix m = make_matrix(t, s.rows, s.cols);
      // What the model runs: packable types repacked (kernels/packed.h) unless LOOM_BENCH_ROWS=1.
      kernels::PackedMatrix packed;
      const TensorView file_view = m.view;
      if (kernels::packable(m.view) && !std::getenv("LOOM_BENCH_ROWS")) {
        packed = kernels::PackedMatrix::pack_rows16(m.view);
        m.view = packed.view();
      }
      std::vector<float> x(512 * s.cols), out(512 * s.rows);
      std::mt19937 rng(2);
      std::normal_distribution<float> dist(0.f, 1.f);
      for (auto& v : x) v = dist(rng);
      const double gemv =
          time_call([&] { kernels::matmul(m.view, x.data(), 1, out.data(), &pool); });
      std::printf("%-5s gemv %5lldx%-6lld %8.1f us  %6.1f GB/s\n", name.c_str(), (long long)s.cols,
                  (long long)s.rows, gemv * 1e6, m.bytes.size() / gemv / 1e9);
      // LOOM_BENCH_COLD=1: batched decode as a model runs it, cycling through 32 copies of the
      // matrix (weights from DRAM at every call, as the layers of a step).
      if (std::getenv("LOOM_BENCH_COLD") && packed.view().data != nullptr) {
        std::vector<kernels::PackedMatrix> copies;
        for (int c = 0; c < 32; ++c)
          copies.push_back(kernels::PackedMatrix::pack_rows16(file_view));
        size_t next = 0;
        const double cold1 = time_call([&] {
          kernels::matmul(copies[next].view(), x.data(), 1, out.data(), &pool);
          next = (next + 1) % copies.size();
        });
        std::printf("%-5s cold %5lldx%-6lld x1 token %8.3f ms  %6.1f GB/s\n", name.c_str(),
                    (long long)s.cols, (long long)s.rows, cold1 * 1e3, m.view.nbytes / cold1 / 1e9);
        // LOOM_BENCH_COLD_TOKENS=N: that many tokens instead of 16 (5: a speculative verify).
        const char* ct = std::getenv("LOOM_BENCH_COLD_TOKENS");
        const int64_t nt = ct ? std::clamp<int64_t>(std::atoll(ct), 1, 512) : 16;
        const double cold = time_call([&] {
          kernels::matmul(copies[next].view(), x.data(), nt, out.data(), &pool);
          next = (next + 1) % copies.size();
        });
        std::printf("%-5s cold %5lldx%-6lld x%lld tokens %8.3f ms  %6.1f GFLOP/s  %6.1f GB/s\n",
                    name.c_str(), (long long)s.cols, (long long)s.rows, (long long)nt, cold * 1e3,
                    2.0 * s.rows * s.cols * nt / cold / 1e9, m.view.nbytes / cold / 1e9);
      }
      if (s.rows == 3072 || std::getenv("LOOM_BENCH_ALL_GEMM")) {
        for (const int64_t nt : {16, 512}) {  // batched decode, prefill
          const double gemm =
              time_call([&] { kernels::matmul(m.view, x.data(), nt, out.data(), &pool); }, 3);
          std::printf("%-5s gemm %5lldx%-6lld x%lld tokens %8.2f ms  %6.1f GFLOP/s\n", name.c_str(),
                      (long long)s.cols, (long long)s.rows, (long long)nt, gemm * 1e3,
                      2.0 * s.rows * s.cols * nt / gemm / 1e9);
        }
      }
    }
  }
  return 0;
}
