#include "bench/model_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "bench/model_bench_util.h"
#include "engine/memory_plan.h"
#include "hub/hf_option.h"
#include "kernels/cpu/packed_kernels.h"
#include "model/model.h"
#include "spec/spec_flags.h"
#include "tools/model_spec.h"

namespace loom::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kBlockSize = 16;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A model with recurrent layers keeps each sequence's state in a slot: sequence s (the one
// whose blocks start at s · table.size()) in slot s; -1 without them.
int32_t recurrent_slot(const KvCache& kv, const std::vector<int32_t>& table) {
  if (kv.num_state_slots() == 0 || table.empty()) return -1;
  return table[0] / static_cast<int32_t>(table.size());
}

// What a decode token reads and writes of its sequence's recurrent state (the layout of
// backend/cpu/gated_deltanet.h): the whole slot is read; the convolution's K - 1 inputs and
// the token's chunk-tail entry (its key, δ and decay per value head) are written, and the
// chunk state once every 16 tokens.
void recurrent_state_bytes(const ModelConfig& c, ModelBenchResult& res) {
  const DeltaNetConfig& d = c.deltanet;
  int64_t layers = 0;
  for (const LayerSpec& s : c.layers) layers += s.deltanet;
  if (layers == 0) return;
  res.state_read = KvCache::state_bytes_per_slot(c);
  const int64_t written = int64_t{d.conv_kernel - 1} * d.conv_dim() +
                          int64_t{d.n_v_heads} * (d.d_k + d.d_v + 1) +
                          int64_t{d.n_v_heads} * d.d_k * d.d_v / kRecurrentChunk;
  res.state_written = static_cast<uint64_t>(layers * written) * sizeof(float);
}

// One sequence in blocks [0, n_blocks): the prompt in forward passes of `ubatch` tokens (0:
// the whole prompt in one), the last one's last row with logits.
Status prefill(Model& m, KvCache& kv, const std::vector<int32_t>& table,
               const std::vector<int32_t>& tokens, std::vector<float>& logits, int32_t ubatch = 0) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t step = ubatch > 0 ? ubatch : n;
  Batch b;
  for (int32_t start = 0; start < n; start += step) {
    const int32_t len = std::min(step, n - start);
    b.clear();
    b.tokens.assign(tokens.begin() + start, tokens.begin() + start + len);
    for (int32_t i = 0; i < len; ++i) {
      b.pos.push_back(start + i);
      b.seq.push_back(0);
    }
    b.sequences.push_back({table.data(), static_cast<int32_t>(table.size()), start, len, 0});
    b.sequences[0].state_slot = recurrent_slot(kv, table);
    if (start + len == n) b.logits_rows = {len - 1};
    LOOM_RETURN_IF_ERROR(m.forward(b, kv, logits.data()));
  }
  return Status::ok();
}

// n single-token steps after `depth` tokens in the cache, each reading all weights once.
Status generate(Model& m, KvCache& kv, const std::vector<int32_t>& table, int32_t depth,
                const std::vector<int32_t>& tokens, std::vector<float>& logits) {
  Batch b;
  b.tokens = {0};
  b.pos = {0};
  b.seq = {0};
  b.sequences.push_back({table.data(), static_cast<int32_t>(table.size()), 0, 1, 0});
  b.sequences[0].state_slot = recurrent_slot(kv, table);
  b.logits_rows = {0};
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.tokens[0] = tokens[i];
    b.pos[0] = depth + static_cast<int32_t>(i);
    b.sequences[0].n_past = depth + static_cast<int32_t>(i);
    LOOM_RETURN_IF_ERROR(m.forward(b, kv, logits.data()));
  }
  return Status::ok();
}

// The block table of sequence s: blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq).
std::vector<int32_t> sequence_table(int32_t s, int32_t blocks_per_seq) {
  std::vector<int32_t> table(blocks_per_seq);
  for (int32_t i = 0; i < blocks_per_seq; ++i) table[i] = s * blocks_per_seq + i;
  return table;
}

// n steps of n_seqs sequences decoded together (one token each per step, logits for all),
// sequence s in the blocks of sequence_table(s), after `depth` tokens in each cache.
Status generate_batched(Model& m, KvCache& kv, int32_t n_seqs, int32_t blocks_per_seq,
                        int32_t depth, const std::vector<int32_t>& tokens,
                        std::vector<float>& logits) {
  std::vector<std::vector<int32_t>> tables;
  for (int32_t s = 0; s < n_seqs; ++s) tables.push_back(sequence_table(s, blocks_per_seq));
  Batch b;
  for (int32_t s = 0; s < n_seqs; ++s) {
    b.tokens.push_back(0);
    b.pos.push_back(0);
    b.seq.push_back(s);
    b.logits_rows.push_back(s);
    b.sequences.push_back({tables[s].data(), blocks_per_seq, 0, 1, 0});
    b.sequences.back().state_slot = recurrent_slot(kv, tables[s]);
  }
  const size_t n_steps = tokens.size() / n_seqs;
  for (size_t i = 0; i < n_steps; ++i) {
    for (int32_t s = 0; s < n_seqs; ++s) {
      b.tokens[s] = tokens[i * n_seqs + s];
      b.pos[s] = depth + static_cast<int32_t>(i);
      b.sequences[s].n_past = depth + static_cast<int32_t>(i);
    }
    LOOM_RETURN_IF_ERROR(m.forward(b, kv, logits.data()));
  }
  return Status::ok();
}

// n steps of n_seqs sequences that each compute `rows` tokens with logits for every one (a
// speculative verify), step i at positions depth + i ... depth + i + rows - 1 (each step
// overwrites most of the last one's positions: the cost is what is measured, not the text).
Status verify_steps(Model& m, KvCache& kv, int32_t n_seqs, int32_t blocks_per_seq, int32_t depth,
                    int32_t rows, int32_t n_steps, const std::vector<int32_t>& tokens,
                    std::vector<float>& logits) {
  std::vector<std::vector<int32_t>> tables;
  for (int32_t s = 0; s < n_seqs; ++s) tables.push_back(sequence_table(s, blocks_per_seq));
  Batch b;
  for (int32_t s = 0; s < n_seqs; ++s) {
    b.sequences.push_back({tables[s].data(), blocks_per_seq, 0, rows, s * rows});
    b.sequences.back().state_slot = recurrent_slot(kv, tables[s]);
    for (int32_t j = 0; j < rows; ++j) {
      b.tokens.push_back(0);
      b.pos.push_back(0);
      b.seq.push_back(s);
      b.logits_rows.push_back(s * rows + j);
    }
  }
  size_t t = 0;
  for (int32_t i = 0; i < n_steps; ++i) {
    for (int32_t s = 0; s < n_seqs; ++s) {
      b.sequences[s].n_past = depth + i;
      for (int32_t j = 0; j < rows; ++j) {
        b.tokens[s * rows + j] = tokens[t++ % tokens.size()];
        b.pos[s * rows + j] = depth + i + j;
      }
    }
    LOOM_RETURN_IF_ERROR(m.forward(b, kv, logits.data()));
  }
  return Status::ok();
}

// The weight reads of a row's timed repetitions (Model::weight_reads before and after each),
// as ModelBenchRow's per-step figures.
struct StepReads {
  Model::WeightReads sum;
  void add(const Model::WeightReads& before, const Model::WeightReads& after) {
    sum.bytes += after.bytes - before.bytes;
    sum.calls += after.calls - before.calls;
    sum.moe_layer_runs += after.moe_layer_runs - before.moe_layer_runs;
    sum.experts_read += after.experts_read - before.experts_read;
  }
  void set(ModelBenchRow& row) const {
    if (sum.calls == 0 || sum.bytes == 0) return;
    row.weight_bytes_per_step = static_cast<double>(sum.bytes) / sum.calls;
    if (sum.moe_layer_runs > 0)
      row.experts_per_moe_layer = static_cast<double>(sum.experts_read) / sum.moe_layer_runs;
  }
};

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, int64_t bytes)
    : pool_(pool),
      words_(std::max<int64_t>(bytes / 8, 1024)),
      buf_(allocate_huge(static_cast<uint64_t>(words_) * 8, /*commit=*/false)),
      sinks_(static_cast<size_t>(pool.size()) * 8, 0) {
  // Each thread touches its own slice first, so pages land near the thread that reads them.
  const int n_tasks = pool_.size();
  uint64_t* words = reinterpret_cast<uint64_t*>(buf_.get());
  pool_.parallel_for(n_tasks, [&](int64_t task, int) {
    for (int64_t i = words_ * task / n_tasks; i < words_ * (task + 1) / n_tasks; ++i)
      words[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
}

double ReadBandwidthProbe::measure(int32_t reps) {
  const int n_tasks = pool_.size();
  // Plain loads (the hardware prefetchers alone) and loads behind software prefetches into L2
  // as far ahead as the weight kernels stream (kernels/cpu/packed_tile_util.h): the roofline
  // is the faster of the two, or kernels that prefetch would beat it (Intel host: 25.7 GB/s
  // plain, while one-token GEMVs read 34-36 GB/s).
  constexpr int64_t kAheadWords = kernels::cpu::kPrefetchAheadBytes / sizeof(uint64_t);
  double best = 0;
  for (int32_t r = 0; r < 2 * std::max(reps, 1); ++r) {
    const bool prefetch = r % 2 == 1;
    const auto t0 = Clock::now();
    pool_.parallel_for(n_tasks, [&](int64_t task, int) {
      const int64_t b = words_ * task / n_tasks, e = words_ * (task + 1) / n_tasks;
      const uint64_t* buf = reinterpret_cast<const uint64_t*>(buf_.get());
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t i = b;
      for (; i + 8 <= e; i += 8) {
        if (prefetch) __builtin_prefetch(&buf[std::min(i + kAheadWords, e - 1)], 0, 2);
        a0 += buf[i] + buf[i + 4];
        a1 += buf[i + 1] + buf[i + 5];
        a2 += buf[i + 2] + buf[i + 6];
        a3 += buf[i + 3] + buf[i + 7];
      }
      for (; i < e; ++i) a0 += buf[i];
      sinks_[task * 8] += a0 ^ a1 ^ a2 ^ a3;
    });
    best = std::max(best, static_cast<double>(words_ * 8) / seconds_since(t0));
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sinks_) keep = keep + s;
  (void)keep;
  return best;
}

double measure_read_bandwidth(ThreadPool& pool, int64_t bytes, int32_t reps) {
  return ReadBandwidthProbe(pool, bytes).measure(reps);
}

Result<ModelBenchResult> run_model_bench(const ModelBenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || (o.n_prompt == 0 && o.n_gen == 0))
    return invalid_argument("-p and -n must not be negative, and not both 0");
  if (o.reps <= 0) return invalid_argument("-r must be positive");
  if (o.batch_seqs < 0 || o.batch_seqs > 4096)
    return invalid_argument("--batch-seqs must be in [0, 4096]");
  if (o.n_depth < 0) return invalid_argument("-d must not be negative");
  if (o.verify_tokens < 0 || o.verify_tokens > 64)
    return invalid_argument("--verify must be in [0, 64]");
  if (o.speculative.method != SpeculativeConfig::Method::kNone) {
    if (o.n_gen < 2)
      return invalid_argument("speculative options time generation: -n must be at least 2");
    LOOM_RETURN_IF_ERROR(plan_memory(o.model, speculative_bench_config(o)).status());
  }
  ModelLoadOptions lo;
  lo.n_threads = o.n_threads;
  lo.disable_sliding_window = o.disable_sliding_window;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, tools::load_model(o.model, lo));
  const ModelConfig& c = model->config();
  const int32_t depth = o.n_gen > 0 ? o.n_depth : 0;
  const int32_t longest = std::max(o.n_prompt, depth + o.n_gen + std::max(0, o.verify_tokens - 1));
  if (c.context_length > 0 && longest > c.context_length)
    return invalid_argument((o.n_prompt >= depth + o.n_gen ? "-p "
                             : depth > 0                   ? "-d + -n "
                                                           : "-n ") +
                            std::to_string(longest) + " exceeds the model's context of " +
                            std::to_string(c.context_length));
  const int32_t n_blocks = (longest + kBlockSize - 1) / kBlockSize;
  const int32_t n_seqs = std::max(1, o.batch_seqs);
  KvLayout layout = KvLayout::single(c.n_layer, n_blocks * n_seqs);
  if (KvCache::state_bytes_per_slot(c) > 0) {
    layout.num_state_slots = n_seqs;  // one each
    // Each verify step starts one token after the last one's start: it takes back rows - 1.
    layout.state_rollback_tokens = std::max(0, o.verify_tokens - 1);
    if (layout.state_rollback_tokens >= kRecurrentChunk)
      return invalid_argument("--verify " + std::to_string(o.verify_tokens) +
                              ": a model with recurrent layers verifies at most " +
                              std::to_string(kRecurrentChunk) + " tokens a step");
  }
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> kv,
                        KvCache::create(c, layout, kBlockSize, Dtype::kF16));
  kv->wait_committed();  // no page faults inside the timed steps
  const std::vector<int32_t> table = sequence_table(0, n_blocks);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab) * n_seqs * std::max(1, o.verify_tokens));
  std::mt19937_64 rng(1234);
  auto random_tokens = [&](int32_t n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.n_vocab));
    return t;
  };

  ModelBenchResult res;
  res.model = o.model;
  res.weight_bytes_per_token = model->weight_bytes();
  recurrent_state_bytes(c, res);
  const Model::WeightStats ws = model->weight_stats();
  res.weight_bytes_total = ws.total_bytes;
  res.total_params = ws.total_params;
  res.active_params = ws.active_params;
  res.n_threads = model->thread_pool().size();
  res.n_expert = c.moe.n_expert;
  if (o.n_prompt > 0) {
    ModelBenchRow row;
    row.test = "pp" + std::to_string(o.n_prompt);
    if (o.ubatch > 0) row.test += " ub" + std::to_string(o.ubatch);
    row.n_prompt = o.n_prompt;
    for (int32_t r = -1; r < o.reps; ++r) {  // r = -1: warm-up
      auto toks = random_tokens(o.n_prompt);
      model->set_profile(o.profile && r >= 0 ? &row.profile : nullptr);
      const auto t0 = Clock::now();
      LOOM_RETURN_IF_ERROR(prefill(*model, *kv, table, toks, logits, o.ubatch));
      if (r >= 0) row.samples_ts.push_back(o.n_prompt / seconds_since(t0));
    }
    mean_sd(row);
    res.rows.push_back(std::move(row));
  }
  if (o.n_gen > 0) {
    // Single-sequence and batched generation alternate repetition by repetition, so that each
    // batched repetition has a single-sequence one measured seconds before it: their ratio
    // (the batched speed-up) holds on a host whose speed drifts by tens of percent within
    // minutes, where two separate series would compare different phases of it.
    const bool batched = o.batch_seqs > 1;
    // With -d, every sequence's first `depth` positions are prefilled once (untimed), and each
    // repetition generates from there (overwriting the same positions after it).
    if (depth > 0) {
      model->set_profile(nullptr);
      for (int32_t s = 0; s < std::max(1, o.batch_seqs); ++s)
        LOOM_RETURN_IF_ERROR(
            prefill(*model, *kv, sequence_table(s, n_blocks), random_tokens(depth), logits));
    }
    const std::string at = depth_suffix(depth);
    ModelBenchRow tg, tgb;
    tg.test = "tg" + std::to_string(o.n_gen) + at;
    tg.n_gen = o.n_gen;
    tg.n_depth = depth;
    tgb.test = "tg" + std::to_string(o.n_gen) + "x" + std::to_string(o.batch_seqs) + at;
    tgb.n_gen = o.n_gen;
    tgb.n_seqs = o.batch_seqs;
    tgb.n_depth = depth;
    const int32_t nv = o.verify_tokens;
    const bool verify = nv > 1;
    ModelBenchRow vr, vrb;
    vr.test = "verify" + std::to_string(nv) + at;
    vrb.test = vr.test + "x" + std::to_string(o.batch_seqs);
    vr.n_gen = vrb.n_gen = o.n_gen;
    vrb.n_seqs = o.batch_seqs;
    vr.n_depth = vrb.n_depth = depth;
    std::vector<double> speedups, costs, costs_b;
    // Tokens computed per second by n_gen verify steps of n_seqs sequences; the step time.
    auto time_verify = [&](int32_t n_seqs, double* step_s,
                           ForwardProfile* profile) -> Result<double> {
      auto toks = random_tokens(o.n_gen * n_seqs * nv);
      model->set_profile(profile);
      const auto t0 = Clock::now();
      LOOM_RETURN_IF_ERROR(
          verify_steps(*model, *kv, n_seqs, n_blocks, depth, nv, o.n_gen, toks, logits));
      const double s = seconds_since(t0);
      *step_s = s / o.n_gen;
      return static_cast<double>(o.n_gen) * n_seqs * nv / s;
    };
    // The bandwidth beside each single-sequence repetition (ModelBenchRow::samples_bw): the
    // final test's buffer size (--bw-mib, chosen well above the last-level cache), at most 256
    // MiB (8x a large one), read twice (plain and prefetched) before and after: ~25 ms per
    // repetition, untimed.
    ReadBandwidthProbe probe(model->thread_pool(),
                             std::min<int64_t>(o.bw_bytes, int64_t{256} << 20));
    // The weights the timed steps read (Model::weight_reads), per row.
    StepReads tg_reads, tgb_reads;
    for (int32_t r = -1; r < o.reps; ++r) {  // r = -1: warm-up
      auto toks = random_tokens(o.n_gen);
      const double bw_before = r >= 0 ? probe.measure(1) : 0;
      model->set_profile(o.profile && r >= 0 ? &tg.profile : nullptr);
      Model::WeightReads reads = model->weight_reads();
      auto t0 = Clock::now();
      LOOM_RETURN_IF_ERROR(generate(*model, *kv, table, depth, toks, logits));
      const double single_s = seconds_since(t0);
      const double single_ts = o.n_gen / single_s;
      double bw_after = 0;
      if (r >= 0) {
        tg_reads.add(reads, model->weight_reads());
        tg.samples_ts.push_back(single_ts);
        bw_after = probe.measure(1);
        tg.samples_bw.push_back((bw_before + bw_after) / 2);
      }
      model->set_profile(nullptr);
      if (verify) {
        double step_s = 0;
        LOOM_ASSIGN_OR_RETURN(const double ts,
                              time_verify(1, &step_s, o.profile && r >= 0 ? &vr.profile : nullptr));
        if (r >= 0) {
          vr.samples_ts.push_back(ts);
          costs.push_back(step_s / (single_s / o.n_gen));
        }
      }
      if (!batched) continue;
      toks = random_tokens(o.n_gen * o.batch_seqs);
      model->set_profile(o.profile && r >= 0 ? &tgb.profile : nullptr);
      reads = model->weight_reads();
      t0 = Clock::now();
      LOOM_RETURN_IF_ERROR(
          generate_batched(*model, *kv, o.batch_seqs, n_blocks, depth, toks, logits));
      const double batched_s = seconds_since(t0);
      const double batched_ts = static_cast<double>(o.n_gen) * o.batch_seqs / batched_s;
      model->set_profile(nullptr);
      if (r >= 0) {
        tgb_reads.add(reads, model->weight_reads());
        tgb.samples_bw.push_back((bw_after + probe.measure(1)) / 2);
      }
      if (verify) {
        double step_s = 0;
        LOOM_ASSIGN_OR_RETURN(
            const double ts,
            time_verify(o.batch_seqs, &step_s, o.profile && r >= 0 ? &vrb.profile : nullptr));
        if (r >= 0) {
          vrb.samples_ts.push_back(ts);
          costs_b.push_back(step_s / (batched_s / o.n_gen));
        }
      }
      if (r < 0) continue;
      tgb.samples_ts.push_back(batched_ts);
      speedups.push_back(batched_ts / single_ts);
    }
    mean_sd(tg);
    tg_reads.set(tg);
    res.rows.push_back(std::move(tg));
    if (batched) {
      mean_sd(tgb);
      tgb_reads.set(tgb);
      tgb.speedup = median_of(speedups);
      res.rows.push_back(std::move(tgb));
    }
    if (verify) {
      mean_sd(vr);
      vr.step_cost = median_of(costs);
      res.rows.push_back(std::move(vr));
      if (batched) {
        mean_sd(vrb);
        vrb.step_cost = median_of(costs_b);
        res.rows.push_back(std::move(vrb));
      }
    }
  }
  model->set_profile(nullptr);
  res.mem_bw_bytes_per_s = measure_read_bandwidth(model->thread_pool(), o.bw_bytes, o.bw_reps);
  if (o.speculative.method != SpeculativeConfig::Method::kNone) {
    kv.reset();
    model.reset();  // its weights and thread pool, before the engines load theirs
    LOOM_RETURN_IF_ERROR(add_speculative_rows(o, res));
  }
  return res;
}

// Generation is bound by the weights a step reads: one sequence's token all its active
// bytes; a batch's tokens share a step's (measured) bytes, each reading its own state.
Roofline roofline_of(const ModelBenchResult& r, const ModelBenchRow& row) {
  Roofline f;
  if (row.n_gen <= 0 || row.test.rfind("tg", 0) != 0 || r.bytes_per_token() == 0) return f;
  if (row.n_seqs != 1 && row.weight_bytes_per_step <= 0) return f;
  const double bytes =
      row.n_seqs == 1 ? static_cast<double>(r.bytes_per_token())
                      : row.weight_bytes_per_step / row.n_seqs + r.state_read + r.state_written;
  if (!row.samples_bw.empty() && row.samples_bw.size() == row.samples_ts.size()) {
    std::vector<double> roof, share;
    for (size_t i = 0; i < row.samples_bw.size(); ++i) {
      roof.push_back(row.samples_bw[i] / bytes);
      share.push_back(row.samples_ts[i] / roof.back());
    }
    f.valid = true;
    f.roofline_ts = median_of(roof);
    f.fraction = median_of(share);
  } else if (r.roofline_tg_ts() > 0) {
    f.valid = true;
    f.roofline_ts = r.roofline_tg_ts();
    f.fraction = row.median_ts / f.roofline_ts;
  }
  return f;
}

namespace {

// With --profile: ms per forward call of each phase (share of the call) for each test.
std::string profile_markdown(const ModelBenchResult& r) {
  std::vector<const ModelBenchRow*> rows;
  for (const ModelBenchRow& row : r.rows)
    if (row.profile.calls > 0) rows.push_back(&row);
  if (rows.empty()) return "";
  std::string out = "\n| phase, ms per forward call |";
  for (const ModelBenchRow* row : rows) out += " " + row->test + " |";
  out += "\n| --- |";
  for (size_t i = 0; i < rows.size(); ++i) out += " ---: |";
  out += "\n";
  char buf[96];
  auto cell = [&](const ModelBenchRow& row, double seconds) {
    double total = 0;
    for (double x : row.profile.seconds) total += x;
    std::snprintf(buf, sizeof buf, " %.3f (%.0f%%) |", 1e3 * seconds / row.profile.calls,
                  total > 0 ? 100 * seconds / total : 0.0);
    return std::string(buf);
  };
  for (int p = 0; p < ForwardProfile::kPhases; ++p) {
    out += std::string("| ") + ForwardProfile::kNames[p] + " |";
    for (const ModelBenchRow* row : rows) out += cell(*row, row->profile.seconds[p]);
    out += "\n";
  }
  out += "| total |";
  for (const ModelBenchRow* row : rows) {
    double total = 0;
    for (double x : row->profile.seconds) total += x;
    out += cell(*row, total);
  }
  return out + "\n";
}

}  // namespace

std::string model_bench_markdown(const ModelBenchResult& r) {
  std::string out =
      "| model | size | threads | test | t/s | median t/s | roofline t/s | of roofline |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  char buf[512];
  for (const ModelBenchRow& row : r.rows) {
    Roofline f = roofline_of(r, row);
    std::string rt =
        f.valid ? std::to_string(static_cast<int64_t>(std::llround(f.roofline_ts))) : "";
    char frac[32] = "";
    if (f.valid) std::snprintf(frac, sizeof frac, "%.0f%%", 100 * f.fraction);
    std::snprintf(buf, sizeof buf, "| %s | %.2f MiB | %d | %s | %.2f ± %.2f | %.2f | %s | %s |\n",
                  r.model.c_str(), r.weight_bytes_total / 1048576.0, r.n_threads, row.test.c_str(),
                  row.avg_ts, row.stddev_ts, row.median_ts, rt.c_str(), frac);
    out += buf;
  }
  std::snprintf(
      buf, sizeof buf,
      "\nparameters: %.1f M, %.1f M active per token; weights read per generated token: %.1f MiB "
      "of %.1f MiB; memory read bandwidth (%d threads, best of streaming reads): %.2f GB/s; "
      "generation roofline = %.1f tokens/s\n",
      r.total_params / 1e6, r.active_params / 1e6, r.weight_bytes_per_token / 1048576.0,
      r.weight_bytes_total / 1048576.0, r.n_threads, r.mem_bw_bytes_per_s / 1e9,
      r.roofline_tg_ts());
  out += buf;
  if (r.state_read > 0) {
    std::snprintf(buf, sizeof buf,
                  "recurrent state per generated token (in the roofline): %.2f MiB read + %.2f "
                  "MiB written\n",
                  r.state_read / 1048576.0, r.state_written / 1048576.0);
    out += buf;
  }
  for (const ModelBenchRow& row : r.rows) {
    const Roofline f = roofline_of(r, row);
    if (!row.samples_bw.empty() && f.valid) {
      const auto [lo, hi] = std::minmax_element(row.samples_bw.begin(), row.samples_bw.end());
      std::snprintf(buf, sizeof buf,
                    "%s beside each repetition: memory read bandwidth median %.2f GB/s (%.2f to "
                    "%.2f), roofline %.1f tokens/s; of it, median over repetitions %.0f%%\n",
                    row.test.c_str(), median_of(row.samples_bw) / 1e9, *lo / 1e9, *hi / 1e9,
                    f.roofline_ts, 100 * f.fraction);
      out += buf;
    }
    if (row.step_cost > 0) {
      std::snprintf(buf, sizeof buf,
                    "verify step cost, %s ÷ a decode step of as many sequences: %.2f× (median "
                    "over %zu repetitions, each run right after the decode one)\n",
                    row.test.c_str(), row.step_cost, row.samples_ts.size());
      out += buf;
    }
    if (row.speculation) {
      const SpeculationFigures& f = *row.speculation;
      // No proposal at all: no acceptance to report (NaN, null in the JSON).
      auto figure = [](double v, const char* format) {
        char b[32] = "n/a";
        if (!std::isnan(v)) std::snprintf(b, sizeof b, format, v);
        return std::string(b);
      };
      std::snprintf(buf, sizeof buf,
                    "speculative decoding (%s): %s ÷ its engine without speculation %.2f× "
                    "(median over %zu repetitions, each run right after a plain one); "
                    "acceptance rate %s, mean acceptance length %s; proposers %.1f%% of the "
                    "run's time (the prompt's pass included)\n",
                    f.method.c_str(), row.test.c_str(), f.speedup, row.samples_ts.size(),
                    figure(f.acceptance_rate, "%.3f").c_str(),
                    figure(f.mean_acceptance_length, "%.2f").c_str(), 100 * f.proposer_share);
      out += buf;
    }
    if (row.speedup <= 0) continue;
    std::snprintf(buf, sizeof buf,
                  "batched decode speed-up, %s ÷ tg%d%s: %.2f× (median over %zu repetitions, "
                  "each run right after a single-sequence one)\n",
                  row.test.c_str(), row.n_gen, depth_suffix(row.n_depth).c_str(), row.speedup,
                  row.samples_ts.size());
    out += buf;
    if (row.weight_bytes_per_step <= 0) continue;
    // What sharing a step's weights allows: a token's bytes ÷ a batched token's share.
    const double batched_token =
        row.weight_bytes_per_step / row.n_seqs + r.state_read + r.state_written;
    std::snprintf(buf, sizeof buf,
                  "%s reads %.1f MiB of weights a step, %.2f× one token's; at one sequence's "
                  "share of its roofline it would run %.2f× one sequence's tokens/s",
                  row.test.c_str(), row.weight_bytes_per_step / 1048576.0,
                  row.weight_bytes_per_step / r.weight_bytes_per_token,
                  r.bytes_per_token() / batched_token);
    out += buf;
    if (row.experts_per_moe_layer > 0) {
      std::snprintf(buf, sizeof buf, " (routed experts read per MoE layer a step: %.1f of %d)",
                    row.experts_per_moe_layer, r.n_expert);
      out += buf;
    }
    out += "\n";
  }
  out += profile_markdown(r);
  return out;
}

std::string model_bench_csv(const ModelBenchResult& r) {
  // model_size is every weight's bytes (llama-bench's column), as in the markdown and JSON;
  // weight_bytes_per_token what one token reads (a MoE model's active experts). The
  // speculation columns, as the JSON's "speculative" object: set on "tgN spec" rows, empty
  // elsewhere and where nothing was proposed (no acceptance to report).
  std::string out =
      "model,model_size,weight_bytes_per_token,params_total,params_active,n_threads,test,"
      "n_prompt,n_gen,avg_ts,stddev_ts,mem_bw_gbs,roofline_ts,roofline_fraction,n_depth,"
      "spec_speedup_vs_plain,spec_acceptance_rate,spec_mean_acceptance_length\n";
  auto figure = [](double v) { return std::isnan(v) ? std::string() : std::to_string(v); };
  char buf[512];
  for (const ModelBenchRow& row : r.rows) {
    Roofline f = roofline_of(r, row);
    const SpeculationFigures* s = row.speculation ? &*row.speculation : nullptr;
    std::snprintf(buf, sizeof buf,
                  "\"%s\",%llu,%llu,%llu,%llu,%d,%s,%d,%d,%.6f,%.6f,%.3f,%s,%s,%d,%s,%s,%s\n",
                  r.model.c_str(), static_cast<unsigned long long>(r.weight_bytes_total),
                  static_cast<unsigned long long>(r.weight_bytes_per_token),
                  static_cast<unsigned long long>(r.total_params),
                  static_cast<unsigned long long>(r.active_params), r.n_threads, row.test.c_str(),
                  row.n_prompt, row.n_gen, row.avg_ts, row.stddev_ts, r.mem_bw_bytes_per_s / 1e9,
                  f.valid ? std::to_string(f.roofline_ts).c_str() : "",
                  f.valid ? std::to_string(f.fraction).c_str() : "", row.n_depth,
                  s ? figure(s->speedup).c_str() : "", s ? figure(s->acceptance_rate).c_str() : "",
                  s ? figure(s->mean_acceptance_length).c_str() : "");
    out += buf;
  }
  return out;
}

nlohmann::json model_bench_json(const ModelBenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ModelBenchRow& row : r.rows) {
    Roofline f = roofline_of(r, row);
    nlohmann::json j = {{"model_filename", r.model},
                        {"model_size", r.weight_bytes_total},
                        {"n_threads", r.n_threads},
                        {"test", row.test},
                        {"n_prompt", row.n_prompt},
                        {"n_gen", row.n_gen},
                        {"n_depth", row.n_depth},
                        {"n_seqs", row.n_seqs},
                        {"avg_ts", row.avg_ts},
                        {"stddev_ts", row.stddev_ts},
                        {"median_ts", row.median_ts},
                        {"samples_ts", row.samples_ts},
                        {"weight_bytes_per_token", r.weight_bytes_per_token},
                        {"state_bytes_read_per_token", r.state_read},
                        {"state_bytes_written_per_token", r.state_written},
                        {"weight_bytes_total", r.weight_bytes_total},
                        {"params_total", r.total_params},
                        {"params_active", r.active_params},
                        {"mem_bw_gbs", r.mem_bw_bytes_per_s / 1e9}};
    if (row.weight_bytes_per_step > 0) j["weight_bytes_per_step"] = row.weight_bytes_per_step;
    if (row.experts_per_moe_layer > 0) j["experts_per_moe_layer"] = row.experts_per_moe_layer;
    j["roofline_ts"] = f.valid ? nlohmann::json(f.roofline_ts) : nlohmann::json();
    j["roofline_fraction"] = f.valid ? nlohmann::json(f.fraction) : nlohmann::json();
    if (!row.samples_bw.empty()) {
      std::vector<double> gbs;
      for (double bw : row.samples_bw) gbs.push_back(bw / 1e9);
      j["samples_mem_bw_gbs"] = gbs;
    }
    if (row.speedup > 0) j["speedup_vs_single"] = row.speedup;
    if (row.step_cost > 0) j["step_cost_vs_decode"] = row.step_cost;
    if (row.speculation) {
      const SpeculationFigures& f = *row.speculation;
      j["speculative"] = {{"method", f.method},
                          {"speedup_vs_plain", f.speedup},
                          {"acceptance_rate", f.acceptance_rate},
                          {"mean_acceptance_length", f.mean_acceptance_length},
                          {"proposer_share", f.proposer_share}};
    }
    if (row.profile.calls > 0) {
      nlohmann::json ms;
      for (int p = 0; p < ForwardProfile::kPhases; ++p)
        ms[ForwardProfile::kNames[p]] = 1e3 * row.profile.seconds[p] / row.profile.calls;
      j["profile_ms_per_call"] = std::move(ms);
    }
    rows.push_back(std::move(j));
  }
  return rows;
}

int model_main(int argc, char** argv) {
  CLI::App app{
      "Single-stream prefill and generation speed of the engine (no HTTP), llama-bench style, "
      "with the memory roofline.",
      "loom bench model"};
  ModelBenchOptions o;
  std::string format = "md";
  int64_t bw_mib = o.bw_bytes >> 20;
  app.add_option("-m,--model", o.model, "GGUF file, Hugging Face directory or synth:PRESET[:TYPE]");
  std::string hf_repo;
  hub::add_hf_option(app, &hf_repo);
  app.add_option("--ubatch-size,--ub", o.ubatch,
                 "tokens per forward pass of the prefill test (0 = the whole prompt in one; 1 = "
                 "token by token, as a decode loop would)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("-p,--n-prompt", o.n_prompt, "prompt tokens of the prefill test (0 = skip)")
      ->capture_default_str();
  app.add_option("-n,--n-gen", o.n_gen, "tokens of the generation test (0 = skip)")
      ->capture_default_str();
  app.add_option("-d,--n-depth", o.n_depth,
                 "tokens already in each sequence's cache when the generation tests start "
                 "(prefilled, not timed; tgN @ dD)")
      ->capture_default_str();
  app.add_option("-B,--batch-seqs", o.batch_seqs,
                 "also decode this many sequences together, one token each per step, for -n steps "
                 "(tgNxB, tokens/s of all sequences; 0 = skip)")
      ->capture_default_str();
  app.add_option("--verify", o.verify_tokens,
                 "also time steps of this many tokens per sequence with logits for each (a "
                 "speculative verify of N-1 proposals), alone and with --batch-seqs; reports "
                 "their cost ÷ a decode step (0 = skip)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("-t,--threads", o.n_threads, "CPU threads (0 = physical cores)")
      ->check(CLI::Range(0, 1024));
  app.add_option("-r,--repetitions", o.reps, "timed repetitions (after one warm-up)")
      ->capture_default_str();
  app.add_option("-o,--output", format, "md, csv or json")
      ->check(CLI::IsMember({"md", "csv", "json"}))
      ->capture_default_str();
  app.add_flag("--disable-sliding-window", o.disable_sliding_window,
               "attend over the whole sequence in every layer, also where the model slides a "
               "window (to measure what the windows save)");
  app.add_flag("--profile", o.profile,
               "also print where each test's time goes: ms per forward call of each phase "
               "(norms, matmuls, attention, ...)");
  spec::SpeculativeFlags spec_flags;
  spec_flags.add_to(app);
  app.add_option("--bw-mib", bw_mib, "size of the bandwidth test buffer in MiB")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (Status st = hub::resolve_hf_option(hf_repo, &o.model, true); !st.is_ok()) {
    std::fprintf(stderr, "loom bench model: %s\n", st.message().c_str());
    return 1;
  }
  o.bw_bytes = bw_mib << 20;
  if (Status st = spec_flags.apply(o.speculative); !st.is_ok()) {
    std::fprintf(stderr, "loom bench model: %s\n", st.message().c_str());
    return 1;
  }
  auto r = run_model_bench(o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "loom bench model: %s\n", r.status().message().c_str());
    return 1;
  }
  if (format == "json")
    std::printf("%s\n", model_bench_json(*r).dump(2).c_str());
  else if (format == "csv")
    std::printf("%s", model_bench_csv(*r).c_str());
  else
    std::printf("%s", model_bench_markdown(*r).c_str());
  return 0;
}

}  // namespace loom::bench
