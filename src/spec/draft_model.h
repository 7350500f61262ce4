// Draft-model proposals: a smaller model with the target's vocabulary proposes k tokens per
// decoding sequence by k steps of its own, which the target then verifies in one step: its best
// token for a greedy or seeded request, and for a sampling one without a seed a token drawn from
// its distribution under the request's parameters, which it hands the verify's rejection rule
// (spec/rejection.h).
//
// Its K/V live in the target's blocks: a KvCache of the draft's layers with as many blocks as
// the target's full-attention group, addressed through the target's block tables. The block
// pool, the lookahead slots of a verify and their rollback therefore cover the draft as well
// (block b holds both models' K/V for the same positions), and no second bookkeeping exists.
// A sequence records how many of its tokens have draft K/V (draft_computed); each proposal
// first runs the ones that do not yet (the prompt at its first decode, the tokens accepted
// since) as one chunk, then k - 1 single-token steps. Whatever the draft proposes, the target's
// verify decides what is kept, so stale or missing draft K/V can cost acceptance, never change
// an output.
//
// A draft with recurrent layers (a small Qwen3.5 for a large one) keeps one state slot per
// sequence in its own cache, planned to take back k tokens (KvLayout::state_rollback_tokens):
// a round leaves the state k - 1 positions past the known tokens, and the next round resumes
// from the kept ones. When a sequence's draft_computed falls further back than that, its draft
// state restarts from position 0. The slots are as many as max_num_seqs, while forked samples
// can run beyond it: a sequence proposes only once it holds one (reserve()), and gives it back
// when it finishes or is preempted (release()). A preempted sequence also starts its draft K/V
// over (the engine sets draft_computed to 0): the blocks it gets back hold another's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "loom/tokenizer.h"
#include "model/batch.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "spec/proposer.h"

namespace loom::spec {

// Ok when a draft with `draft_vocab` tokens can propose for a target with `target_vocab`, by
// llama.cpp's rule (common_speculative_are_compatible): the sizes differ by at most
// kMaxDraftVocabDifference (checkpoints pad their embeddings: Qwen2.5-7B has 152064 rows,
// Qwen2.5-0.5B 151936) and, where both tokenizers are given, every token from id
// kFirstComparedToken up to the smaller vocabulary has the same text. An error naming the
// sizes, or the first token that differs and both its texts, otherwise.
constexpr int32_t kMaxDraftVocabDifference = 128;
constexpr int32_t kFirstComparedToken = 5;  // ids below: control tokens that may differ
Status check_draft_vocabulary(int32_t draft_vocab, int32_t target_vocab,
                              const Tokenizer* draft_tokenizer = nullptr,
                              const Tokenizer* target_tokenizer = nullptr);

class DraftModelProposer : public Proposer {
 public:
  // `target_vocab`: the target's n_vocab, which the draft must share up to padding
  // (check_draft_vocabulary): proposals are the draft's best token below it, and a known token
  // the draft does not have reaches it as token 0 (its K/V then cost acceptance, never an
  // output: the target verifies). `num_blocks`,
  // `block_size`: the target's full-attention KV group, whose tables the draft reads.
  // `max_seqs`, `k`: sequences that can run at once and proposals per verify (the state slots
  // of a draft with recurrent layers).
  static Result<std::unique_ptr<DraftModelProposer>> create(std::unique_ptr<Model> draft,
                                                            int32_t target_vocab,
                                                            int32_t num_blocks, int32_t block_size,
                                                            Dtype kv_dtype, int32_t max_seqs = 1,
                                                            int32_t k = 1);
  // The target as its own draft (a draft spec naming the target's file): the proposer runs
  // `target` itself (not owned; it must outlive the proposer) with K/V of its own. A second
  // copy of the same weights would double their memory and evict each other from the caches
  // between the draft's steps and the target's.
  static Result<std::unique_ptr<DraftModelProposer>> create_sharing(Model& target,
                                                                    int32_t num_blocks,
                                                                    int32_t block_size,
                                                                    Dtype kv_dtype,
                                                                    int32_t max_seqs, int32_t k);

  // k placeholders: the draft runs once the verify has its slots.
  void plan(std::span<const int32_t>, int32_t k, std::vector<int32_t>& draft) override {
    draft.assign(k, 0);
  }
  // Fills every sequence's draft with the draft model's continuation (DraftSeq::sampling),
  // cut short before a row where the draft is unsure (Proposer::set_p_min).
  Status fill(std::span<DraftSeq> seqs) override;
  bool samples() const override { return true; }
  bool reserve(int64_t seq_id) override;
  void release(int64_t seq_id) override;

  const Model& model() const { return *model_; }
  bool shares_target() const { return owned_ == nullptr; }
  size_t kv_bytes() const { return kv_bytes_; }
  void wait_committed() override { kv_->wait_committed(); }
  double seconds() const override { return seconds_; }  // in the draft's forward passes

 private:
  static Result<std::unique_ptr<DraftModelProposer>> make(Model& draft,
                                                          std::unique_ptr<Model> owned,
                                                          int32_t target_vocab, int32_t num_blocks,
                                                          int32_t block_size, Dtype kv_dtype,
                                                          int32_t max_seqs, int32_t k);
  Status run(std::vector<float>& logits);
  // Proposal j of s from its logits row: the best token, or one drawn from the row's
  // distribution under s.sampling (which it records in s.draft_probs).
  int32_t propose(DraftSeq& s, int32_t j, const float* row);
  // A draft with recurrent layers: the state slot of seq_id (reserve() took it) and the
  // position its draft may resume from, `from` or 0 when its state cannot go back there.
  int32_t state_slot(int64_t seq_id, int32_t& from);

  std::unique_ptr<Model> owned_;  // null when the draft is the target
  Model* model_ = nullptr;
  int32_t target_vocab_ = 0;  // proposals are below it
  std::unique_ptr<KvCache> kv_;
  size_t kv_bytes_ = 0;
  int32_t rollback_ = 0;                          // tokens a draft state can take back
  std::unordered_map<int64_t, int32_t> slot_of_;  // sequence -> state slot
  std::vector<int32_t> free_slots_;               // state slots nobody holds
  std::vector<int32_t> state_end_;                // [slot] position after its last row
  std::vector<int32_t> slots_;                    // fill()'s sequences' slots
  Batch batch_;
  std::vector<float> logits_;
  Sampler sampler_;  // a sampling request's draft distributions
  double seconds_ = 0;
};

}  // namespace loom::spec
