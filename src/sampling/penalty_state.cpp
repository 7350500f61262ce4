// PenaltyState: a small open-addressing hash (token id → entry index) over a dense entry list,
// so lookups are O(1) and the sampler iterates a contiguous array.
#include "sampling/penalty_state.h"

#include <algorithm>

namespace loom {
namespace {

inline uint32_t hash_token(int32_t token) {
  // Fibonacci hashing: token ids are small consecutive integers; multiplying spreads them.
  return static_cast<uint32_t>(token) * 2654435769u;
}

}  // namespace

void PenaltyState::reset() {
  entries_.clear();
  std::fill(slots_.begin(), slots_.end(), -1);
  num_output_ = 0;
}

int32_t PenaltyState::find(int32_t token) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash_token(token) & mask;; i = (i + 1) & mask) {
    int32_t e = slots_[i];
    if (e < 0) return -1;
    if (entries_[e].token == token) return e;
  }
}

void PenaltyState::grow_index() {
  size_t cap = std::max<size_t>(64, slots_.size() * 2);
  slots_.assign(cap, -1);
  const size_t mask = cap - 1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    size_t i = hash_token(entries_[e].token) & mask;
    while (slots_[i] >= 0) i = (i + 1) & mask;
    slots_[i] = static_cast<int32_t>(e);
  }
}

int32_t PenaltyState::find_or_insert(int32_t token) {
  if ((entries_.size() + 1) * 2 > slots_.size()) grow_index();
  const size_t mask = slots_.size() - 1;
  size_t i = hash_token(token) & mask;
  for (;; i = (i + 1) & mask) {
    int32_t e = slots_[i];
    if (e < 0) break;
    if (entries_[e].token == token) return e;
  }
  int32_t e = static_cast<int32_t>(entries_.size());
  entries_.push_back({token, 0, false});
  slots_[i] = e;
  return e;
}

void PenaltyState::add_prompt(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) entries_[find_or_insert(t)].in_prompt = true;
}

void PenaltyState::add_output(int32_t token) {
  ++entries_[find_or_insert(token)].output_count;
  ++num_output_;
}

bool PenaltyState::remove_output(int32_t token) {
  int32_t e = find(token);
  if (e < 0 || entries_[e].output_count == 0) return false;
  --entries_[e].output_count;
  --num_output_;
  return true;
}

int32_t PenaltyState::output_count(int32_t token) const {
  int32_t e = find(token);
  return e < 0 ? 0 : entries_[e].output_count;
}

bool PenaltyState::in_prompt(int32_t token) const {
  int32_t e = find(token);
  return e >= 0 && entries_[e].in_prompt;
}

}  // namespace loom
