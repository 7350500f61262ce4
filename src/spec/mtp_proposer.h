// Multi-token prediction proposals (DeepSeek-V3's MTP modules, ModelConfig::n_mtp_layers): the
// target's own next-token-prediction layer proposes from the target's hidden states.
//
// The module at position p reads the target's hidden state h_p (before its final norm) and the
// token t_{p+1}, and its logits predict t_{p+2} (vLLM's indexing: the row sits at h_p's
// position, so a sequence's rows start at position 0 with no gap). Its K/V (one more attention
// layer) live in the target's blocks, addressed through the target's block tables as a draft
// model's are (spec/draft_model.h), so the block pool, lookahead slots and rollback cover it.
//
// After every target step, observe() runs the module over the rows each sequence computed and
// kept (a prompt chunk, a decode row, a verify's accepted rows), so its K/V cover every
// position the target's do; for a sequence that decodes next, its last row's argmax is the
// first proposal and its output state what the next one chains on. fill() chains the other
// k - 1 proposals, each a module step on the previous proposal and the previous step's output
// (vLLM's num_speculative_tokens > num_nextn_predict_layers: the last module again), in the
// verify's lookahead slots; the next observe() overwrites them with what the target kept.
// Proposals are greedy (a point mass, which the engine's acceptance handles exactly): they
// change how many tokens a verify keeps, never which tokens are produced.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/batch.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "spec/proposer.h"

namespace loom::spec {

class MtpProposer : public Proposer {
 public:
  // `target`: the model whose module 0 proposes (it must outlive the proposer). num_blocks,
  // block_size: the target's full-attention KV group, whose tables the module reads.
  static Result<std::unique_ptr<MtpProposer>> create(Model& target, int32_t num_blocks,
                                                     int32_t block_size, Dtype kv_dtype);

  // k placeholders: observe() and fill() decide them.
  void plan(std::span<const int32_t>, int32_t k, std::vector<int32_t>& draft) override {
    draft.assign(k, 0);
  }
  Status fill(std::span<DraftSeq> seqs) override;
  bool samples() const override { return true; }
  bool needs_hidden() const override { return true; }
  Status observe(std::span<const ObservedSeq> seqs) override;
  void wait_committed() override { kv_->wait_committed(); }
  double seconds() const override { return seconds_; }

  const Model& module() const { return *module_; }
  size_t kv_bytes() const { return kv_bytes_; }
  int64_t rows_run() const { return rows_run_; }  // module rows computed so far

 private:
  // Runs batch_ through the module: logits of batch_.logits_rows into logits_, every row's
  // output before the module's norm into out_hidden_.
  Status run();

  std::unique_ptr<Model> module_;
  std::unique_ptr<KvCache> kv_;
  size_t kv_bytes_ = 0;
  Batch batch_;
  std::vector<float> logits_, out_hidden_;
  std::vector<float> chain_hidden_;  // fill(): per sequence, its last step's output state
  std::vector<size_t> live_;
  Sampler sampler_;  // a sampling request's proposal distributions
  double seconds_ = 0;
  int64_t rows_run_ = 0;
};

}  // namespace loom::spec
