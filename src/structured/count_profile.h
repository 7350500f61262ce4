// Near-bound token tables of a counted position from one walk of the vocabulary.
//
// A key whose counted frame is within max_len of its bound gets one table per count (an
// identifier `[a-z][a-z0-9_]{0,30}` has 31), and each used to cost a walk of every token the
// far-from-bound table allows that is longer than the iterations left: tens of thousands of
// walks per new count, a millisecond each time an identifier grew. Fewer iterations left only
// removes paths, so each token's class is a threshold function of the iterations left: it is
// accepted from some number of iterations up, context-dependent from a smaller one, rejected
// below. A profile records those thresholds, per token, in one walk of the vocabulary that
// counts the iterations each path takes (the counted frame never hits its bound there); every
// count's table is then a filter of the profile instead of a walk.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "structured/grammar.h"
#include "structured/token_table.h"
#include "structured/vocab_index.h"

namespace loom::structured {

struct CountProfile {
  static constexpr uint16_t kNever = 0xFFFF;
  // The fewest iterations left with which the token is accepted inside the key's frames
  // (`accept`), accepted because a path leaves them as the token ends (`pop_end`), or has a
  // path that leaves them with bytes left (`exit`): its class at r iterations left is the first
  // of accepted, accepted-by-pop, context-dependent whose need is <= r, else rejected.
  struct Need {
    int32_t id;
    int32_t pos;  // position in the vocabulary's sort order (normal tokens)
    uint16_t accept, pop_end, exit;
    TokenTable::Exit offsets;  // exit offsets over every path (a superset at any r)
  };
  // The normal tokens accepted at some count, compact: what every count's filter reads.
  struct Accept {
    int32_t id;
    uint16_t accept, pop_end;
  };
  std::vector<Accept> accepts;
  int32_t frame = 0;  // the profiled frame's index in the key
  // The normal tokens context-dependent at some count, with exit offsets and signatures: every
  // count's table points at this list (TokenTable::ctx_owner) instead of copying its share,
  // which for an identifier's call site is tens of thousands of tokens per count.
  std::shared_ptr<const TokenTable> ctx_union;
  // ctx_union.ctx[k] is context-dependent for counts with iterations left in
  // [ctx_from[k], ctx_to[k]); ctx_at[r]: how many are at r iterations left. A count whose own
  // list is under an eighth of the union gets it copied out (an identifier far from its
  // bound leaves a few hundred tokens to the stack: walking the whole union at every such
  // step would cost more than copying them once); the others share the union.
  std::vector<uint16_t> ctx_from, ctx_to;
  std::vector<int32_t> ctx_at;
  std::vector<Need> normal;    // normal tokens not rejected at every count, in vocab sort order
  std::vector<Need> specials;  // likewise for special tokens (offsets unused)
};

// The index of the only frame of `key` that is a clamp-ok counted rule within max_len of its
// bound, or -1 if there is none or more than one (those keys are derived as before).
int near_bound_frame(const Grammar& g, const TableKey& key, int32_t max_len);

// The profile of the counted frame `frame` of `base` (near_bound()'s base: that frame far from
// its bound, every other frame as in the keys it serves). Costs about one table build.
std::unique_ptr<CountProfile> build_count_profile(const Grammar& g, const TokenVocab::Impl& v,
                                                  const TableKey& base, int32_t frame);

// The table of the profiled position with `remaining` iterations left on its frame: the same
// accepted, popped_end and context-dependent special tokens as build_token_table() gives that
// key; its context-dependent normal tokens are the profile's ctx_union, a superset of that
// key's (with exit offsets covering every count's paths), which only walks more tokens.
std::unique_ptr<TokenTable> table_from_profile(const CountProfile& p, const TokenVocab::Impl& v,
                                               int32_t remaining);

size_t profile_bytes(const CountProfile& p);

}  // namespace loom::structured
