// Builds a position's token table by walking the sorted vocabulary through a lazily built DFA:
// each DFA state is a canonical Frontier (hash-consed stacks make equal sets equal vectors),
// each transition is computed once, so most of the ~10^6 trie steps of a large vocabulary
// are one table lookup. Also derives near-bound tables and writes keys' canonical shapes.
#include "structured/token_table.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace loom::structured {
namespace {

constexpr int32_t kSmallRule = 48;  // automaton states

// How a walk from a key classifies a token. kAcceptedByPop: accepted only because a path left
// the key's frames exactly as the token ended; a key with one more frame must look again.
constexpr int32_t kFewAccepted = 64;

enum TokenClass { kRejected = 0, kAccepted = 1, kContext = 2, kAcceptedByPop = 3 };

int32_t clamp_count(const Grammar& g, int32_t state, int32_t count, int32_t max_len) {
  const GrammarRule& r = g.rules[g.states[state].rule];
  if (r.max_iter == 0 || !r.clamp_ok) return count;
  // Every iteration consumes a byte, so one token cannot see past max_len more iterations.
  if (r.max_iter - count > max_len) return r.max_iter - max_len - 1;
  return count;
}

}  // namespace

class LazyDfa {
 public:
  LazyDfa(const Grammar& g) : walker_(g, arena_) {}
  size_t size() const { return states_.size(); }

  int32_t add_start(const TableKey& key) {
    int32_t node = kOutside;
    for (int i = key.n; i-- > 0;) node = arena_.intern(key.state[i], key.count[i], node);
    Frontier f;
    f.nodes.push_back(node);
    return intern(std::move(f));
  }
  bool dead(int32_t d) const { return flags_[d] & 1; }
  bool popped(int32_t d) const { return flags_[d] & 2; }

  int32_t step(int32_t d, uint8_t b) {
    int32_t& t = trans_[static_cast<size_t>(d) * 256 + b];
    if (t >= 0) return t;
    walker_.advance(states_[d], b, false, scratch_);
    // Most bytes kill most states: skip interning (a hash of the frontier) for those.
    if (scratch_.dead() && !scratch_.popped) {
      if (dead_ < 0) dead_ = intern(scratch_);
      trans_[static_cast<size_t>(d) * 256 + b] = dead_;
      return dead_;
    }
    const int32_t next = intern(scratch_);
    trans_[static_cast<size_t>(d) * 256 + b] = next;  // trans_ may have grown
    return next;
  }

  // Walks the bytes of a special token: literal edges only, no caching (few such tokens).
  // Returns a TokenClass.
  int special_walk(int32_t start, const std::string& bytes) {
    Frontier cur = states_[start], next;
    bool popped_before = false;
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (cur.dead()) return popped_before ? kContext : kRejected;
      walker_.advance(cur, static_cast<uint8_t>(bytes[i]), true, next);
      std::swap(cur, next);
      if (cur.popped && i + 1 < bytes.size()) popped_before = true;
    }
    if (!cur.dead()) return kAccepted;
    if (cur.popped) return kAcceptedByPop;
    return popped_before ? kContext : kRejected;
  }

 private:
  int32_t intern(const Frontier& f) {
    key_.assign(reinterpret_cast<const char*>(f.nodes.data()), f.nodes.size() * sizeof(int32_t));
    key_ += f.popped ? '1' : '0';
    auto [it, fresh] = index_.try_emplace(key_, static_cast<int32_t>(states_.size()));
    if (fresh) {
      states_.push_back(f);
      states_.back().can_end = false;
      flags_.push_back(static_cast<uint8_t>(f.nodes.empty() | f.popped << 1));
      trans_.resize(states_.size() * 256, -1);
    }
    return it->second;
  }

  StackArena arena_;
  StackWalker walker_;
  std::vector<Frontier> states_;
  std::vector<uint8_t> flags_;  // per state: 1 dead, 2 popped (the walk's hot checks)
  int32_t dead_ = -1;           // the empty frontier's state, once interned
  std::vector<int32_t> trans_;  // (state, byte) -> state, -1 unknown
  std::unordered_map<std::string, int32_t> index_;
  std::string key_;
  Frontier scratch_;
};

// Past this many DFA states (256 transitions each: 1 KB) a grammar's DFA starts over.
constexpr size_t kMaxDfaStates = 16384;

struct TokenDfa {
  explicit TokenDfa(const Grammar& g) : grammar(g) {}
  const Grammar& grammar;
  std::mutex mu;  // held for a whole table build
  std::unique_ptr<LazyDfa> dfa;
  LazyDfa& fresh_enough() {
    if (!dfa || dfa->size() > kMaxDfaStates) dfa = std::make_unique<LazyDfa>(grammar);
    return *dfa;
  }
};

std::shared_ptr<TokenDfa> make_token_dfa(const Grammar& g) {
  return std::make_shared<TokenDfa>(g);
}

namespace {

// The DFA a build walks: the grammar's shared one (locked for the build) or a private one.
class DfaLease {
 public:
  DfaLease(const Grammar& g, TokenDfa* shared) {
    if (shared) {
      lock_ = std::unique_lock<std::mutex>(shared->mu);
      dfa_ = &shared->fresh_enough();
    } else {
      own_ = std::make_unique<LazyDfa>(g);
      dfa_ = own_.get();
    }
  }
  LazyDfa& operator*() const { return *dfa_; }

 private:
  std::unique_lock<std::mutex> lock_;
  std::unique_ptr<LazyDfa> own_;
  LazyDfa* dfa_ = nullptr;
};

}  // namespace

uint64_t exit_byte_bit(uint8_t b) {
  static const std::array<uint64_t, 256> bits = [] {
    std::array<uint64_t, 256> a{};
    int next = 0;
    for (int c = 33; c < 127; ++c)  // the 32 punctuation characters
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
        a[c] = uint64_t{1} << next++;
    for (const int c : {' ', '\n', '\t', '\r'}) a[c] = uint64_t{1} << next++;
    a['0'] = uint64_t{1} << next++;
    for (int c = '1'; c <= '9'; ++c) a[c] = uint64_t{1} << next;
    ++next;
    for (int c = 'a'; c <= 'z'; ++c) a[c] = uint64_t{1} << (next + (c - 'a') % 10);
    next += 10;
    for (int c = 'A'; c <= 'Z'; ++c) a[c] = uint64_t{1} << (next + (c - 'A') % 6);
    next += 6;
    for (int c = 0; c < 256; ++c) {
      if (a[c]) continue;
      if (c < 0x80)  // other control characters and DEL
        a[c] = uint64_t{1} << next;
      else if (c < 0xC0)  // UTF-8 continuation bytes
        a[c] = uint64_t{1} << (next + 1 + ((c >> 4) & 3));
      else  // lead bytes
        a[c] = uint64_t{1} << (next + 5 + ((c >> 4) & 3) % 3);
    }
    return a;  // bits 0..61: bit 63 is the matcher's (matcher.cpp: follow_sig)
  }();
  return bits[b];
}

TableKey table_key(const Grammar& g, const StackArena& arena, int32_t node, int32_t max_len) {
  TableKey k;
  k.n = 0;
  for (;;) {
    const StackNode& n = arena[node];
    k.state[k.n] = n.state;
    k.count[k.n] = clamp_count(g, n.state, n.count, max_len);
    ++k.n;
    const GrammarRule& r = g.rules[g.states[n.state].rule];
    // Through a counted rule to its caller; through a small top rule to its caller. Not
    // further: the key would then name the call site, and the same string body would get
    // one table per property instead of one per grammar.
    const bool extend = r.max_iter > 0 || (k.n == 1 && r.n_states <= kSmallRule);
    if (!extend || n.parent < 0 || k.n == kMaxKeyFrames) break;
    node = n.parent;
  }
  return k;
}

namespace {

void set_bit(std::vector<uint32_t>& w, int32_t id) {
  w[id >> 5] |= 1u << (id & 31);
}
bool get_bit(const std::vector<uint32_t>& w, int32_t id) {
  return (w[id >> 5] >> (id & 31)) & 1;
}

size_t common_prefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t m = 0;
  while (m < n && a[m] == b[m]) ++m;
  return m;
}

void add(TokenTable& t, int32_t id, int c, bool special = false) {
  if (c == kAccepted || c == kAcceptedByPop) {
    set_bit(t.accepted, id);
    ++t.n_accepted;
  }
  if (c == kAcceptedByPop) t.popped_end.push_back(id);
  if (c == kContext) (special ? t.ctx_special : t.ctx).push_back(id);
}

// Appends ctx token `p` (a position in v.sorted) with its bytes; `lcp`: its common prefix
// with the previous ctx token.
void push_ctx(TokenTable& t, const TokenVocab::Impl& v, int32_t p, std::string_view bytes,
              size_t lcp, TokenTable::Exit exit) {
  t.ctx.push_back(v.sorted[p]);
  t.ctx_exit.push_back(exit);
  t.ctx_sig.push_back(exit_signature(bytes, exit));
  t.ctx_lcp.push_back(static_cast<uint16_t>(std::min<size_t>(lcp, 65535)));
  t.ctx_blob.append(bytes);
  t.ctx_off.push_back(static_cast<uint32_t>(t.ctx_blob.size()));
}

// The common prefix of sorted positions prev < p (neighbours: the vocabulary's lcp).
size_t sorted_lcp(const TokenVocab::Impl& v, int32_t prev, int32_t p) {
  if (prev < 0) return 0;
  return p == prev + 1 ? v.lcp[p] : common_prefix(v.sorted_bytes(prev), v.sorted_bytes(p));
}

}  // namespace

uint64_t exit_signature(std::string_view bytes, TokenTable::Exit exit) {
  uint64_t sig = exit.lo >= bytes.size() ? ~uint64_t{0} : 0;
  for (size_t k = exit.lo; k <= exit.hi && k < bytes.size(); ++k)
    sig |= exit_byte_bit(static_cast<uint8_t>(bytes[k]));
  return sig;
}

// accepted_ids: a few accepted tokens are set one by one per mask instead of OR-ing the
// whole bitmask.
void finish_accepted_ids(TokenTable& t) {
  t.accepted_ids.clear();
  if (t.n_accepted <= kFewAccepted)
    for (size_t w = 0; w < t.accepted.size(); ++w)
      for (uint32_t bits = t.accepted[w]; bits; bits &= bits - 1)
        t.accepted_ids.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(bits)));
}

void finish_token_table(TokenTable& t, const TokenVocab::Impl& v) {
  // ctx is in sort order: neighbours in the vocabulary take their lcp from it, and the bytes
  // come from the sorted blob (sequential reads, not one heap string per token).
  std::vector<int32_t> ids = std::move(t.ctx);
  std::vector<TokenTable::Exit> exits = std::move(t.ctx_exit);
  t.ctx.clear();
  t.ctx_exit.clear();
  t.ctx_sig.clear();
  t.ctx_lcp.clear();
  t.ctx_blob.clear();
  t.ctx_off.assign(1, 0);
  int32_t prev = -1;
  for (size_t k = 0; k < ids.size(); ++k) {
    const int32_t p = v.rank[ids[k]];
    push_ctx(t, v, p, v.sorted_bytes(p), sorted_lcp(v, prev, p), exits[k]);
    prev = p;
  }
  finish_accepted_ids(t);
}

namespace {

// The per-token walk shared by full builds and derivations: dst[d] is the DFA state after
// the first d bytes of the current token, pb[d] whether a path popped out of the key's frames
// at or before byte d.
class TokenWalk {
 public:
  TokenWalk(LazyDfa& dfa, const TableKey& key, int32_t max_len)
      : dfa_(dfa),
        dst_(static_cast<size_t>(max_len) + 1),
        pb_(static_cast<size_t>(max_len) + 1),
        pd_(static_cast<size_t>(max_len) + 1),
        pf_(static_cast<size_t>(max_len) + 1) {
    start_ = dfa_.add_start(key);
    dst_[0] = start_;
    pb_[0] = 0;
    pd_[0] = pf_[0] = TokenTable::kNoExit;
  }
  // Walks `bytes` reusing the first min(lcp, valid) steps of the previous token. Returns a
  // TokenClass; *dead_at: the depth where every path died, or -1. exit(): for kContext, the
  // first and last depths where paths left the key's frames.
  int walk(std::string_view bytes, size_t lcp, size_t* dead_at) {
    const size_t len = bytes.size();
    size_t d = std::min(lcp, valid_);
    while (d < len) {
      if (dfa_.dead(dst_[d])) {
        valid_ = d;
        *dead_at = d;
        exit_ = {pf_[d], pd_[d]};
        return pb_[d] ? kContext : kRejected;
      }
      const int32_t nx = dfa_.step(dst_[d], static_cast<uint8_t>(bytes[d]));
      dst_[d + 1] = nx;
      pb_[d + 1] = pb_[d];
      pd_[d + 1] = pd_[d];
      pf_[d + 1] = pf_[d];
      if (dfa_.popped(nx)) {
        const uint16_t depth = static_cast<uint16_t>(std::min<size_t>(d + 1, TokenTable::kNoExit));
        if (!pb_[d]) pf_[d + 1] = depth;
        pb_[d + 1] = 1;
        pd_[d + 1] = depth;
      }
      ++d;
    }
    valid_ = d;
    *dead_at = static_cast<size_t>(-1);
    exit_ = {pf_[len], pd_[len]};
    if (!dfa_.dead(dst_[len])) return kAccepted;
    if (dfa_.popped(dst_[len])) return kAcceptedByPop;
    return pb_[len] ? kContext : kRejected;
  }
  TokenTable::Exit exit() const { return exit_; }
  int special(const std::string& bytes) { return dfa_.special_walk(start_, bytes); }

 private:
  LazyDfa& dfa_;
  int32_t start_ = 0;
  std::vector<int32_t> dst_;
  std::vector<uint8_t> pb_;   // a path popped out of the key's frames at a depth in 1..d
  std::vector<uint16_t> pd_;  // the last such depth
  std::vector<uint16_t> pf_;  // the first such depth
  size_t valid_ = 0;          // dst_[0..valid_] hold the previous token's path
  TokenTable::Exit exit_ = {TokenTable::kNoExit, TokenTable::kNoExit};
};

}  // namespace

bool near_bound(const Grammar& g, const TableKey& key, int32_t max_len, TableKey* base,
                int32_t* remaining) {
  bool near = false;
  *base = key;
  *remaining = max_len + 1;
  for (int i = 0; i < key.n; ++i) {
    const GrammarRule& r = g.rules[g.states[key.state[i]].rule];
    if (r.max_iter == 0 || !r.clamp_ok || r.max_iter - key.count[i] > max_len) continue;
    near = true;
    *remaining = std::min(*remaining, r.max_iter - key.count[i]);
    base->count[i] = r.max_iter - max_len - 1;  // what clamp_count gives a far count
  }
  return near;
}

std::unique_ptr<TokenTable> build_token_table(const Grammar& g, const TokenVocab::Impl& v,
                                              const TableKey& key, TokenDfa* dfa) {
  auto table = std::make_unique<TokenTable>();
  TokenTable& t = *table;
  const int32_t n_vocab = static_cast<int32_t>(v.bytes.size());
  t.accepted.assign(bitmask_words(n_vocab), 0);
  const DfaLease lease(g, dfa);
  TokenWalk walk(*lease, key, v.max_len);
  const size_t n = v.sorted.size();
  size_t i = 0;
  while (i < n) {
    const int32_t id = v.sorted[i];
    const std::string_view bytes = v.sorted_bytes(i);
    size_t d = 0;
    const int r = walk.walk(bytes, v.lcp[i], &d);
    if (d == static_cast<size_t>(-1)) {
      add(t, id, r);
      if (r == kContext) t.ctx_exit.push_back(walk.exit());
      ++i;
      continue;
    }
    // Dead at depth d: so is every following token that shares these d bytes (and it left
    // the key's frames at the same depths, all within those bytes).
    if (r == kContext) {
      do {
        t.ctx.push_back(v.sorted[i++]);
        t.ctx_exit.push_back(walk.exit());
      } while (i < n && v.lcp[i] >= d);
      continue;
    }
    // All rejected: skip the block of tokens with this prefix (most grammar positions allow
    // few first bytes, so this skips most of the vocabulary in a few steps).
    if (d == 1) {
      i = v.first_end[static_cast<uint8_t>(bytes[0])];
      continue;
    }
    // The block is usually a handful of tokens ("abc." below "abc."): read lcp first.
    size_t j = i + 1;
    while (j < n && j < i + 64 && v.lcp[j] >= d) ++j;
    if (j == n || v.lcp[j] < d) {
      i = j;
      continue;
    }
    const std::string_view prefix(bytes.data(), d);
    size_t lo = j, hi = n;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (v.sorted_bytes(mid).substr(0, d) <= prefix)
        lo = mid + 1;
      else
        hi = mid;
    }
    i = lo;
  }
  for (int32_t id : v.specials) add(t, id, walk.special(v.bytes[id]), true);
  finish_token_table(t, v);
  return table;
}

namespace {

// The table of `key` from `base`, which classifies every token as `key` does except those in
// `redo` (a bitmask over ids, `n_redo` normal tokens among them): those are walked again.
std::unique_ptr<TokenTable> rewalk(const Grammar& g, const TokenVocab::Impl& v, const TableKey& key,
                                   const TokenTable& base, const std::vector<uint32_t>& redo,
                                   size_t n_redo, TokenDfa* dfa) {
  auto table = std::make_unique<TokenTable>();
  TokenTable& t = *table;
  t.accepted.resize(base.accepted.size());
  t.n_accepted = base.n_accepted;
  for (size_t w = 0; w < t.accepted.size(); ++w) {
    t.accepted[w] = base.accepted[w] & ~redo[w];
    for (uint32_t gone = base.accepted[w] & redo[w]; gone; gone &= gone - 1) --t.n_accepted;
  }
  const TokenTable& bc = ctx_src(base);
  // (position in v.sorted, exit offset); a kept token's walk, hence its exit, is unchanged.
  std::vector<std::pair<int32_t, TokenTable::Exit>> kept_ctx, new_ctx;
  std::vector<size_t> kept_index;  // kept_ctx[j] is bc.ctx[kept_index[j]]
  kept_ctx.reserve(bc.ctx.size());
  kept_index.reserve(bc.ctx.size());
  for (size_t k = 0; k < bc.ctx.size(); ++k)
    if (!get_bit(redo, bc.ctx[k])) {
      kept_ctx.emplace_back(v.rank[bc.ctx[k]], bc.ctx_exit[k]);
      kept_index.push_back(k);
    }
  std::vector<int32_t> kept_pop;
  for (const int32_t id : base.popped_end)
    if (!get_bit(redo, id)) kept_pop.push_back(id);
  const DfaLease lease(g, dfa);
  TokenWalk walk(*lease, key, v.max_len);
  std::vector<int32_t> new_pop;
  auto classify = [&](int32_t p, size_t lcp) {
    const int32_t id = v.sorted[p];
    size_t d = 0;
    const int c = walk.walk(v.sorted_bytes(p), lcp, &d);  // below a dead prefix: dies at once
    if (c == kAccepted || c == kAcceptedByPop) {
      set_bit(t.accepted, id);
      ++t.n_accepted;
    }
    if (c == kAcceptedByPop) new_pop.push_back(id);
    if (c == kContext) new_ctx.emplace_back(p, walk.exit());
  };
  const size_t n = v.sorted.size();
  if (n_redo * 16 > n) {
    // Many: scan the sort order; the common prefix with the last walked token is the
    // minimum of lcp over the tokens in between.
    size_t lcp = 0;
    for (size_t p = 0; p < n; ++p) {
      lcp = std::min<size_t>(lcp, v.lcp[p]);
      if (!get_bit(redo, v.sorted[p])) continue;
      classify(static_cast<int32_t>(p), lcp);
      lcp = SIZE_MAX;
    }
  } else {
    std::vector<int32_t> pos;
    pos.reserve(n_redo);
    for (size_t w = 0; w < redo.size(); ++w)
      for (uint32_t bits = redo[w]; bits; bits &= bits - 1) {
        const int32_t id = static_cast<int32_t>(w * 32 + __builtin_ctz(bits));
        if (v.rank[id] >= 0) pos.push_back(v.rank[id]);
      }
    std::sort(pos.begin(), pos.end());
    std::string_view prev;
    for (const int32_t p : pos) {
      const std::string_view bytes = v.sorted_bytes(p);
      classify(p, common_prefix(prev, bytes));
      prev = bytes;
    }
  }
  // Merge the kept and new ctx tokens in sort order. A kept token brings its bytes and, after
  // the token it followed in the base, its lcp: no lookups for the (often many) kept ones.
  t.ctx_off.assign(1, 0);
  t.ctx_blob.reserve(bc.ctx_blob.size());
  size_t a = 0, b = 0;
  int32_t prev = -1;            // sorted position of the last token written
  size_t prev_base = SIZE_MAX;  // its index in bc.ctx, if kept
  while (a < kept_ctx.size() || b < new_ctx.size()) {
    const bool take_kept =
        b == new_ctx.size() || (a < kept_ctx.size() && kept_ctx[a].first < new_ctx[b].first);
    if (take_kept) {
      const size_t k = kept_index[a];
      const int32_t p = kept_ctx[a].first;
      const std::string_view bytes(bc.ctx_blob.data() + bc.ctx_off[k],
                                   bc.ctx_off[k + 1] - bc.ctx_off[k]);
      const size_t lcp =
          prev_base != SIZE_MAX && k == prev_base + 1 ? bc.ctx_lcp[k] : sorted_lcp(v, prev, p);
      push_ctx(t, v, p, bytes, lcp, kept_ctx[a].second);
      prev = p;
      prev_base = k;
      ++a;
    } else {
      const int32_t p = new_ctx[b].first;
      push_ctx(t, v, p, v.sorted_bytes(p), sorted_lcp(v, prev, p), new_ctx[b].second);
      prev = p;
      prev_base = SIZE_MAX;
      ++b;
    }
  }
  for (const int32_t id : base.ctx_special)
    if (!get_bit(redo, id)) t.ctx_special.push_back(id);
  for (const int32_t id : v.specials)
    if (get_bit(redo, id)) add(t, id, walk.special(v.bytes[id]), true);
  // popped_end: normal tokens first in sort order, then specials (only a set is needed).
  t.popped_end = std::move(kept_pop);
  t.popped_end.insert(t.popped_end.end(), new_pop.begin(), new_pop.end());
  finish_accepted_ids(t);
  return table;
}

}  // namespace

std::unique_ptr<TokenTable> derive_near_bound(const Grammar& g, const TokenVocab::Impl& v,
                                              const TableKey& key, const TokenTable& base,
                                              int32_t remaining, TokenDfa* dfa) {
  const int32_t r = std::max(remaining, 0);
  std::vector<uint32_t> redo(base.accepted.size(), 0);
  size_t n_redo = 0;
  auto consider = [&](int32_t id) {
    if (static_cast<int32_t>(v.bytes[id].size()) <= r) return;
    set_bit(redo, id);
    if (!v.special[id]) ++n_redo;
  };
  // Only the base's accepted tokens longer than r are walked again. Its context-dependent
  // ones stay so: not accepted with more iterations left, not accepted with fewer, and the
  // mask walks them with the real stack (exact), their exit offsets still covering every
  // path that is left. The longest-first list holds the long tokens up front; with few
  // iterations left that is most of the vocabulary, and the base's bits are the shorter scan.
  const int32_t n_long = r >= v.max_len ? 0 : v.n_longer[r];
  if (static_cast<size_t>(n_long) > base.accepted.size() + static_cast<size_t>(base.n_accepted)) {
    for (size_t w = 0; w < base.accepted.size(); ++w)
      for (uint32_t bits = base.accepted[w]; bits; bits &= bits - 1)
        consider(static_cast<int32_t>(w * 32 + __builtin_ctz(bits)));
  } else {
    for (int32_t k = 0; k < n_long; ++k) {
      const int32_t id = v.sorted[v.by_len_desc[k]];
      if (get_bit(base.accepted, id)) consider(id);
    }
    for (const int32_t id : v.specials)
      if (get_bit(base.accepted, id)) consider(id);
  }
  return rewalk(g, v, key, base, redo, n_redo, dfa);
}

std::unique_ptr<TokenTable> refine_token_table(const Grammar& g, const TokenVocab::Impl& v,
                                               const TableKey& key, const TokenTable& base,
                                               TokenDfa* dfa) {
  std::vector<uint32_t> redo(base.accepted.size(), 0);
  const TokenTable& bc = ctx_src(base);
  for (const int32_t id : bc.ctx) set_bit(redo, id);
  for (const int32_t id : base.ctx_special) set_bit(redo, id);
  for (const int32_t id : base.popped_end) set_bit(redo, id);
  size_t n_redo = bc.ctx.size();
  for (const int32_t id : base.popped_end) n_redo += !v.special[id];
  return rewalk(g, v, key, base, redo, n_redo, dfa);
}

bool table_shape(const Grammar& g, const TableKey& key, int32_t max_states, std::string& out) {
  // Canonical ids by grammar state / rule, valid where stamped with this call's epoch: the
  // arrays are reused per thread, so a shape that turns out too large costs only its visits.
  thread_local std::vector<uint32_t> stamp, rule_stamp;
  thread_local std::vector<int32_t> id_of, rule_id_of;
  thread_local uint32_t epoch = 0;
  if (stamp.size() < g.states.size()) {
    stamp.resize(g.states.size(), 0);
    id_of.resize(g.states.size());
  }
  if (rule_stamp.size() < g.rules.size()) {
    rule_stamp.resize(g.rules.size(), 0);
    rule_id_of.resize(g.rules.size());
  }
  if (++epoch == 0) {
    std::fill(stamp.begin(), stamp.end(), 0);
    std::fill(rule_stamp.begin(), rule_stamp.end(), 0);
    epoch = 1;
  }
  std::vector<int32_t> states, rules;
  std::vector<uint8_t> called;  // per canonical rule: some reachable call pushes it fresh
  std::vector<int32_t> w;
  auto sid = [&](int32_t s) {
    if (stamp[s] != epoch) {
      stamp[s] = epoch;
      id_of[s] = static_cast<int32_t>(states.size());
      states.push_back(s);
    }
    return id_of[s];
  };
  auto rid = [&](int32_t r) {
    if (rule_stamp[r] != epoch) {
      rule_stamp[r] = epoch;
      rule_id_of[r] = static_cast<int32_t>(rules.size());
      rules.push_back(r);
      called.push_back(0);
    }
    return rule_id_of[r];
  };
  w.push_back(key.n);
  for (int i = 0; i < key.n; ++i) {
    const GrammarRule& r = g.rules[g.states[key.state[i]].rule];
    w.push_back(sid(key.state[i]));
    // Only iterations left matter to a walk from this frame (its rule's bound is written
    // below only if a fresh frame of it can be pushed): one table per distance, not per rule.
    w.push_back(r.max_iter > 0 ? r.max_iter - key.count[i] : key.count[i]);
  }
  for (size_t k = 0; k < states.size(); ++k) {
    if (static_cast<int32_t>(states.size()) > max_states) return false;
    const GrammarState& st = g.states[states[k]];
    w.push_back(rid(st.rule));
    w.push_back(st.final);
    w.push_back(static_cast<int32_t>(st.byte_end - st.byte_begin));
    for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
      const ByteEdge& b = g.byte_edges[e];
      w.push_back(b.lo | b.hi << 8 | b.literal << 16 | b.iter << 17);
      w.push_back(sid(b.target));
    }
    w.push_back(static_cast<int32_t>(st.call_end - st.call_begin));
    for (uint32_t e = st.call_begin; e < st.call_end; ++e) {
      const CallEdge& c = g.call_edges[e];
      called[rid(c.rule)] = 1;
      w.push_back(sid(g.rules[c.rule].start));
      w.push_back(sid(c.ret));
      w.push_back(c.iter);
    }
  }
  for (size_t k = 0; k < rules.size(); ++k) {
    const int32_t m = g.rules[rules[k]].max_iter;
    w.push_back(m == 0 || called[k] ? m : -1);
  }
  out.append(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(int32_t));
  return true;
}

size_t table_bytes(const TokenTable& t) {
  return sizeof t + t.accepted.capacity() * 4 + t.ctx.capacity() * 4 + t.ctx_lcp.capacity() * 2 +
         t.ctx_special.capacity() * 4 + t.popped_end.capacity() * 4 + t.ctx_blob.capacity() +
         t.ctx_off.capacity() * 4 + t.accepted_ids.capacity() * 4 +
         t.ctx_exit.capacity() * sizeof(TokenTable::Exit) + t.ctx_sig.capacity() * 8;
}

}  // namespace loom::structured
