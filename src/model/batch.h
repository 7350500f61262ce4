// Batch: every token of one engine step, flattened. Prefill chunks, single decode tokens and
// speculative verifies of many sequences travel together through one Model::forward call.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace loom {

// Layer groups a KV cache can have (see KvLayout in model/model.h).
inline constexpr int kMaxKvGroups = 4;

// Recurrent layers (Gated DeltaNet) compute in chunks of this many positions, aligned to
// absolute positions [k·16, (k+1)·16) whatever the step's split: a sequence's state slot holds
// the state at its last chunk boundary plus what the tokens since then contribute, so a token's
// output is the same bits whether its prompt came in one step or many (batch and chunk
// invariance). The state at a multiple of it is exact and small: the only positions a prefix
// snapshot is taken at (block_size must be a multiple of it for a hybrid model).
inline constexpr int32_t kRecurrentChunk = 16;

struct BatchSequence {
  // Physical KV block ids of this sequence in KV layer group 0, in logical order (block i holds
  // positions [i*block_size, (i+1)*block_size)). Must cover positions [0, n_past + n_new).
  const int32_t* block_table = nullptr;
  int32_t n_blocks = 0;
  int32_t n_past = 0;     // tokens already in the KV cache (their K/V are read, not recomputed)
  int32_t n_new = 0;      // tokens computed this step: rows [row_begin, row_begin + n_new)
  int32_t row_begin = 0;  // first row of this sequence in Batch::tokens
  // The tables of groups 1.. when the cache has several (each n_blocks entries; a sliding-window
  // group's released blocks are its null block).
  std::array<const int32_t*, kMaxKvGroups - 1> group_tables{};
  // Models with recurrent layers: the slot holding this sequence's state after n_past tokens
  // (n_past == 0: the forward pass starts it from zeros); -1 for a model without them.
  int32_t state_slot = -1;

  const int32_t* table(int group) const {
    return group == 0 ? block_table : group_tables[group - 1];
  }
};

struct Batch {
  std::vector<int32_t> tokens;  // [n_rows] token ids
  std::vector<int32_t> pos;     // [n_rows] position of each token in its sequence
  std::vector<int32_t> seq;     // [n_rows] index into `sequences`
  std::vector<BatchSequence> sequences;
  std::vector<int32_t> logits_rows;  // rows whose logits are wanted, in output order
  // Rows whose final hidden state (after the output norm, before the LM head: what embedding
  // models pool) is wanted, in output order; n_embd floats each.
  std::vector<int32_t> hidden_rows;
  // A multi-token prediction module's input (ModelConfig::mtp_module): per row, the hidden
  // state before the final norm that goes with its token ([n_rows][n_embd]); empty otherwise.
  std::vector<float> prev_hidden;

  // Recurrent state movements of the step (models with recurrent layers; empty otherwise).
  // restores: before anything runs, slot src's state is copied into slot dst (a sequence
  // resuming from a prefix snapshot). snapshots: once sequence `seq` has computed its first
  // n_tokens tokens (a multiple of kRecurrentChunk inside this step's range
  // (n_past, n_past + n_new]), its state is copied into slot `slot`.
  struct StateCopy {
    int32_t src, dst;
  };
  struct StateSnapshot {
    int32_t seq, n_tokens, slot;
  };
  std::vector<StateCopy> state_restores;
  std::vector<StateSnapshot> state_snapshots;

  int32_t n_rows() const { return static_cast<int32_t>(tokens.size()); }
  void clear() {
    tokens.clear();
    pos.clear();
    seq.clear();
    sequences.clear();
    logits_rows.clear();
    hidden_rows.clear();
    prev_hidden.clear();
    state_restores.clear();
    state_snapshots.clear();
  }
};

}  // namespace loom
