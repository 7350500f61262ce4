// Helpers for engine tests: tiny synthetic models (optionally with a longer context or a real
// vocabulary) loaded straight into an Engine, and a run-to-completion driver.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "loom/engine.h"
#include "loom/tokenizer.h"
#include "model/model.h"
#include "tools/synth.h"

namespace loom::testing {

struct TestModelOptions {
  int32_t context_length = 0;  // 0: the preset's
  std::string vocab_path;      // "": the preset's placeholder vocabulary
  std::string preset = "tiny";
  std::string arch;  // "": the preset's architecture (llama for the plain presets)
};

// A GGUF of synth's tiny preset, with context_length rewritten if asked (synth presets are
// fixed; the prefix-cache test needs more than tiny's 512 positions).
inline std::shared_ptr<std::vector<uint8_t>> test_model_bytes(const TestModelOptions& o) {
  auto implied = parse_synth_spec("synth:" + o.preset);  // the preset's own architecture
  EXPECT_TRUE(implied.is_ok()) << implied.status().message();
  SynthOptions so = implied.is_ok() ? *implied : SynthOptions{};
  so.preset = o.preset;
  if (!o.arch.empty()) so.arch = o.arch;
  so.vocab_path = o.vocab_path;
  auto bytes = synth_model_bytes(so);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  if (o.context_length == 0) return *bytes;
  auto file = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  GgufWriter w;
  w.set_alignment(file->alignment());
  for (const auto& [key, value] : file->metadata()) w.set(key, value);
  std::string arch = file->get_string("general.architecture").value_or("llama");
  w.set_u32(arch + ".context_length", static_cast<uint32_t>(o.context_length));
  for (const GgufTensorInfo& t : file->tensors()) {
    std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
    Status st = w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  return std::make_shared<std::vector<uint8_t>>(w.to_bytes());
}

// `model_spec`: what the bytes are to the engine (a draft naming it runs on the same model).
inline std::unique_ptr<Engine> make_engine(const EngineConfig& config,
                                           const std::shared_ptr<std::vector<uint8_t>>& bytes,
                                           const std::string& model_spec = "") {
  auto file = GgufFile::parse_bytes(bytes);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  std::unique_ptr<Tokenizer> tok;
  if (auto t = Tokenizer::from_gguf(*file); t.is_ok()) tok = std::move(t).value();
  ModelLoadOptions mo;
  mo.n_threads = config.n_threads;
  auto model = Model::from_gguf(std::move(*file), mo);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  auto engine = Engine::create(std::move(*model), std::move(tok), config, model_spec);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  return engine.is_ok() ? std::move(engine).value() : nullptr;
}

inline std::vector<int32_t> random_prompt(int n, uint32_t seed, int32_t n_vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return t;
}

// Everything one request produced, gathered from its step outputs.
struct Collected {
  std::map<int32_t, std::vector<int32_t>> tokens;  // per sample index
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> finish;
  std::map<int32_t, std::string> stop_reason;
  std::vector<std::vector<float>> logits;    // every sampled row, in order
  std::vector<std::vector<int32_t>> drafts;  // every verify's proposals, in order
  int32_t num_cached_tokens = 0;
  bool finished = false;
  int n_outputs = 0;
};

// Two runs of the same requests agree: tokens, text and finish reasons per sample, and every
// sampled row's logits bit for bit (as a set for n > 1, whose samples' rows interleave
// differently when a speculative verify samples several rows of one sample in a step).
inline void expect_same_outputs(const std::map<std::string, Collected>& want,
                                const std::map<std::string, Collected>& got,
                                const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [id, w] : want) {
    const Collected& g = got.at(id);
    EXPECT_EQ(g.tokens, w.tokens) << what << ": " << id;
    EXPECT_EQ(g.text, w.text) << what << ": " << id;
    EXPECT_EQ(g.finish, w.finish) << what << ": " << id;
    auto rows_w = w.logits, rows_g = g.logits;
    if (w.tokens.size() > 1) {
      std::sort(rows_w.begin(), rows_w.end());
      std::sort(rows_g.begin(), rows_g.end());
    }
    ASSERT_EQ(rows_g.size(), rows_w.size()) << what << ": " << id;
    for (size_t i = 0; i < rows_w.size(); ++i)
      ASSERT_EQ(rows_g[i], rows_w[i]) << what << ": " << id << " row " << i;
  }
}

// Steps until nothing is left; returns per-request results. Fails the test on a step error.
inline std::map<std::string, Collected> run_all(Engine& engine, int max_steps = 100000) {
  std::map<std::string, Collected> out;
  for (int i = 0; i < max_steps && engine.has_unfinished(); ++i) {
    auto r = engine.step();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (!r.is_ok()) break;
    for (const auto& [id, row] : engine.last_logits()) out[id].logits.push_back(row);
    for (const auto& [id, draft] : engine.last_drafts()) out[id].drafts.push_back(draft);
    for (const RequestOutput& o : *r) {
      Collected& c = out[o.request_id];
      EXPECT_FALSE(c.finished) << "output after the final one for " << o.request_id;
      c.finished = o.finished;
      c.num_cached_tokens = o.num_cached_tokens;
      ++c.n_outputs;
      for (const CompletionOutput& co : o.outputs) {
        auto& t = c.tokens[co.index];
        t.insert(t.end(), co.token_ids.begin(), co.token_ids.end());
        c.text[co.index] += co.text;
        if (co.finished()) {
          c.finish[co.index] = co.finish_reason;
          c.stop_reason[co.index] = co.stop_reason;
        }
      }
    }
  }
  EXPECT_FALSE(engine.has_unfinished());
  return out;
}

// `requests` to completion on a fresh engine of `config` that keeps every sampled row's logits;
// the KV pool (and every state slot) must drain. The engine's metrics afterwards in *metrics.
inline std::map<std::string, Collected> run_requests(
    const EngineConfig& config, const std::shared_ptr<std::vector<uint8_t>>& bytes,
    const std::vector<GenerateRequest>& requests, EngineMetrics* metrics = nullptr,
    const std::string& model_spec = "") {
  auto e = make_engine(config, bytes, model_spec);
  if (!e) return {};
  e->keep_logits(true);
  for (const GenerateRequest& r : requests) EXPECT_TRUE(e->add_request(r).is_ok()) << r.request_id;
  auto out = run_all(*e);
  EXPECT_EQ(e->check_kv_drained(), "");
  if (metrics) *metrics = e->metrics();
  return out;
}

// Runs `r` twice on one engine of `config` (ids "again0", "again1"): both times its tokens
// are `want`, and the second run is served partly from the prefix cache the first one left.
inline void expect_rerun_hits_prefix(const EngineConfig& config,
                                     const std::shared_ptr<std::vector<uint8_t>>& bytes,
                                     GenerateRequest r,
                                     const std::map<int32_t, std::vector<int32_t>>& want) {
  auto e = make_engine(config, bytes);
  ASSERT_TRUE(e != nullptr);
  for (int round = 0; round < 2; ++round) {
    r.request_id = "again" + std::to_string(round);
    ASSERT_TRUE(e->add_request(r).is_ok());
    auto out = run_all(*e);
    EXPECT_EQ(out.at(r.request_id).tokens, want) << "round " << round;
    if (round == 1) {
      EXPECT_GT(out.at(r.request_id).num_cached_tokens, 0);
    }
  }
  EXPECT_EQ(e->check_kv_drained(), "");
}

// The kv_cache_memory_gib that gives `config` on this model a pool of n_blocks blocks.
inline double kv_gib_for_blocks(const EngineConfig& config,
                                const std::shared_ptr<std::vector<uint8_t>>& bytes, int n_blocks) {
  auto probe = make_engine(config, bytes);
  if (!probe) return 0;
  const uint64_t block_bytes =
      KvCache::bytes_per_block(probe->model().config(), config.block_size, config.kv_dtype);
  return n_blocks * static_cast<double>(block_bytes) / double(1ull << 30);
}

}  // namespace loom::testing
