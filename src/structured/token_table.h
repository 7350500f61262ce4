// Per-position token tables (the adaptive token mask of XGrammar, in loom's own form).
//
// For a grammar position — the top stack frame, plus its caller when the top rule is small,
// plus the callers of counted rules (see TableKey) — the whole vocabulary is classified once:
//   accepted: the token's bytes are consumed without leaving the position's frames, so it is
//             allowed whatever the rest of the stack is;
//   rejected: every path dies inside those frames;
//   context-dependent: some path leaves them with bytes left; only these are walked with the
//             real stack when a mask is filled.
// Repetition counts enter the key clamped: a count further than the longest token from its
// bound cannot be told apart by one token. A count nearer its bound gets a table derived from
// the clamped one: only tokens longer than the remaining iterations can tell them apart.
//
// Tables depend on the grammar only through the automaton reachable from the key's frames, so
// table_shape() writes that automaton down canonically and equal shapes share one table
// across grammars (table_store.h): every schema's string body is the same few states.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/stack_walker.h"
#include "structured/vocab_index.h"

namespace loom::structured {

// The top frame, and while a frame's rule is small or counted (its body is usually one
// character), its callers too, so that tokens running past it (`abc",`) are decided here.
constexpr int kMaxKeyFrames = 4;
struct TableKey {
  int32_t n = 1;
  int32_t state[kMaxKeyFrames] = {};  // [0] = top
  int32_t count[kMaxKeyFrames] = {};  // clamped
  bool operator==(const TableKey& o) const {
    if (n != o.n) return false;
    for (int i = 0; i < n; ++i)
      if (state[i] != o.state[i] || count[i] != o.count[i]) return false;
    return true;
  }
};

struct TableKeyHash {
  size_t operator()(const TableKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.n);
    for (int i = 0; i < k.n; ++i) {
      h = (h ^ static_cast<uint32_t>(k.state[i])) * 0x9E3779B97F4A7C15ull;
      h = (h ^ static_cast<uint32_t>(k.count[i])) * 0xC2B2AE3D27D4EB4Full;
    }
    return static_cast<size_t>(h ^ (h >> 31));
  }
};

struct TokenTable {
  std::vector<uint32_t> accepted;    // bitmask words over the vocabulary
  std::vector<int32_t> ctx;          // context-dependent normal tokens, in vocab sort order
  std::vector<uint16_t> ctx_lcp;     // common prefix with the previous ctx token
  std::string ctx_blob;              // ctx tokens' bytes back to back (read in order per mask)
  std::vector<uint32_t> ctx_off;     // ctx[k]: ctx_blob[ctx_off[k], ctx_off[k + 1])
  std::vector<int32_t> ctx_special;  // context-dependent special tokens
  // ctx[k]'s exit offsets: every path that left the key's frames did so after between lo and
  // hi bytes, so some byte of the token in [lo, hi] must be one the real stack below them can
  // take next (the matcher's prefilter). lo = kNoExit: unknown, walk it.
  static constexpr uint16_t kNoExit = 0xFFFF;
  struct Exit {
    uint16_t lo, hi;
  };
  std::vector<Exit> ctx_exit;
  // ctx[k]'s exit bytes (those at offsets lo..hi) folded to 64 bits by exit_byte_bit(): the
  // matcher rejects a token whose signature shares no bit with the follow set's in one AND,
  // before looking at its bytes. An identifier near its bound leaves tens of thousands of
  // tokens whose exit bytes are letters that no caller takes; one AND each is what keeps
  // such masks well under a millisecond. All bits when the exit is unknown.
  std::vector<uint64_t> ctx_sig;
  // Accepted only because a path left the key's frames as the token ended (refine_token_table
  // walks them again with the caller's frame; masks do not need them).
  std::vector<int32_t> popped_end;
  // When set, the context-dependent normal tokens (ctx and every ctx_* array above) are
  // those of this table, and this table's own are empty: the counts of one counted position
  // share one list (count_profile.h) instead of building it again per count. A superset of
  // the tokens that depend on the stack is still exact (an accepted token walked again is
  // set again, a rejected one is rejected by the walk). Read them through ctx_src().
  std::shared_ptr<const TokenTable> ctx_owner;
  int32_t n_accepted = 0;             // bits set in `accepted`
  std::vector<int32_t> accepted_ids;  // those ids when there are only a few
};

// The table holding t's context-dependent normal tokens (TokenTable::ctx_owner).
inline const TokenTable& ctx_src(const TokenTable& t) {
  return t.ctx_owner ? *t.ctx_owner : t;
}

// A byte's bit in exit signatures (TokenTable::ctx_sig): ASCII punctuation, space, tab,
// newline and carriage return one bit each, the rest folded (letters, digits, control and
// UTF-8 bytes share bits by class). Grammar-independent, as tables are shared by grammars.
uint64_t exit_byte_bit(uint8_t b);

// The key for frontier node `node` of `arena` (max_len: the vocabulary's longest token).
TableKey table_key(const Grammar& g, const StackArena& arena, int32_t node, int32_t max_len);

// The lazily built DFA that table builds walk tokens through (frontiers of stacks, one
// transition per byte computed once). One per grammar, shared by its builds, so that tables
// of related positions (an identifier's count one apart, a key and its refinement) reuse its
// transitions instead of computing them again; a build holds it exclusively. The builders
// below take one, or null for a private DFA.
struct TokenDfa;
std::shared_ptr<TokenDfa> make_token_dfa(const Grammar& g);

std::unique_ptr<TokenTable> build_token_table(const Grammar& g, const TokenVocab::Impl& vocab,
                                              const TableKey& key, TokenDfa* dfa = nullptr);

// If a frame of `key` is a clamp-ok counted rule within max_len of its bound: the key with
// those counts clamped (`base`) and the fewest iterations left among them (`remaining`).
bool near_bound(const Grammar& g, const TableKey& key, int32_t max_len, TableKey* base,
                int32_t* remaining);

// The table of `key` from `base`: the table of its near_bound() base, or of the same position
// with at least as many iterations left on every frame. Tokens no longer than `remaining`
// bytes cannot reach the bound (each iteration consumes a byte), so they keep their class;
// the longer ones the base did not reject are walked again (fewer iterations left only
// removes paths, so what the base rejects stays rejected).
std::unique_ptr<TokenTable> derive_near_bound(const Grammar& g, const TokenVocab::Impl& vocab,
                                              const TableKey& key, const TokenTable& base,
                                              int32_t remaining, TokenDfa* dfa = nullptr);

// The table of `key` from the table of `key` without its last (bottom) frame: the two walks
// differ only after a path leaves the shorter key, so only the base's context-dependent and
// popped_end tokens are walked again. The base is usually shared (a string or email rule
// alone) where the full key names its call site in one schema.
std::unique_ptr<TokenTable> refine_token_table(const Grammar& g, const TokenVocab::Impl& vocab,
                                               const TableKey& key, const TokenTable& base,
                                               TokenDfa* dfa = nullptr);

// The canonical form of the automaton reachable from `key` (states renumbered in visit
// order, counts of counted frames as iterations left), appended to `out` as raw bytes.
// Returns false, leaving `out` unspecified, past max_states states: such a large shape is one
// grammar's own and not worth keeping process-wide.
bool table_shape(const Grammar& g, const TableKey& key, int32_t max_states, std::string& out);

// A ctx token's ctx_sig: the exit_byte_bit() of its bytes at offsets exit.lo..exit.hi, every
// bit when none is (unknown exit).
uint64_t exit_signature(std::string_view bytes, TokenTable::Exit exit);

// accepted_ids from `accepted` and n_accepted.
void finish_accepted_ids(TokenTable& t);

// Fills ctx_lcp, ctx_blob and ctx_off of a table whose ctx (in vocabulary sort order) and
// ctx_exit are set, and accepted_ids from `accepted` and n_accepted: the last step of every
// way a table is made.
void finish_token_table(TokenTable& t, const TokenVocab::Impl& v);

// Heap bytes held by a table (cache budgets).
size_t table_bytes(const TokenTable& t);

}  // namespace loom::structured
