// Proposer: where a speculative step's proposed tokens come from. The engine asks twice per
// step: plan() before scheduling, for every sequence about to decode (the proposal itself when
// it is cheap, as an n-gram lookup; otherwise room for k tokens), and fill() after scheduling,
// for the sequences whose verify got KV slots (a draft model runs then, writing its own K/V
// into those slots). Verification and acceptance are the engine's, the same for every proposer.
//
// A proposer that reads the target's hidden states (MTP heads; EAGLE would too) gets a third
// call, observe(), after every target step: each sequence's rows computed and kept in that
// step, with their hidden states before the final norm. It keeps its own K/V over them and
// leaves, for a sequence that decodes next, its first proposal and the state the next ones
// chain on (HiddenProposal); fill() then chains the rest in the verify's lookahead slots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"

namespace loom::spec {

// What observe() left for a sequence that decodes next: the proposal for the token after its
// known ones and the hidden state (n_embd floats) a further proposal chains on; valid while
// the sequence has at_tokens tokens.
struct HiddenProposal {
  int32_t at_tokens = -1;
  int32_t token = -1;
  std::vector<float> hidden;
  std::vector<float> q;  // the distribution token was drawn from (n_vocab); empty: a point mass
  bool unsure = false;   // below the proposer's p_min (Proposer::set_p_min): no proposals
};

// A sequence whose verify was scheduled, as fill() sees it.
struct DraftSeq {
  std::span<const int32_t> tokens;  // the sequence's known tokens (prompt and output)
  const int32_t* block_table;       // the target's full-attention table; covers positions
  int32_t n_blocks;                 // < tokens.size() - 1 + draft->size()
  int64_t seq_id;                   // the engine's sequence id (stable while it runs)
  int32_t* draft_computed;          // tokens whose K/V the proposer has written; updated
  std::vector<int32_t>* draft;      // as plan() left it, cut to the slots granted
  const HiddenProposal* hidden_proposal = nullptr;  // observe()'s, for hidden-state proposers
  // A request that samples without a seed, for a proposer that samples its proposals
  // (Proposer::samples()):
  // each proposal is drawn from the proposer's own distribution q under the request's
  // temperature, top-k, top-p, min-p, allowed ids and logit_bias, with the request's generator
  // (one draw each, as the target's sampler draws), and q goes in draft_probs (row j: proposal
  // j's, the target's n_vocab floats) for the verify's rejection rule (spec/rejection.h).
  // Null: proposals are point masses.
  const SamplingParams* sampling = nullptr;
  Rng* rng = nullptr;
  float* draft_probs = nullptr;  // draft->size() rows of the target's n_vocab (the engine's)
};

// A sequence's rows of the target step just run, as observe() sees them.
struct ObservedSeq {
  std::span<const int32_t> tokens;  // its known tokens, this step's sampled ones included
  const int32_t* block_table;       // the target's full-attention table; covers the rows
  int32_t n_blocks;
  int32_t first_pos;         // rows at positions [first_pos, first_pos + n_rows) were computed and
  int32_t n_rows;            // kept (a verify's rejected rows are not among them)
  const float* hidden;       // [n_rows][n_embd]: the target's hidden states before its norm
  HiddenProposal* proposal;  // non-null when the sequence decodes next: filled from the last row
  // A sequence that decodes next and samples without a seed (DraftSeq::sampling): its first
  // proposal is drawn from the proposer's distribution (Proposer::samples()).
  const SamplingParams* sampling = nullptr;
  Rng* rng = nullptr;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Appends up to k proposed tokens (or k placeholders that fill() replaces) to `draft`.
  virtual void plan(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& draft) = 0;
  virtual Status fill(std::span<DraftSeq> seqs) { return Status::ok(); }
  // Whether fill() samples a sampling request's proposals from a distribution of its own
  // (DraftSeq::sampling); otherwise every proposal is a point mass (its best guess), and the
  // verify keeps it when the target samples it.
  virtual bool samples() const { return false; }
  // Hidden-state proposers: the engine then asks its forward pass for every row's hidden state
  // before the final norm and calls observe() after each step (before the next plan()).
  virtual bool needs_hidden() const { return false; }
  virtual Status observe(std::span<const ObservedSeq> seqs) { return Status::ok(); }
  virtual double seconds() const { return 0; }  // time spent in the proposer's own forwards
  // Blocks until the proposer's own K/V memory is committed (KvCache::wait_committed).
  virtual void wait_committed() {}
  // Whether the proposer can propose for seq_id now, taking what it keeps per sequence if it
  // has not yet (a draft with recurrent layers: a state slot). Asked before each plan().
  virtual bool reserve(int64_t seq_id) { return true; }
  // The sequence has finished, was aborted or preempted: what the proposer keeps for it goes.
  virtual void release(int64_t seq_id) {}
  // llama-server's --spec-draft-p-min for proposers with a distribution (draft model, MTP): a
  // sequence's proposals end before the first row where the proposer is less sure than this
  // (draft_confidence, spec/sampled_proposal.h), so fill() may leave a draft shorter than the
  // slots granted (even empty); 0, the default: never.
  void set_p_min(float p_min) { p_min_ = p_min; }

 protected:
  // Whether a row of the proposer's logits is too unsure to propose from (set_p_min).
  bool unsure(std::span<const float> logits) const;
  float p_min_ = 0.0f;
};

}  // namespace loom::spec
