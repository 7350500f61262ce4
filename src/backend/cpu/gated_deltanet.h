// The CPU Gated DeltaNet step of one recurrent layer (LayerSpec::deltanet, ModelConfig::deltanet;
// the math in model/config.h's DeltaNetConfig and kernels/ref/gated_delta_ref.h).
//
// Chunk and batch invariance, bit for bit: a sequence's positions are cut into chunks aligned
// to absolute positions [c·16, (c+1)·16) (kRecurrentChunk), whatever the step's split. Within
// a chunk that starts from state S0, with G_t the sum of the decays g of the chunk's tokens up
// to t and γ_t = exp(G_t), the recurrence S_t = e^{g_t}·S_{t-1} + k_t ⊗ δ_t unrolls to
//   δ_t = β_t·(v_t − γ_t·S0ᵀk_t − Σ_{j<t} e^{G_t−G_j}·(k_t·k_j)·δ_j)
//   o_t = γ_t·S0ᵀq_t + Σ_{j≤t} e^{G_t−G_j}·(q_t·k_j)·δ_j
//   S_end = γ_last·S0 + Σ_j e^{G_last−G_j}·k_j ⊗ δ_j   (folded in when the chunk completes)
// so every value of token t is a function of S0 and the chunk's tokens up to t, each sum
// evaluated in one fixed order (j ascending; S0ᵀk over d_k ascending with one fused
// multiply-add per term) by the same kernels whether a step computes one of the chunk's tokens
// or sixteen: the output bits never depend on the split, the batch, or a resume from a
// snapshot. The slot keeps S0 plus the unfinished chunk's "tail" (each token's k, δ and G);
// the tail holds n_past % 16 tokens.
//
// Rollback (KvLayout::state_rollback_tokens = R > 0, speculative decoding): a verify step
// computes R + 1 tokens and may keep only the first; the next step then starts from an n_past
// below the slot's last position. Taking back up to R ≤ 15 tokens needs no copy and no
// recomputation, because nothing a kept token left is overwritten by a rejected one:
//   - S0 and the tail are kept twice, by chunk parity: chunk c reads S0[c % 2] and writes its
//     tokens to tail[c % 2], and its fold writes S0[(c + 1) % 2]. A step of at most 16
//     tokens that keeps its first can fold at most the chunk it started in, so the state of
//     every position it may go back to is still there.
//   - the convolution keeps its last K − 1 + R inputs and the position after the newest of them
//     (conv_end), so the K − 1 inputs before any position it may go back to are among them.
// Rejected tokens' entries are simply overwritten when their positions are computed again, by
// the same kernels on the same inputs: the kept tokens' outputs and every later one are the
// bits of plain decoding. With R = 0 there is one S0 and one tail, and K − 1 inputs.
//
// Slot layout per layer (CpuKvCache::state(layer, slot), state_floats_per_layer floats):
//   conv     (K − 1 + R, conv_dim)       convolution inputs, oldest first
//   conv_end 16 floats                  an int32: the position after the newest input
//   S0       (B, Hv, d_k, d_v)          the state at a chunk boundary, B = 2 if R > 0 else 1
//   tail     (B, Hv, 16, d_k + d_v + 1) per value head: 16 keys (d_k), then 16 δ (d_v), then
//                                        16 G
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kv_storage.h"
#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

// Offsets (floats) of the parts of one layer's state in a slot, for a cache that can take back
// `rollback` tokens (KvLayout::state_rollback_tokens).
struct DeltaNetStateLayout {
  int64_t conv = 0, conv_end = 0, s0 = 0, tail = 0, total = 0;
  int64_t rollback = 0;       // tokens a step may take back
  int64_t history = 0;        // convolution inputs kept: K − 1 + rollback
  int64_t buffers = 1;        // copies of S0 and the tail: 2 when rollback > 0
  int64_t s0_size = 0;        // Hv · d_k · d_v
  int64_t tail_size = 0;      // Hv · tail_per_head
  int64_t tail_per_head = 0;  // 16 · (d_k + d_v + 1)
  explicit DeltaNetStateLayout(const DeltaNetConfig& d, int32_t rollback = 0);
  // The S0 and the tail that chunk `chunk` (positions [16·chunk, 16·chunk + 16)) starts from.
  int64_t s0_of(int64_t chunk) const { return s0 + (chunk % buffers) * s0_size; }
  int64_t tail_of(int64_t chunk) const { return tail + (chunk % buffers) * tail_size; }
};

class CpuGatedDeltaNet {
 public:
  // Step "gated_deltanet" over every row of the batch in recurrent layer `layer`. Inputs per
  // row, row-major as the batch's rows: qkv (conv_dim), z (Hv·dv), beta_in = b (Hv),
  // alpha_in = a (Hv); out: Hv·dv per row. Each sequence starts from its state slot
  // (zeros when n_past == 0), leaves it updated, and performs this layer's part of
  // Batch::state_snapshots. Batch::state_restores are NOT done here (the forward pass does
  // them once per step via kv.copy_state). `out` must not alias an input.
  void run(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b, CpuKvCache& kv,
           const float* qkv, const float* z, const float* beta_in, const float* alpha_in,
           float* out, ThreadPool& pool);

  uint64_t scratch_bytes() const;  // as allocated now
  static uint64_t scratch_bytes_for(const ModelConfig& c, int64_t rows, int n_threads);

 private:
  struct Scratch {
    std::vector<float> a, bq;  // (16, d_v) S0ᵀk and S0ᵀq of a segment's rows
    std::vector<float> u;      // (d_v) the δ being built
    std::vector<float> coef;   // (16) a sum's weights
    std::vector<float> e;      // (16) e^{G_t − G_j}: a token's decays, then the fold's
  };
  // One sequence's rows in the block [r0, r1) for one value head: the chunked recurrence, the
  // tail and S0 updates, the snapshots' S0, and the gated RMSNorm of the outputs.
  void run_head(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                CpuKvCache& kv, int32_t seq, int32_t h, int64_t r0, int64_t r1, const float* z,
                float* out, Scratch& s);
  // Rows [r0, r1) into x_ and gate_: the convolution (reading slot conv states), q and k
  // normalised, and the gates.
  void convolve(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                CpuKvCache& kv, const float* qkv, const float* beta_in, const float* alpha_in,
                const float* taps, int64_t r0, int64_t r1, ThreadPool& pool);
  // Snapshots' and slots' convolution states (after every block's convolve has read them).
  void update_conv_states(const ModelConfig& c, int layer, const Batch& b, CpuKvCache& kv,
                          const float* qkv);

  // A block of at most 64 rows: convolved q, k, v (q and k heads normalised), and per row and
  // value head g, then beta.
  std::vector<float> x_;             // (block, conv_dim)
  std::vector<float> gate_;          // (block, Hv, 2)
  std::vector<int32_t> block_seqs_;  // the sequences with rows in the block
  struct LayerTaps {
    const float* source = nullptr;  // the LayerWeights::ssm_conv they were made from
    std::vector<float> taps;        // (K, conv_dim) the convolution's taps, tap-major
  };
  std::vector<LayerTaps> taps_;  // [layer]
  std::vector<float> ones_;      // (conv_dim) 1s: SiLU alone through kernels::silu_mul
  std::vector<Scratch> scratch_;
};

}  // namespace loom
