// `loom bench model` on synth:tiny: rows, statistics and the roofline fields are consistent.
#include "bench/model_bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "spec/spec_config.h"

namespace loom::bench {
namespace {

// pp32, tg8 and tg8x4 on synth:tiny, 3 timed repetitions each.
ModelBenchOptions tiny_options(int n_threads) {
  ModelBenchOptions o;
  o.model = "synth:tiny";
  o.n_prompt = 32;
  o.n_gen = 8;
  o.batch_seqs = 4;
  o.n_threads = n_threads;
  o.reps = 3;
  o.bw_bytes = 32 << 20;
  o.bw_reps = 2;
  return o;
}

TEST(ModelBench, RowsAndRoofline) {
  auto r = run_model_bench(tiny_options(1));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_EQ(r->rows[0].test, "pp32");
  EXPECT_EQ(r->rows[1].test, "tg8");
  EXPECT_EQ(r->rows[2].test, "tg8x4");
  EXPECT_EQ(r->rows[2].n_seqs, 4);
  EXPECT_EQ(r->n_threads, 1);
  EXPECT_GT(r->weight_bytes_per_token, 0u);
  EXPECT_GT(r->mem_bw_bytes_per_s, 1e8);  // any machine streams more than 100 MB/s
  for (const ModelBenchRow& row : r->rows) {
    ASSERT_EQ(row.samples_ts.size(), 3u);
    double lo = *std::min_element(row.samples_ts.begin(), row.samples_ts.end());
    double hi = *std::max_element(row.samples_ts.begin(), row.samples_ts.end());
    EXPECT_GT(lo, 0);
    EXPECT_GE(row.avg_ts, lo);
    EXPECT_LE(row.avg_ts, hi);
    EXPECT_LE(row.stddev_ts, hi - lo + 1e-9);
    std::vector<double> sorted = row.samples_ts;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(row.median_ts, sorted[1]);
  }
  auto j = model_bench_json(*r);
  ASSERT_EQ(j.size(), 3u);
  for (const auto& row : j)
    for (const char* k :
         {"test", "avg_ts", "stddev_ts", "median_ts", "n_threads", "model_size", "n_seqs"})
      EXPECT_TRUE(row.contains(k)) << k;
  EXPECT_TRUE(j[0]["roofline_ts"].is_null());
  // tg8's roofline comes from the bandwidth measured beside each of its repetitions, and so
  // does tg8x4's, whose steps read the weights once for 4 tokens: a dense model's every
  // matrix, and one embedding row a token more than tg8's steps (synth:tiny, F32).
  EXPECT_TRUE(r->rows[0].samples_bw.empty());
  const ModelBenchRow& tg4 = r->rows[2];
  ASSERT_EQ(tg4.samples_bw.size(), 3u);
  EXPECT_EQ(r->rows[1].weight_bytes_per_step, static_cast<double>(r->weight_bytes_per_token));
  EXPECT_EQ(tg4.weight_bytes_per_step, r->weight_bytes_per_token + 3 * 4.0 * 64);
  EXPECT_EQ(tg4.experts_per_moe_layer, 0.0);
  std::vector<double> roofs4;
  for (double bw : tg4.samples_bw) roofs4.push_back(4 * bw / tg4.weight_bytes_per_step);
  std::sort(roofs4.begin(), roofs4.end());
  EXPECT_NEAR(j[2]["roofline_ts"].get<double>(), roofs4[1], 1e-6 * roofs4[1]);
  const ModelBenchRow& tg = r->rows[1];
  ASSERT_EQ(tg.samples_bw.size(), 3u);
  std::vector<double> roofs, shares;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(tg.samples_bw[i], 1e8);
    roofs.push_back(tg.samples_bw[i] / r->weight_bytes_per_token);
    shares.push_back(tg.samples_ts[i] / roofs.back());
  }
  std::sort(roofs.begin(), roofs.end());
  std::sort(shares.begin(), shares.end());
  EXPECT_NEAR(j[1]["roofline_ts"].get<double>(), roofs[1], 1e-6 * roofs[1]);
  EXPECT_NEAR(j[1]["roofline_fraction"].get<double>(), shares[1], 1e-9 * shares[1]);
  ASSERT_EQ(j[1]["samples_mem_bw_gbs"].size(), 3u);
  EXPECT_NEAR(j[1]["samples_mem_bw_gbs"][2].get<double>(), tg.samples_bw[2] / 1e9, 1e-9);
  EXPECT_FALSE(j[0].contains("samples_mem_bw_gbs"));
  const std::string md = model_bench_markdown(*r);
  EXPECT_NE(md.find("| tg8 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| tg8x4 |"), std::string::npos) << md;
  EXPECT_NE(md.find("tg8 beside each repetition: memory read bandwidth median"), std::string::npos)
      << md;
  EXPECT_NE(model_bench_csv(*r).find(",pp32,32,0,"), std::string::npos);
}

// A repetition's share of the roofline is taken against the bandwidth measured beside it, and
// the row reports the median of those shares: here 100 t/s at 1 GB/s, 200 at 4 and 150 at 1
// (bytes per token 1e7: rooflines 100, 400, 100) are at 100%, 50% and 150%, median 100%, where
// the median speed over the median roofline would say 150%. Without samples, the result's one
// bandwidth; rows other than single-sequence generation have none.
TEST(ModelBench, RooflineFractionIsTheMedianOfPerRepetitionShares) {
  ModelBenchResult r;
  r.weight_bytes_per_token = 10'000'000;
  r.mem_bw_bytes_per_s = 2e9;
  ModelBenchRow tg;
  tg.test = "tg64";
  tg.n_gen = 64;
  tg.samples_ts = {100, 200, 150};
  tg.median_ts = 150;
  tg.samples_bw = {1e9, 4e9, 1e9};
  Roofline f = roofline_of(r, tg);
  ASSERT_TRUE(f.valid);
  EXPECT_DOUBLE_EQ(f.roofline_ts, 100);
  EXPECT_DOUBLE_EQ(f.fraction, 1.0);
  tg.samples_bw.clear();
  f = roofline_of(r, tg);
  ASSERT_TRUE(f.valid);
  EXPECT_DOUBLE_EQ(f.roofline_ts, 200);
  EXPECT_DOUBLE_EQ(f.fraction, 0.75);
  ModelBenchRow batched = tg;
  batched.test = "tg64x16";
  batched.n_seqs = 16;
  EXPECT_FALSE(roofline_of(r, batched).valid);
  ModelBenchRow pp;
  pp.test = "pp512";
  pp.n_prompt = 512;
  pp.samples_ts = {1000};
  EXPECT_FALSE(roofline_of(r, pp).valid);
}

// The batched speed-up pairs each tgNxB repetition with the tgN one run just before it: the
// median of those ratios, not a ratio of the two medians.
TEST(ModelBench, BatchedSpeedupIsTheMedianOfPairedRatios) {
  auto r = run_model_bench(tiny_options(1));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  const ModelBenchRow &single = r->rows[1], &batched = r->rows[2];
  ASSERT_EQ(single.samples_ts.size(), batched.samples_ts.size());
  std::vector<double> ratios;
  for (size_t i = 0; i < single.samples_ts.size(); ++i)
    ratios.push_back(batched.samples_ts[i] / single.samples_ts[i]);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_DOUBLE_EQ(batched.speedup, ratios[1]);
  EXPECT_EQ(single.speedup, 0);
  EXPECT_EQ(r->rows[0].speedup, 0);
  const auto j = model_bench_json(*r);
  EXPECT_DOUBLE_EQ(j[2]["speedup_vs_single"].get<double>(), batched.speedup);
  EXPECT_FALSE(j[1].contains("speedup_vs_single"));
  EXPECT_NE(model_bench_markdown(*r).find("batched decode speed-up, tg8x4 ÷ tg8: "),
            std::string::npos);
}

// --profile: each test's timed forward calls, every phase timed, within the measured time.
TEST(ModelBench, ProfileCoversTheTimedCalls) {
  ModelBenchOptions o = tiny_options(2);
  o.profile = true;
  auto r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  const int64_t calls[] = {3, 3 * 8, 3 * 8};  // one per prompt, one per step
  for (size_t i = 0; i < 3; ++i) {
    const ModelBenchRow& row = r->rows[i];
    EXPECT_EQ(row.profile.calls, calls[i]) << row.test;
    double phases = 0, timed = 0;
    for (double s : row.profile.seconds) phases += s;
    const int64_t tokens = row.n_prompt + row.n_gen * row.n_seqs;
    for (double ts : row.samples_ts) timed += tokens / ts;
    EXPECT_GT(phases, 0) << row.test;
    EXPECT_LE(phases, timed * 1.0001) << row.test;  // forward calls are part of the timed reps
    for (int p : {ForwardProfile::kQkv, ForwardProfile::kAttention, ForwardProfile::kGateUp,
                  ForwardProfile::kDown, ForwardProfile::kOutput})
      EXPECT_GT(row.profile.seconds[p], 0) << row.test << " " << ForwardProfile::kNames[p];
  }
  const std::string md = model_bench_markdown(*r);
  EXPECT_NE(md.find("| phase, ms per forward call | pp32 | tg8 | tg8x4 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| attention |"), std::string::npos) << md;
  EXPECT_TRUE(model_bench_json(*r)[2].contains("profile_ms_per_call"));
  o.profile = false;
  o.batch_seqs = 0;
  auto plain = run_model_bench(o);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->rows[0].profile.calls, 0);
  EXPECT_EQ(model_bench_markdown(*plain).find("phase"), std::string::npos);
}

// -d: generation starts with that many tokens in every sequence's cache; the prefill that
// puts them there is not timed or profiled, and depth + generation must fit the context.
TEST(ModelBench, DepthStartsGenerationDeeperInTheCache) {
  ModelBenchOptions o = tiny_options(1);
  o.n_depth = 40;
  o.profile = true;
  auto r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_EQ(r->rows[0].test, "pp32");
  EXPECT_EQ(r->rows[0].n_depth, 0);
  EXPECT_EQ(r->rows[1].test, "tg8 @ d40");
  EXPECT_EQ(r->rows[2].test, "tg8x4 @ d40");
  for (size_t i : {1, 2}) {
    EXPECT_EQ(r->rows[i].n_depth, 40);
    EXPECT_EQ(r->rows[i].profile.calls, 3 * 8) << r->rows[i].test;  // the timed steps only
  }
  const auto j = model_bench_json(*r);
  EXPECT_EQ(j[0]["n_depth"], 0);
  EXPECT_EQ(j[2]["n_depth"], 40);
  EXPECT_NE(model_bench_csv(*r).find(",tg8 @ d40,0,8,"), std::string::npos);
  EXPECT_NE(model_bench_markdown(*r).find("batched decode speed-up, tg8x4 @ d40 ÷ tg8 @ d40: "),
            std::string::npos);

  // Generation really attends over the prefilled tokens: 480 deep, each step's attention reads
  // ~100 times the keys it reads from an empty cache (measured 5-8 times the time; 2 asked).
  // Sub-millisecond timings on a shared machine: each depth's figure is the fastest of five
  // runs of 32 steps, so a run slowed by another process cannot decide the comparison.
  auto attention_s = [](int32_t depth) {
    double best = 1e9;
    for (int run = 0; run < 5; ++run) {
      ModelBenchOptions d = tiny_options(1);
      d.n_prompt = 0;
      d.n_gen = 32;
      d.batch_seqs = 0;
      d.n_depth = depth;
      d.profile = true;
      auto r = run_model_bench(d);
      EXPECT_TRUE(r.is_ok()) << r.status().message();
      if (r.is_ok()) best = std::min(best, r->rows[0].profile.seconds[ForwardProfile::kAttention]);
    }
    return best;
  };
  EXPECT_GT(attention_s(480), 2 * attention_s(0));

  // synth:tiny has a context of 512: 504 + 8 fills it exactly, one more is an error.
  o = tiny_options(1);
  o.n_prompt = 0;
  o.n_gen = 8;
  o.batch_seqs = 2;
  o.reps = 1;
  o.n_depth = 504;
  auto full = run_model_bench(o);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  EXPECT_EQ(full->rows[0].test, "tg8 @ d504");
  o.n_depth = 505;
  auto over = run_model_bench(o);
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.status().message().find("-d + -n 513 exceeds"), std::string::npos)
      << over.status().message();
  o.n_depth = -1;
  EXPECT_FALSE(run_model_bench(o).is_ok());
}

// Speculative options: generation through the engine with and without them, alternating. The
// target as its own draft (synth:tiny naming itself: the draft runs on the target's weights)
// agrees with every greedy token, so every proposal is accepted; the speed-up is the median of
// the paired ratios.
TEST(ModelBench, SpeculationRunsThroughTheEngine) {
  ModelBenchOptions o = tiny_options(1);
  o.n_prompt = 0;
  o.batch_seqs = 0;
  o.n_gen = 24;
  o.speculative.method = SpeculativeConfig::Method::kDraftModel;
  o.speculative.model = "synth:tiny";
  o.speculative.num_speculative_tokens = 4;
  auto r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_EQ(r->rows[1].test, "tg24 engine");
  EXPECT_EQ(r->rows[2].test, "tg24 spec");
  EXPECT_FALSE(r->rows[1].speculation.has_value());
  ASSERT_TRUE(r->rows[2].speculation.has_value());
  const SpeculationFigures& f = *r->rows[2].speculation;
  EXPECT_EQ(f.method, "draft model synth:tiny, k = 4");
  EXPECT_EQ(f.acceptance_rate, 1.0);
  EXPECT_GT(f.mean_acceptance_length, 3.0);  // 23 decode tokens in verifies of up to 5
  EXPECT_LE(f.mean_acceptance_length, 5.0);
  EXPECT_GT(f.proposer_share, 0.0);
  EXPECT_LT(f.proposer_share, 1.0);
  std::vector<double> ratios;
  for (size_t i = 0; i < 3; ++i)
    ratios.push_back(r->rows[2].samples_ts[i] / r->rows[1].samples_ts[i]);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_DOUBLE_EQ(f.speedup, ratios[1]);
  EXPECT_NE(model_bench_markdown(*r).find("speculative decoding (draft model synth:tiny, k = 4): "
                                          "tg24 spec ÷ its engine without speculation"),
            std::string::npos)
      << model_bench_markdown(*r);
  const auto j = model_bench_json(*r);
  EXPECT_EQ(j[2]["speculative"]["acceptance_rate"].get<double>(), 1.0);
  EXPECT_FALSE(j[1].contains("speculative"));

  // n-gram lookup over random tokens: whatever it proposes is verified, never more accepted.
  o.speculative = {};
  o.speculative.method = SpeculativeConfig::Method::kNgram;
  o.speculative.num_speculative_tokens = 3;
  o.speculative.prompt_lookup_min = 1;
  o.speculative.prompt_lookup_max = 2;
  o.n_depth = 40;
  r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_EQ(r->rows[2].test, "tg24 spec @ d40");
  ASSERT_TRUE(r->rows[2].speculation.has_value());
  EXPECT_EQ(r->rows[2].speculation->method, "ngram, k = 3, lookup 1..2");
  EXPECT_LE(r->rows[2].speculation->acceptance_rate, 1.0);
}

// The engine proposes no further than max_model_len: the bench leaves room for the last
// verify's proposals past depth + generation, and for MTP's default count (one per MTP layer,
// unknown until the model loads) room for the most a config may ask.
TEST(ModelBench, SpeculativeEngineLeavesRoomForTheLastProposals) {
  ModelBenchOptions o = tiny_options(1);
  o.n_depth = 40;
  o.n_gen = 24;
  o.speculative.method = SpeculativeConfig::Method::kNgram;
  o.speculative.num_speculative_tokens = 3;
  EXPECT_EQ(speculative_bench_config(o).max_model_len, 40 + 24 + 3);
  o.speculative = {};
  o.speculative.method = SpeculativeConfig::Method::kMtp;  // k unset: the model's layers
  EXPECT_EQ(speculative_bench_config(o).max_model_len, 40 + 24 + spec::kMaxSpeculativeTokens);
}

// Speculation that never proposes (an n-gram of 32 in 4 + 8 random tokens): no acceptance
// rate or length to report, not 0 (JSON null).
TEST(ModelBench, SpeculationWithoutProposalsHasNoAcceptance) {
  ModelBenchOptions o = tiny_options(1);
  o.n_prompt = 0;
  o.batch_seqs = 0;
  o.n_gen = 8;
  o.n_depth = 4;
  o.speculative.method = SpeculativeConfig::Method::kNgram;
  o.speculative.num_speculative_tokens = 2;
  o.speculative.prompt_lookup_min = o.speculative.prompt_lookup_max = 32;
  auto r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 3u);
  ASSERT_TRUE(r->rows[2].speculation.has_value());
  EXPECT_TRUE(std::isnan(r->rows[2].speculation->acceptance_rate));
  EXPECT_TRUE(std::isnan(r->rows[2].speculation->mean_acceptance_length));
  // As `bench model -o json` writes it.
  const auto j = nlohmann::json::parse(model_bench_json(*r).dump());
  EXPECT_TRUE(j[2]["speculative"]["acceptance_rate"].is_null()) << j[2].dump();
  EXPECT_TRUE(j[2]["speculative"]["mean_acceptance_length"].is_null()) << j[2].dump();
}

// `-o csv` carries what md and json report for "tgN spec" rows: speed-up over the plain
// engine, acceptance rate and mean acceptance length; empty cells on other rows and where
// nothing was proposed (NaN: no rate, not 0).
TEST(ModelBench, CsvHasTheSpeculationFigures) {
  ModelBenchResult r;
  r.model = "m.gguf";
  r.n_threads = 1;
  ModelBenchRow plain;
  plain.test = "tg8 engine";
  plain.n_gen = 8;
  ModelBenchRow spec = plain;
  spec.test = "tg8 spec";
  spec.speculation = SpeculationFigures{"ngram, k = 4, lookup 5..5", 1.25, 0.5, 2.5, 0.1};
  ModelBenchRow none = spec;
  none.test = "tg8 spec @ d4";
  none.speculation->acceptance_rate = none.speculation->mean_acceptance_length = std::nan("");
  r.rows = {plain, spec, none};
  const std::string csv = model_bench_csv(r);
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = csv.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(csv.substr(at, end - at));
  ASSERT_EQ(lines.size(), 4u) << csv;
  const std::string header_end =
      ",n_depth,spec_speedup_vs_plain,spec_acceptance_rate,spec_mean_acceptance_length";
  EXPECT_EQ(lines[0].substr(lines[0].size() - header_end.size()), header_end) << lines[0];
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  EXPECT_TRUE(ends_with(lines[1], ",tg8 engine,0,8,0.000000,0.000000,0.000,,,0,,,")) << lines[1];
  EXPECT_TRUE(ends_with(lines[2], ",0,1.250000,0.500000,2.500000")) << lines[2];
  EXPECT_TRUE(ends_with(lines[3], ",0,1.250000,,")) << lines[3];
  // As many columns on every line as the header names.
  for (const std::string& line : lines)
    EXPECT_EQ(std::count(line.begin(), line.end(), ','),
              std::count(lines[0].begin(), lines[0].end(), ','))
        << line;
}

TEST(ModelBench, BadArguments) {
  ModelBenchOptions o;
  o.model = "synth:tiny";
  o.n_prompt = 0;
  o.n_gen = 0;
  EXPECT_FALSE(run_model_bench(o).is_ok());
  o.n_gen = 100000;  // beyond the context
  EXPECT_FALSE(run_model_bench(o).is_ok());
  o.n_gen = 1;  // speculation needs decode steps to time
  o.speculative.method = SpeculativeConfig::Method::kNgram;
  o.speculative.num_speculative_tokens = 2;
  auto one = run_model_bench(o);
  ASSERT_FALSE(one.is_ok());
  EXPECT_NE(one.status().message().find("-n must be at least 2"), std::string::npos);
  o.n_gen = 4;  // a draft that does not exist: refused before anything is measured
  o.speculative.method = SpeculativeConfig::Method::kDraftModel;
  o.speculative.model = "/nonexistent/draft.gguf";
  auto missing = run_model_bench(o);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("draft model"), std::string::npos)
      << missing.status().message();
  o.speculative = {};
  o.model = "/nonexistent.gguf";
  EXPECT_FALSE(run_model_bench(o).is_ok());
}

TEST(ModelBench, CliJsonOutput) {
  if (!std::filesystem::exists(LOOM_BINARY))
    GTEST_SKIP() << "loom binary not built: " << LOOM_BINARY;
  std::string cmd = std::string(LOOM_BINARY) +
                    " bench model -m synth:tiny -p 16 -n 4 -r 2 -t 1 -o json --bw-mib 16";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << out;
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["test"], "pp16");
  EXPECT_EQ(j[1]["test"], "tg4");
  EXPECT_GT(j[1]["avg_ts"].get<double>(), 0);
}

// A Mixture-of-Experts model reads 2 of its 8 experts per token: the roofline is computed
// from those bytes, and the totals count every tensor, as `loom inspect` does (tiny-moe: see
// tests/cli/inspect_test; model/weight_footprint.h).
TEST(ModelBench, MoeCountsActiveExpertsOnly) {
  ModelBenchOptions o = tiny_options(1);
  o.model = "synth:tiny-moe";
  o.batch_seqs = 0;
  o.reps = 1;
  auto r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->total_params, 2u * (12960 + 8 * 6144) + 2 * 32768 + 64);
  // A token reads one of the 512 embedding rows and the whole (untied) LM head.
  EXPECT_EQ(r->active_params, 2u * (12960 + 2 * 6144) + 64 + 32768 + 64);
  // f32 weights: 4 bytes a parameter, the whole model (llama-bench's size) and what a token reads.
  EXPECT_EQ(r->weight_bytes_total, 4 * r->total_params);
  EXPECT_EQ(r->weight_bytes_per_token, 4 * r->active_params);
  EXPECT_NE(model_bench_markdown(*r).find("active per token"), std::string::npos);

  // model_size is the whole model in every format (llama-bench's column; the markdown's size),
  // never the bytes a token reads, which have their own field.
  const nlohmann::json j = model_bench_json(*r);
  ASSERT_FALSE(j.empty());
  for (const nlohmann::json& row : j) {
    EXPECT_EQ(row["model_size"].get<uint64_t>(), 4 * r->total_params);
    EXPECT_EQ(row["weight_bytes_total"].get<uint64_t>(), 4 * r->total_params);
    EXPECT_EQ(row["weight_bytes_per_token"].get<uint64_t>(), 4 * r->active_params);
    EXPECT_EQ(row["params_total"].get<uint64_t>(), r->total_params);
    EXPECT_EQ(row["params_active"].get<uint64_t>(), r->active_params);
  }
  char mib[32];
  std::snprintf(mib, sizeof mib, "| %.2f MiB |", 4.0 * r->total_params / 1048576.0);
  EXPECT_NE(model_bench_markdown(*r).find(mib), std::string::npos) << mib;

  // The CSV, read by its header's names: the same figures as the JSON.
  const std::string csv = model_bench_csv(*r);
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    for (size_t at = 0;;) {
      size_t end = line.find(',', at);
      cells.push_back(line.substr(at, end - at));
      if (end == std::string::npos) return cells;
      at = end + 1;
    }
  };
  const size_t eol = csv.find('\n');
  const std::vector<std::string> header = split(csv.substr(0, eol));
  const std::vector<std::string> first =
      split(csv.substr(eol + 1, csv.find('\n', eol + 1) - eol - 1));
  ASSERT_EQ(header.size(), first.size()) << csv;
  auto cell = [&](const std::string& name) -> std::string {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? "<no column " + name + ">" : first[it - header.begin()];
  };
  EXPECT_EQ(cell("model_size"), std::to_string(4 * r->total_params));
  EXPECT_EQ(cell("weight_bytes_per_token"), std::to_string(4 * r->active_params));
  EXPECT_EQ(cell("params_total"), std::to_string(r->total_params));
  EXPECT_EQ(cell("params_active"), std::to_string(r->active_params));
}

// Batched decode of a Mixture-of-Experts model reads each expert its sequences share once a
// step: the rows carry the bytes a step read, counted as the CPU backend runs (tiny-moe, F32:
// 2 layers of 8 experts of 6,144 parameters, 2 a token; per call the attention, routers, LM
// head and norm, 2 x 12,960 + 32,768 + 64 parameters, and one 64-float embedding row a token).
TEST(ModelBench, BatchedRowsCountTheExpertsTheirStepsShare) {
  ModelBenchOptions o = tiny_options(1);
  o.model = "synth:tiny-moe";
  o.n_prompt = 0;
  o.reps = 2;
  auto r = run_model_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 2u);
  const ModelBenchRow& one = r->rows[0];
  const ModelBenchRow& four = r->rows[1];
  ASSERT_EQ(four.n_seqs, 4);
  EXPECT_EQ(r->n_expert, 8);
  // One token a step: exactly what a token reads, its 2 experts in each layer.
  EXPECT_EQ(one.weight_bytes_per_step, static_cast<double>(r->weight_bytes_per_token));
  EXPECT_EQ(one.experts_per_moe_layer, 2.0);
  // Four: between 2 and 8 distinct experts a layer (random routing of random tokens: more
  // than 2 on average), and the step's bytes are the call's, four rows and those experts.
  EXPECT_GT(four.experts_per_moe_layer, 2.0);
  EXPECT_LE(four.experts_per_moe_layer, 8.0);
  const double per_call = 4.0 * (2 * 12960 + 32768 + 64), row = 4.0 * 64, expert = 4.0 * 6144;
  EXPECT_NEAR(four.weight_bytes_per_step,
              per_call + 4 * row + 2 * four.experts_per_moe_layer * expert, 1e-6);
  // Its roofline: 4 tokens per step's bytes at the bandwidth beside each repetition.
  ASSERT_EQ(four.samples_bw.size(), 2u);
  const Roofline f = roofline_of(*r, four);
  ASSERT_TRUE(f.valid);
  std::vector<double> roof;
  for (double bw : four.samples_bw) roof.push_back(4 * bw / four.weight_bytes_per_step);
  EXPECT_NEAR(f.roofline_ts, (roof[0] + roof[1]) / 2, 1e-9 * f.roofline_ts);
  const std::string md = model_bench_markdown(*r);
  EXPECT_NE(md.find("tg8x4 reads "), std::string::npos) << md;
  EXPECT_NE(md.find(" of 8)"), std::string::npos) << md;
  const nlohmann::json j = model_bench_json(*r);
  EXPECT_EQ(j[1]["weight_bytes_per_step"].get<double>(), four.weight_bytes_per_step);
  EXPECT_EQ(j[1]["experts_per_moe_layer"].get<double>(), four.experts_per_moe_layer);
}

}  // namespace
}  // namespace loom::bench
