#include "model/weight_footprint.h"

#include <algorithm>

#include "model/tensor_names.h"

namespace loom {

TokenShare token_share(std::string_view gguf_name, bool tied_head) {
  namespace n = names;
  if (gguf_name == n::kTokenEmbd) return tied_head ? TokenShare::kWhole : TokenShare::kOneRow;
  auto l = n::parse_layer_tensor(gguf_name);
  if (!l) return TokenShare::kWhole;
  for (std::string_view s : {n::kFfnGateExps, n::kFfnUpExps, n::kFfnDownExps, n::kFfnGateUpExps,
                             n::kFfnGateExpsBias, n::kFfnUpExpsBias, n::kFfnDownExpsBias})
    if (l->suffix == s) return TokenShare::kExperts;
  return TokenShare::kWhole;
}

void WeightFootprint::add(TokenShare share, uint64_t numel, uint64_t nbytes, int64_t slices,
                          int64_t n_expert_used) {
  params += numel;
  bytes += nbytes;
  uint64_t of = 1, take = 1;
  switch (share) {
    case TokenShare::kNone:
      return;
    case TokenShare::kWhole:
      break;
    case TokenShare::kOneRow:
      of = static_cast<uint64_t>(std::max<int64_t>(slices, 1));
      break;
    case TokenShare::kExperts:
      // A dense read of a file without expert_used_count: all of it.
      if (n_expert_used > 0 && slices > 0) {
        of = static_cast<uint64_t>(slices);
        take = static_cast<uint64_t>(std::min(n_expert_used, slices));
      }
      break;
  }
  active_params += numel / of * take;
  active_bytes += nbytes / of * take;
  if (share == TokenShare::kOneRow) active_row_bytes += nbytes / of * take;
  if (share == TokenShare::kExperts) active_expert_bytes += nbytes / of * take;
}

}  // namespace loom
