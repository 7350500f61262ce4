// Proposer: where a speculative step's proposed tokens come from. The engine asks twice per
// step: plan() before scheduling, for every sequence about to decode (the proposal itself when
// it is cheap, as an n-gram lookup; otherwise room for k tokens), and fill() after scheduling,
// for the sequences whose verify got KV slots (a draft model runs then, writing its own K/V
// into those slots). Verification and acceptance are the engine's, the same for every proposer.
//
// A proposer that needs the target's hidden states (EAGLE, MTP heads) fits the same two calls
// once the forward pass exposes them: fill() would read the last step's hidden state of each
// sequence instead of running a model from tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace loom::spec {

// A sequence whose verify was scheduled, as fill() sees it.
struct DraftSeq {
  std::span<const int32_t> tokens;  // the sequence's known tokens (prompt and output)
  const int32_t* block_table;       // the target's full-attention table; covers positions
  int32_t n_blocks;                 // < tokens.size() - 1 + draft->size()
  int32_t* draft_computed;          // tokens whose K/V the proposer has written; updated
  std::vector<int32_t>* draft;      // as plan() left it, cut to the slots granted
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Appends up to k proposed tokens (or k placeholders that fill() replaces) to `draft`.
  virtual void plan(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& draft) = 0;
  virtual Status fill(std::span<DraftSeq> seqs) { return Status::ok(); }
};

}  // namespace loom::spec
