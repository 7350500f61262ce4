// PenaltyState: the token history a request's penalties need, kept incrementally by the
// engine (prompt once, then one add_output per generated token) so the sampler never rescans
// the whole history. Sparse: memory and sampler work grow with the number of DISTINCT tokens
// seen, not with the vocabulary (a dense 152k-entry count array per request would cost 600 KB
// each and a full pass per step).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace loom {

class PenaltyState {
 public:
  struct Entry {
    int32_t token;
    int32_t output_count;  // occurrences in the output so far (presence/frequency penalties)
    bool in_prompt;        // occurs in the prompt (repetition penalty only)
  };

  // Forgets everything (keeps capacity, so a reused state does not allocate).
  void reset();
  // Records prompt tokens. May be called several times (e.g. per prefill chunk); repeats are
  // harmless. Ids are not range-checked here; the sampler rejects ids outside the vocabulary.
  void add_prompt(std::span<const int32_t> tokens);
  // Records one generated token.
  void add_output(int32_t token);
  // Undoes one add_output(token) (speculative tokens rejected, or a rolled-back step).
  // Returns false, changing nothing, if the token has no output occurrence to remove.
  bool remove_output(int32_t token);

  int32_t output_count(int32_t token) const;
  bool in_prompt(int32_t token) const;
  int64_t num_output_tokens() const { return num_output_; }

  // Every distinct token recorded, in first-seen order. An entry whose outputs were all
  // removed and that is not in the prompt stays with output_count 0 and has no effect.
  std::span<const Entry> entries() const { return entries_; }

 private:
  // Index of `token`'s entry, creating it if absent.
  int32_t find_or_insert(int32_t token);
  int32_t find(int32_t token) const;
  void grow_index();

  std::vector<Entry> entries_;
  // Open addressing, linear probing: slot = entry index, -1 = empty. Capacity is a power of
  // two kept at least twice the number of entries.
  std::vector<int32_t> slots_;
  int64_t num_output_ = 0;
};

}  // namespace loom
