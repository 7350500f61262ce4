// What the MTP model tests share (mtp_test.cpp: DeepSeek's module on tiny-mla;
// hybrid_mtp_test.cpp: the Qwen modules on the hybrid presets): a synth model with the GGUF
// bytes the reference reads, rows of one sequence through a model, and the module's rows
// against the reference's mtp_forward.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"
#include "tools/synth.h"

namespace loom::test {

struct Synth {
  GgufFile file;  // the reference reads the same bytes
  std::unique_ptr<Model> model;
};

// "PRESET[@ARCH]": a synth preset, ARCH another family for its shape.
inline Synth load_synth(const std::string& spec) {
  const size_t at = spec.find('@');
  auto so = parse_synth_spec("synth:" + spec.substr(0, at));
  EXPECT_TRUE(so.is_ok()) << so.status().message();
  if (at != std::string::npos) so->arch = spec.substr(at + 1);
  auto bytes = synth_model_bytes(*so);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(f.is_ok());
  auto f2 = GgufFile::parse_bytes(*bytes);
  auto m = Model::from_gguf(std::move(*f2), {2});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return {std::move(*f), std::move(*m)};
}

// A cache of 8 blocks of 16 for `c`, with one state slot when it has recurrent layers.
inline std::unique_ptr<KvCache> mtp_test_cache(const ModelConfig& c) {
  KvLayout layout = KvLayout::single(c.n_layer, 8);
  if (KvCache::state_bytes_per_slot(c) > 0) layout.num_state_slots = 1;
  return KvCache::create(c, layout, 16, Dtype::kF32).value();
}

// Runs rows [begin, end) of one sequence (blocks 0..7, state slot 0 if any) through `m`, with
// `prev_hidden` rows for an MTP module; appends logits and the states a module reads
// (Model::forward's residual output).
inline Status run_rows(Model& m, KvCache& kv, const std::vector<int32_t>& tokens,
                       const std::vector<float>& prev_hidden, int32_t begin, int32_t end,
                       std::vector<float>& logits, std::vector<float>& states) {
  const int64_t E = m.config().n_embd, V = m.config().n_vocab;
  std::vector<int32_t> table(8);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  Batch b;
  BatchSequence s{table.data(), static_cast<int32_t>(table.size()), begin, end - begin, 0};
  if (kv.num_state_slots() > 0) s.state_slot = 0;
  b.sequences.push_back(s);
  for (int32_t p = begin; p < end; ++p) {
    b.tokens.push_back(tokens[p]);
    b.pos.push_back(p);
    b.seq.push_back(0);
    b.logits_rows.push_back(p - begin);
  }
  if (!prev_hidden.empty())
    b.prev_hidden.assign(prev_hidden.begin() + begin * E, prev_hidden.begin() + end * E);
  std::vector<float> lg((end - begin) * V), h((end - begin) * E);
  LOOM_RETURN_IF_ERROR(m.forward(b, kv, lg.data(), nullptr, h.data()));
  logits.insert(logits.end(), lg.begin(), lg.end());
  states.insert(states.end(), h.begin(), h.end());
  return Status::ok();
}

// Module 0 of `target` over rows 0..n-1 (row p: tokens[p] with hidden[p]) in one chunk: its
// logits (empty, with the failure reported, when it cannot run).
inline std::vector<float> module_logits(Model& target, const std::vector<int32_t>& tokens,
                                        const std::vector<float>& hidden) {
  auto mod = target.mtp_module(0);
  EXPECT_TRUE(mod.is_ok()) << mod.status().message();
  if (!mod.is_ok()) return {};
  auto kv = mtp_test_cache((*mod)->config());
  std::vector<float> logits, states;
  const Status st =
      run_rows(**mod, *kv, tokens, hidden, 0, static_cast<int32_t>(tokens.size()), logits, states);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return logits;
}

// Module 0 of `m` over rows p = 0..n-2 (token tokens[p + 1] with the target's state row p of
// `hidden`), as a chunk of 5 and then row by row, and the reference's mtp_forward over the same
// rows: both modules' logits and output states, and their relative errors (infinite when a
// run failed, with the failure reported).
struct ModuleRun {
  std::vector<int32_t> tokens;  // the module's row tokens
  std::vector<float> hidden;    // its rows' target states
  std::vector<float> logits, out, ref_logits, ref_out;
  double logits_err = std::numeric_limits<double>::infinity();
  double out_err = std::numeric_limits<double>::infinity();
};
inline ModuleRun run_module_against_reference(Model& m, const GgufFile& file,
                                              const std::vector<int32_t>& tokens,
                                              const std::vector<float>& hidden) {
  const ModelConfig& c = m.config();
  const int32_t n = static_cast<int32_t>(tokens.size());
  ModuleRun r;
  r.tokens.assign(tokens.begin() + 1, tokens.end());
  r.hidden.assign(hidden.begin(), hidden.begin() + (n - 1) * c.n_embd);
  auto ref =
      reference::mtp_forward(c, reference::gguf_lookup(file), 0, r.tokens, r.hidden, &r.ref_out);
  auto mod = m.mtp_module(0);
  if (!ref.is_ok() || !mod.is_ok()) {
    ADD_FAILURE() << (ref.is_ok() ? mod.status().message() : ref.status().message());
    return r;
  }
  r.ref_logits = std::move(*ref);
  auto kv = mtp_test_cache((*mod)->config());
  Status st = run_rows(**mod, *kv, r.tokens, r.hidden, 0, 5, r.logits, r.out);
  for (int32_t p = 5; st.is_ok() && p < n - 1; ++p)
    st = run_rows(**mod, *kv, r.tokens, r.hidden, p, p + 1, r.logits, r.out);
  if (!st.is_ok() || r.logits.size() != r.ref_logits.size()) {
    ADD_FAILURE() << "module run: " << st.message();
    return r;
  }
  r.logits_err = rel_err(r.logits.data(), r.ref_logits.data(), r.ref_logits.size());
  r.out_err = rel_err(r.out.data(), r.ref_out.data(), r.ref_out.size());
  return r;
}

}  // namespace loom::test
