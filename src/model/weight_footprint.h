// What a model's weights weigh: every tensor (the whole file), and what one token of the main
// forward pass reads. One definition for `loom inspect` (a file's tensor table), the loaded
// model (Weights: `loom bench`'s size and roofline, the server's model size):
//   - the token embedding: one row (a lookup); the LM head: all of it. A tied head is the
//     embedding itself: stored once and read whole, so it counts once, whole (a token's
//     row is within it), and what a token reads never exceeds what is stored;
//   - routed experts (ffn_{gate,up,down,gate_up}_exps, their weights and biases): the
//     n_expert_used of their n_expert slices a token is routed to;
//   - everything else (attention, dense FFNs, routers, shared experts, norms, biases): all;
//   - multi-token prediction layers: stored, but read by a speculative proposer only.
#pragma once

#include <cstdint>
#include <string_view>

namespace loom {

enum class TokenShare {
  kWhole,    // every element
  kOneRow,   // one of its `slices` rows
  kExperts,  // n_expert_used of its `slices` experts (its last dimension)
  kNone,     // none
};

// By GGUF name: kOneRow for token_embd.weight (kWhole where it is also the LM head: a file
// without output.weight), kExperts for a routed expert's tensor, else kWhole (the caller
// decides kNone for multi-token prediction layers).
TokenShare token_share(std::string_view gguf_name, bool tied_head);

struct WeightFootprint {
  uint64_t params = 0, bytes = 0;                // every tensor stored
  uint64_t active_params = 0, active_bytes = 0;  // read per token of the main pass
  // The parts of active_bytes that each token of a call reads for itself: its embedding row
  // (kOneRow) and its routed experts (kExperts). A call of n tokens reads the rest once, n
  // rows, and each expert any of its tokens is routed to once (Model::weight_reads).
  uint64_t active_row_bytes = 0, active_expert_bytes = 0;

  // A tensor of numel elements in nbytes, `slices` rows or experts along its outer
  // dimension. Each stored tensor once: a tied LM head is token_embd, added as kWhole.
  void add(TokenShare share, uint64_t numel, uint64_t nbytes, int64_t slices,
           int64_t n_expert_used);
};

}  // namespace loom
