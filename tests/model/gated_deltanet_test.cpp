// The CPU Gated DeltaNet step (backend/cpu/gated_deltanet.h) on random weights and inputs:
// against the token-by-token recurrence in double (kernels/ref/gated_delta_ref.h) on every ISA,
// and bit-identical outputs and states whatever the split of a sequence into steps (one
// token at a time, uneven and random pieces, batched with other sequences, resumed from a
// prefix snapshot), with snapshots equal to the state of a run that stopped there.
#include "backend/cpu/gated_deltanet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "kernels/cpu/isa.h"
#include "kernels/ref/gated_delta_ref.h"

namespace loom {
namespace {

struct Shape {
  int32_t n_k_heads, n_v_heads, d_k, d_v, conv_kernel;
};

// One sequence's inputs to the step, per token: qkv, z, b, a.
struct Inputs {
  int64_t n = 0;
  std::vector<float> qkv, z, b, a;
};

std::vector<float> normal(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One recurrent layer, its random weights, a cache of `slots` state slots and the step.
class Harness {
 public:
  // rollback: the cache's KvLayout::state_rollback_tokens.
  Harness(Shape s, int32_t slots, uint32_t seed, int32_t rollback = 0) : rng_(seed) {
    DeltaNetConfig& d = c_.deltanet;
    d.n_k_heads = s.n_k_heads;
    d.n_v_heads = s.n_v_heads;
    d.d_k = s.d_k;
    d.d_v = s.d_v;
    d.conv_kernel = s.conv_kernel;
    c_.n_layer = 1;
    c_.n_head_kv = 1;
    c_.head_dim = 1;
    c_.rms_eps = 1e-6f;
    c_.layers.resize(1);
    c_.layers[0].deltanet = true;
    L_.ssm_conv = normal(static_cast<size_t>(d.conv_dim()) * d.conv_kernel, rng_, 0.5f);
    std::uniform_real_distribution<float> a_log(-1.0f, 1.0f);
    for (int h = 0; h < d.n_v_heads; ++h) L_.ssm_a.push_back(-std::exp(a_log(rng_)));
    L_.ssm_dt = normal(d.n_v_heads, rng_, 0.5f);
    L_.ssm_norm = normal(d.d_v, rng_, 0.1f);
    for (float& w : L_.ssm_norm) w += 1.0f;
    KvLayout layout = KvLayout::single(1, 1);
    layout.num_state_slots = slots;
    layout.state_rollback_tokens = rollback;
    kv_ = std::make_unique<CpuKvCache>(c_, layout, 16, Dtype::kF32);
  }

  const DeltaNetConfig& d() const { return c_.deltanet; }
  const ModelConfig& config() const { return c_; }
  const CpuGatedDeltaNet& step_object() const { return gdn_; }
  int threads() const { return pool_.size(); }
  int64_t out_row() const { return int64_t{d().n_v_heads} * d().d_v; }
  CpuKvCache& kv() { return *kv_; }

  Inputs inputs(int64_t n) {
    Inputs in;
    in.n = n;
    in.qkv = normal(n * d().conv_dim(), rng_, 1.0f);
    in.z = normal(n * out_row(), rng_, 1.0f);
    in.b = normal(n * d().n_v_heads, rng_, 1.0f);
    in.a = normal(n * d().n_v_heads, rng_, 1.0f);
    return in;
  }

  std::vector<float> reference(const Inputs& in, std::vector<float>* state = nullptr) {
    kernels::ref::GatedDeltaParams p;
    p.n_k_heads = d().n_k_heads;
    p.n_v_heads = d().n_v_heads;
    p.d_k = d().d_k;
    p.d_v = d().d_v;
    p.conv_kernel = d().conv_kernel;
    p.conv = L_.ssm_conv.data();
    p.a = L_.ssm_a.data();
    p.dt = L_.ssm_dt.data();
    p.norm = L_.ssm_norm.data();
    p.eps = c_.rms_eps;
    std::vector<float> out(in.n * out_row());
    if (state) state->resize(int64_t{d().n_v_heads} * d().d_k * d().d_v);
    kernels::ref::gated_delta_net(p, in.n, in.qkv.data(), in.z.data(), in.b.data(), in.a.data(),
                                  out.data(), state ? state->data() : nullptr);
    return out;
  }

  // One piece of a step: tokens [n_past, n_past + n_new) of sequence `in`, state in `slot`;
  // its outputs land in (*out)[n_past ..].
  struct Piece {
    const Inputs* in;
    int32_t n_past, n_new, slot;
    std::vector<float>* out;
  };

  // One step of the given pieces (one per sequence) and snapshots {piece, n_tokens, slot}.
  void step(const std::vector<Piece>& pieces,
            const std::vector<Batch::StateSnapshot>& snapshots = {}) {
    const int64_t C = d().conv_dim(), Hv = d().n_v_heads, O = out_row();
    Batch b;
    std::vector<float> qkv, z, beta, alpha;
    for (size_t s = 0; s < pieces.size(); ++s) {
      const Piece& p = pieces[s];
      BatchSequence sq;
      sq.n_past = p.n_past;
      sq.n_new = p.n_new;
      sq.row_begin = b.n_rows();
      sq.state_slot = p.slot;
      b.sequences.push_back(sq);
      for (int32_t t = p.n_past; t < p.n_past + p.n_new; ++t) {
        b.tokens.push_back(0);
        b.pos.push_back(t);
        b.seq.push_back(static_cast<int32_t>(s));
        qkv.insert(qkv.end(), &p.in->qkv[t * C], &p.in->qkv[(t + 1) * C]);
        z.insert(z.end(), &p.in->z[t * O], &p.in->z[(t + 1) * O]);
        beta.insert(beta.end(), &p.in->b[t * Hv], &p.in->b[(t + 1) * Hv]);
        alpha.insert(alpha.end(), &p.in->a[t * Hv], &p.in->a[(t + 1) * Hv]);
      }
    }
    b.state_snapshots = snapshots;
    std::vector<float> out(b.n_rows() * O, std::nanf(""));
    gdn_.run(c_, L_, 0, b, *kv_, qkv.data(), z.data(), beta.data(), alpha.data(), out.data(),
             pool_);
    for (const BatchSequence& sq : b.sequences) {
      const Piece& p = pieces[&sq - b.sequences.data()];
      p.out->resize(p.in->n * O);
      std::copy(&out[sq.row_begin * O], &out[(sq.row_begin + sq.n_new) * O],
                &(*p.out)[p.n_past * O]);
    }
  }

  // The whole of `in` in steps of the given sizes, from a zero state in `slot`.
  std::vector<float> run_split(const Inputs& in, const std::vector<int32_t>& sizes, int32_t slot) {
    std::vector<float> out;
    int32_t done = 0;
    for (int32_t n : sizes) {
      step({{&in, done, n, slot, &out}});
      done += n;
    }
    EXPECT_EQ(done, in.n);
    return out;
  }

  // The part of a slot's state that means something after n_tokens tokens: the conv state,
  // S0, and the tail's first n_tokens % 16 entries of each head.
  std::vector<float> live_state(int32_t slot, int64_t n_tokens) {
    const DeltaNetStateLayout lay(d());
    const float* st = kv_->state(0, slot);
    std::vector<float> v(st, st + lay.tail);
    const int64_t m = n_tokens % kRecurrentChunk, dk = d().d_k, dv = d().d_v;
    for (int64_t h = 0; h < d().n_v_heads; ++h) {
      const float* t = st + lay.tail + h * lay.tail_per_head;
      v.insert(v.end(), t, t + m * dk);
      v.insert(v.end(), t + 16 * dk, t + 16 * dk + m * dv);
      v.insert(v.end(), t + 16 * (dk + dv), t + 16 * (dk + dv) + m);
    }
    return v;
  }

 private:
  std::mt19937 rng_;
  ModelConfig c_;
  LayerWeights L_;
  std::unique_ptr<CpuKvCache> kv_;
  ThreadPool pool_{2};
  CpuGatedDeltaNet gdn_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> random_split(int32_t n, std::mt19937& rng, int32_t max_piece) {
  std::uniform_int_distribution<int32_t> d(1, max_piece);
  std::vector<int32_t> sizes;
  for (int32_t done = 0; done < n;) {
    sizes.push_back(std::min(d(rng), n - done));
    done += sizes.back();
  }
  return sizes;
}

const Shape kShapes[] = {{2, 4, 16, 16, 4}, {2, 4, 64, 64, 4}, {1, 3, 8, 24, 3}};

class GatedDeltaNetTest : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override { kernels::set_active_isa(GetParam()); }
  void TearDown() override { kernels::set_active_isa(kernels::best_isa()); }
};

TEST_P(GatedDeltaNetTest, MatchesRecurrenceReference) {
  for (const Shape& shape : kShapes) {
    Harness h(shape, 2, 7);
    for (int64_t n : {1, 2, 7, 16, 17, 33, 64, 70}) {
      SCOPED_TRACE(::testing::Message() << "d_k " << shape.d_k << ", n " << n);
      const Inputs in = h.inputs(n);
      std::vector<float> want_state;
      const std::vector<float> want = h.reference(in, &want_state);
      const std::vector<float> got = h.run_split(in, {static_cast<int32_t>(n)}, 0);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i]) /
                                                    std::max(1.0f, std::abs(want[i]))));
      EXPECT_LT(worst, 1e-5);
      if (n % kRecurrentChunk == 0) {  // the slot's S0 is then the whole state
        const float* s0 = h.kv().state(0, 0) + DeltaNetStateLayout(h.d()).s0;
        double state_err = 0;
        for (size_t i = 0; i < want_state.size(); ++i)
          state_err = std::max(state_err, static_cast<double>(std::abs(s0[i] - want_state[i])));
        EXPECT_LT(state_err, 1e-5);
      }
    }
  }
}

TEST_P(GatedDeltaNetTest, EverySplitGivesTheSameBits) {
  std::mt19937 rng(11);
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(::testing::Message() << "d_k " << shape.d_k);
    Harness h(shape, 2, 3);
    const int32_t n = 70;
    const Inputs in = h.inputs(n);
    const std::vector<float> whole = h.run_split(in, {n}, 0);
    const std::vector<float> whole_state = h.live_state(0, n);
    std::vector<std::vector<int32_t>> splits = {std::vector<int32_t>(n, 1),
                                                {5, 11, 5, 11, 5, 11, 5, 11, 6},
                                                {16, 16, 16, 16, 6},
                                                {15, 2, 31, 22},
                                                {69, 1}};
    for (int r = 0; r < 4; ++r) splits.push_back(random_split(n, rng, 1 + 10 * r));
    for (const std::vector<int32_t>& sizes : splits) {
      SCOPED_TRACE(::testing::PrintToString(sizes));
      EXPECT_TRUE(same_bits(h.run_split(in, sizes, 1), whole));
      EXPECT_TRUE(same_bits(h.live_state(1, n), whole_state));
    }
  }
}

TEST_P(GatedDeltaNetTest, BatchedWithOtherSequencesGivesTheSameBits) {
  std::mt19937 rng(5);
  Harness h(kShapes[1], 6, 9);
  const std::vector<int32_t> lengths = {70, 23, 41, 1};
  std::vector<Inputs> in;
  std::vector<std::vector<float>> alone, alone_state;
  for (size_t s = 0; s < lengths.size(); ++s) {
    in.push_back(h.inputs(lengths[s]));
    alone.push_back(h.run_split(in.back(), {lengths[s]}, 0));
    alone_state.push_back(h.live_state(0, lengths[s]));
  }
  for (int trial = 0; trial < 3; ++trial) {
    // Each step takes a random piece of every unfinished sequence, in a shuffled order.
    std::vector<int32_t> done(lengths.size(), 0);
    std::vector<std::vector<float>> out(lengths.size());
    std::uniform_int_distribution<int32_t> piece(1, 1 + 12 * trial);
    for (bool more = true; more;) {
      std::vector<Harness::Piece> pieces;
      for (size_t s = 0; s < lengths.size(); ++s)
        if (done[s] < lengths[s]) {
          const int32_t k = std::min(piece(rng), lengths[s] - done[s]);
          pieces.push_back({&in[s], done[s], k, static_cast<int32_t>(1 + s), &out[s]});
          done[s] += k;
        }
      std::shuffle(pieces.begin(), pieces.end(), rng);
      more = !pieces.empty();
      if (more) h.step(pieces);
    }
    for (size_t s = 0; s < lengths.size(); ++s) {
      SCOPED_TRACE(::testing::Message() << "trial " << trial << ", sequence " << s);
      EXPECT_TRUE(same_bits(out[s], alone[s]));
      EXPECT_TRUE(same_bits(h.live_state(static_cast<int32_t>(1 + s), lengths[s]), alone_state[s]));
    }
  }
}

TEST_P(GatedDeltaNetTest, SnapshotsHoldTheStateThereAndResumeBitIdentically) {
  Harness h(kShapes[0], 8, 21);
  const int32_t n = 70;
  const Inputs in = h.inputs(n);
  const std::vector<float> whole = h.run_split(in, {n}, 0);
  const std::vector<float> whole_state = h.live_state(0, n);
  // The state of runs that stopped at 16, 32 and 64 tokens.
  const std::vector<int32_t> stops = {16, 32, 64};
  std::vector<std::vector<float>> stopped;
  for (int32_t stop : stops) {
    Inputs prefix = in;
    prefix.n = stop;
    h.run_split(prefix, {stop}, 0);
    stopped.push_back(h.live_state(0, stop));
  }
  // Snapshots taken in one step and in a step of 5-token pieces (32 lands inside [30, 35)).
  for (int pieces = 0; pieces < 2; ++pieces) {
    SCOPED_TRACE(::testing::Message() << "pieces " << pieces);
    std::vector<float> out;
    if (pieces == 0) {
      h.step({{&in, 0, n, 1, &out}}, {{0, 16, 2}, {0, 32, 3}, {0, 64, 4}});
    } else {
      for (int32_t p = 0; p < n; p += 5) {
        std::vector<Batch::StateSnapshot> snaps;
        for (size_t k = 0; k < stops.size(); ++k)
          if (stops[k] > p && stops[k] <= p + 5)
            snaps.push_back({0, stops[k], static_cast<int32_t>(2 + k)});
        h.step({{&in, p, std::min(5, n - p), 1, &out}}, snaps);
      }
    }
    EXPECT_TRUE(same_bits(out, whole));
    for (size_t k = 0; k < stops.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "snapshot at " << stops[k]);
      EXPECT_TRUE(same_bits(h.live_state(static_cast<int32_t>(2 + k), stops[k]), stopped[k]));
    }
    // Resume from the snapshot at 32 in another slot, in uneven pieces.
    h.kv().copy_state(3, 5);
    std::vector<float> resumed(whole.size(), 0.0f);
    std::copy(whole.begin(), whole.begin() + 32 * h.out_row(), resumed.begin());
    for (int32_t p = 32; p < n;) {
      const int32_t k = std::min(p % 3 == 0 ? 7 : 3, n - p);
      h.step({{&in, p, k, 5, &resumed}});
      p += k;
    }
    EXPECT_TRUE(same_bits(resumed, whole));
    EXPECT_TRUE(same_bits(h.live_state(5, n), whole_state));
  }
}

// Speculative verifies: a step of 1 + k tokens whose last ones are wrong guesses (inputs that
// are not the sequence's), of which only the first 1 + a are kept; the next step starts after
// them. The kept tokens' outputs, and every later one, are the bits of one token per step,
// for every offset inside a chunk (verifies that cross a chunk boundary and take it back
// included), every k up to the cache's rollback, any a, and prompt pieces in between.
TEST_P(GatedDeltaNetTest, RolledBackVerifiesGiveTheBitsOfOneTokenPerStep) {
  std::mt19937 rng(17);
  for (int32_t rollback : {1, 4, 15}) {
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(::testing::Message() << "rollback " << rollback << ", d_k " << shape.d_k);
      Harness h(shape, 2, 29, rollback);
      const int32_t n = 240;
      const Inputs in = h.inputs(n);
      const std::vector<float> plain = h.run_split(in, std::vector<int32_t>(n, 1), 0);
      std::vector<float> got(plain.size(), std::nanf(""));
      const Inputs noise = h.inputs(n);
      int32_t verifies = 0, taken_back = 0, crossed_back = 0;
      for (int32_t p = 0; p < n;) {
        std::uniform_int_distribution<int32_t> kind(0, 5);
        if (kind(rng) == 0) {  // a prompt piece, all kept
          const int32_t m = std::min(std::uniform_int_distribution<int32_t>(1, 20)(rng), n - p);
          h.step({{&in, p, m, 1, &got}});
          p += m;
          continue;
        }
        const int32_t k =
            std::min(std::uniform_int_distribution<int32_t>(1, rollback)(rng), n - p - 1);
        if (k <= 0) {
          h.step({{&in, p, 1, 1, &got}});
          ++p;
          continue;
        }
        const int32_t a = std::uniform_int_distribution<int32_t>(0, k)(rng);
        // Rows p .. p + a are the sequence's; p + a + 1 .. p + k are wrong guesses.
        Inputs guessed = in;
        auto spoil = [&](std::vector<float>& v, const std::vector<float>& src, int64_t row) {
          const int64_t w = static_cast<int64_t>(v.size()) / n;
          std::copy(src.begin() + row * w, src.begin() + (row + 1) * w, v.begin() + row * w);
        };
        for (int32_t t = p + a + 1; t <= p + k; ++t) {
          spoil(guessed.qkv, noise.qkv, t);
          spoil(guessed.z, noise.z, t);
          spoil(guessed.b, noise.b, t);
          spoil(guessed.a, noise.a, t);
        }
        std::vector<float> verify_out;
        h.step({{&guessed, p, k + 1, 1, &verify_out}});
        const int64_t O = h.out_row();
        std::copy(verify_out.begin() + p * O, verify_out.begin() + (p + a + 1) * O,
                  got.begin() + p * O);
        ++verifies;
        taken_back += a < k;
        crossed_back += a < k && (p + a + 1) / kRecurrentChunk < (p + k + 1) / kRecurrentChunk;
        p += a + 1;
      }
      EXPECT_TRUE(same_bits(got, plain));
      EXPECT_GT(verifies, 10);
      EXPECT_GT(taken_back, 5);
      if (rollback >= 4) {
        EXPECT_GT(crossed_back, 0);  // some rollbacks went back across a completed chunk
      }
    }
  }
}

// The step's slot layout fills exactly what the cache gives a recurrent layer per slot.
TEST(GatedDeltaNetLayout, MatchesTheCacheSlotSize) {
  for (const Shape& shape : kShapes) {
    Harness h(shape, 1, 1);
    EXPECT_EQ(static_cast<uint64_t>(DeltaNetStateLayout(h.d()).total),
              CpuKvCache::state_floats_per_layer(h.config()));
    for (int32_t rollback : {1, 15}) {
      const DeltaNetStateLayout lay(h.d(), rollback);
      EXPECT_EQ(static_cast<uint64_t>(lay.total),
                CpuKvCache::state_floats_per_layer(h.config(), rollback));
      EXPECT_EQ(lay.buffers, 2);
      EXPECT_EQ(lay.history, shape.conv_kernel - 1 + rollback);
    }
  }
}

// The memory plan's figure bounds what run() holds, and a repeated step size allocates nothing
// new (its scratch capacity does not move).
TEST(GatedDeltaNetScratch, StaysWithinItsPlan) {
  Harness h(kShapes[1], 2, 13);
  const Inputs in = h.inputs(160);
  std::vector<float> out;
  h.step({{&in, 0, 150, 0, &out}});
  const uint64_t after_prefill = h.step_object().scratch_bytes();
  EXPECT_LE(after_prefill, CpuGatedDeltaNet::scratch_bytes_for(h.config(), 150, h.threads()));
  EXPECT_GT(after_prefill, CpuGatedDeltaNet::scratch_bytes_for(h.config(), 1, h.threads()));
  for (int32_t p = 150; p < 155; ++p) {  // decode steps after it keep the same buffers
    h.step({{&in, p, 1, 0, &out}});
    EXPECT_EQ(h.step_object().scratch_bytes(), after_prefill);
  }
  Harness fresh(kShapes[1], 2, 13);
  fresh.step({{&in, 0, 1, 0, &out}});
  EXPECT_LE(fresh.step_object().scratch_bytes(),
            CpuGatedDeltaNet::scratch_bytes_for(fresh.config(), 1, fresh.threads()));
}

INSTANTIATE_TEST_SUITE_P(Isas, GatedDeltaNetTest, ::testing::ValuesIn(kernels::available_isas()),
                         [](const ::testing::TestParamInfo<kernels::Isa>& i) {
                           return std::string(kernels::isa_name(i.param));
                         });

}  // namespace
}  // namespace loom
