// Builds a position's token table by walking the sorted vocabulary through a lazily built DFA:
// each DFA state is a canonical Frontier (hash-consed stacks make equal sets equal vectors),
// each transition is computed once, so most of the ~10^6 trie steps of a large vocabulary
// are one table lookup. Also derives near-bound tables and writes keys' canonical shapes.
#include "structured/token_table.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>

namespace loom::structured {
namespace {

constexpr int32_t kSmallRule = 48;  // automaton states

int32_t clamp_count(const Grammar& g, int32_t state, int32_t count, int32_t max_len) {
  const GrammarRule& r = g.rules[g.states[state].rule];
  if (r.max_iter == 0 || !r.clamp_ok) return count;
  // Every iteration consumes a byte, so one token cannot see past max_len more iterations.
  if (r.max_iter - count > max_len) return r.max_iter - max_len - 1;
  return count;
}

class LazyDfa {
 public:
  LazyDfa(const Grammar& g) : walker_(g, arena_) {}

  int32_t add_start(const TableKey& key) {
    int32_t node = kOutside;
    for (int i = key.n; i-- > 0;) node = arena_.intern(key.state[i], key.count[i], node);
    Frontier f;
    f.nodes.push_back(node);
    return intern(std::move(f));
  }
  bool dead(int32_t d) const { return states_[d].nodes.empty(); }
  bool popped(int32_t d) const { return states_[d].popped; }

  int32_t step(int32_t d, uint8_t b) {
    int32_t& t = trans_[static_cast<size_t>(d) * 256 + b];
    if (t >= 0) return t;
    walker_.advance(states_[d], b, false, scratch_);
    const int32_t next = intern(scratch_);
    trans_[static_cast<size_t>(d) * 256 + b] = next;  // trans_ may have grown
    return next;
  }

  // Walks the bytes of a special token: literal edges only, no caching (few such tokens).
  // Returns 1 accepted, 2 context-dependent, 0 rejected.
  int special_walk(int32_t start, const std::string& bytes) {
    Frontier cur = states_[start], next;
    bool popped_before = false;
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (cur.dead()) return popped_before ? 2 : 0;
      walker_.advance(cur, static_cast<uint8_t>(bytes[i]), true, next);
      std::swap(cur, next);
      if (cur.popped && i + 1 < bytes.size()) popped_before = true;
      if (cur.popped && i + 1 == bytes.size()) return 1;
    }
    if (!cur.dead()) return 1;
    return popped_before ? 2 : 0;
  }

 private:
  int32_t intern(const Frontier& f) {
    key_.assign(reinterpret_cast<const char*>(f.nodes.data()), f.nodes.size() * sizeof(int32_t));
    key_ += f.popped ? '1' : '0';
    auto [it, fresh] = index_.try_emplace(key_, static_cast<int32_t>(states_.size()));
    if (fresh) {
      states_.push_back(f);
      states_.back().can_end = false;
      trans_.resize(states_.size() * 256, -1);
    }
    return it->second;
  }

  StackArena arena_;
  StackWalker walker_;
  std::vector<Frontier> states_;
  std::vector<int32_t> trans_;  // (state, byte) -> state, -1 unknown
  std::unordered_map<std::string, int32_t> index_;
  std::string key_;
  Frontier scratch_;
};

}  // namespace

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

void set_bit(std::vector<uint32_t>& w, int32_t id) { w[id >> 5] |= 1u << (id & 31); }
bool get_bit(const std::vector<uint32_t>& w, int32_t id) { return (w[id >> 5] >> (id & 31)) & 1; }

size_t common_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t m = 0;
  while (m < n && a[m] == b[m]) ++m;
  return m;
}

// ctx_lcp for a ctx list in vocabulary sort order; n_accepted from the bitmask.
void finish_table(TokenTable& t, const TokenVocab::Impl& v) {
  t.ctx_lcp.resize(t.ctx.size());
  for (size_t k = 0; k < t.ctx.size(); ++k)
    t.ctx_lcp[k] = k == 0 ? 0
                          : static_cast<uint16_t>(std::min<size_t>(
                                common_prefix(v.bytes[t.ctx[k - 1]], v.bytes[t.ctx[k]]), 65535));
  t.n_accepted = 0;
  for (const uint32_t w : t.accepted) t.n_accepted += __builtin_popcount(w);
}

// The per-token walk shared by full builds and derivations: dst[d] is the DFA state after
// the first d bytes of the current token, pb[d] whether a path popped out of the key's frames
// at or before byte d.
class TokenWalk {
 public:
  TokenWalk(const Grammar& g, const TableKey& key, int32_t max_len)
      : dfa_(g), dst_(static_cast<size_t>(max_len) + 1), pb_(static_cast<size_t>(max_len) + 1) {
    start_ = dfa_.add_start(key);
    dst_[0] = start_;
    pb_[0] = 0;
  }
  // Walks `bytes` reusing the first min(lcp, valid) steps of the previous token. Returns 1
  // accepted, 2 context-dependent, 0 rejected; *dead_at: depth where every path died (or -1).
  int walk(const std::string& bytes, size_t lcp, size_t* dead_at) {
    const size_t len = bytes.size();
    size_t d = std::min(lcp, valid_);
    while (d < len) {
      if (dfa_.dead(dst_[d])) {
        valid_ = d;
        *dead_at = d;
        return pb_[d] ? 2 : 0;
      }
      const int32_t nx = dfa_.step(dst_[d], static_cast<uint8_t>(bytes[d]));
      dst_[d + 1] = nx;
      pb_[d + 1] = pb_[d] | static_cast<uint8_t>(dfa_.popped(nx));
      ++d;
    }
    valid_ = d;
    *dead_at = static_cast<size_t>(-1);
    if (!dfa_.dead(dst_[len]) || dfa_.popped(dst_[len])) return 1;
    return pb_[len] ? 2 : 0;
  }
  int special(const std::string& bytes) { return dfa_.special_walk(start_, bytes); }

 private:
  LazyDfa dfa_;
  int32_t start_ = 0;
  std::vector<int32_t> dst_;
  std::vector<uint8_t> pb_;
  size_t valid_ = 0;  // dst_[0..valid_] hold the previous token's path
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
                                              const TableKey& key) {
  auto table = std::make_unique<TokenTable>();
  TokenTable& t = *table;
  const int32_t n_vocab = static_cast<int32_t>(v.bytes.size());
  t.accepted.assign(bitmask_words(n_vocab), 0);
  TokenWalk walk(g, key, v.max_len);
  const size_t n = v.sorted.size();
  size_t i = 0;
  while (i < n) {
    const int32_t id = v.sorted[i];
    const std::string& bytes = v.bytes[id];
    size_t d = 0;
    const int r = walk.walk(bytes, v.lcp[i], &d);
    if (d == static_cast<size_t>(-1)) {
      if (r == 1) set_bit(t.accepted, id);
      else if (r == 2) t.ctx.push_back(id);
      ++i;
      continue;
    }
    // Dead at depth d: so is every following token that shares these d bytes.
    if (r == 2) {
      do t.ctx.push_back(v.sorted[i++]);
      while (i < n && v.lcp[i] >= d);
      continue;
    }
    // All rejected: binary search past the block of tokens with this prefix (most grammar
    // positions allow few first bytes, so this skips most of the vocabulary in a few steps).
    const std::string_view prefix(bytes.data(), d);
    size_t lo = i + 1, hi = n;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (v.bytes[v.sorted[mid]].compare(0, d, prefix) <= 0) lo = mid + 1;
      else hi = mid;
    }
    i = lo;
  }
  for (int32_t id : v.specials) {
    const int r = walk.special(v.bytes[id]);
    if (r == 1) set_bit(t.accepted, id);
    else if (r == 2) t.ctx_special.push_back(id);
  }
  finish_table(t, v);
  return table;
}

std::unique_ptr<TokenTable> derive_token_table(const Grammar& g, const TokenVocab::Impl& v,
                                               const TableKey& key, const TokenTable& base,
                                               int32_t remaining) {
  auto table = std::make_unique<TokenTable>();
  TokenTable& t = *table;
  t.accepted = base.accepted;
  std::vector<uint32_t> in_ctx(base.accepted.size(), 0);
  for (const int32_t id : base.ctx) set_bit(in_ctx, id);
  // Tokens longer than `remaining` that the base did not reject, in vocabulary sort order.
  const int32_t r = std::max(remaining, 0);
  std::vector<int32_t> pos;
  const int32_t n_long = r >= v.max_len ? 0 : v.n_longer[r];
  for (int32_t k = 0; k < n_long; ++k) {
    const int32_t p = v.by_len_desc[k];
    const int32_t id = v.sorted[p];
    if (get_bit(t.accepted, id) || get_bit(in_ctx, id)) {
      pos.push_back(p);
      t.accepted[id >> 5] &= ~(1u << (id & 31));
    }
  }
  std::sort(pos.begin(), pos.end());
  TokenWalk walk(g, key, v.max_len);
  std::vector<int32_t> fresh_ctx;  // positions
  const std::string* prev = nullptr;
  for (const int32_t p : pos) {
    const int32_t id = v.sorted[p];
    const std::string& bytes = v.bytes[id];
    size_t d = 0;
    // A token below a dead prefix dies at once: the walk resumes at the dead state.
    const int c = walk.walk(bytes, prev ? common_prefix(*prev, bytes) : 0, &d);
    prev = &bytes;
    if (c == 1) set_bit(t.accepted, id);
    else if (c == 2) fresh_ctx.push_back(p);
  }
  // Merge the kept short ctx tokens with the re-walked ones, both in sort order.
  std::vector<int32_t> kept;
  for (const int32_t id : base.ctx)
    if (static_cast<int32_t>(v.bytes[id].size()) <= r) kept.push_back(v.rank[id]);
  t.ctx.reserve(kept.size() + fresh_ctx.size());
  std::vector<int32_t> merged(kept.size() + fresh_ctx.size());
  std::merge(kept.begin(), kept.end(), fresh_ctx.begin(), fresh_ctx.end(), merged.begin());
  for (const int32_t p : merged) t.ctx.push_back(v.sorted[p]);
  for (const int32_t id : v.specials) {
    const bool was_acc = get_bit(base.accepted, id);
    const bool was_ctx = std::find(base.ctx_special.begin(), base.ctx_special.end(), id) != base.ctx_special.end();
    if (!was_acc && !was_ctx) continue;
    if (static_cast<int32_t>(v.bytes[id].size()) <= r) {
      if (was_ctx) t.ctx_special.push_back(id);
      continue;
    }
    t.accepted[id >> 5] &= ~(1u << (id & 31));
    const int c = walk.special(v.bytes[id]);
    if (c == 1) set_bit(t.accepted, id);
    else if (c == 2) t.ctx_special.push_back(id);
  }
  finish_table(t, v);
  return table;
}

bool table_shape(const Grammar& g, const TableKey& key, int32_t max_states, std::string& out) {
  std::unordered_map<int32_t, int32_t> state_id, rule_id;
  std::vector<int32_t> states, rules;
  std::vector<uint8_t> called;  // per canonical rule: some reachable call pushes it fresh
  std::vector<int32_t> w;
  auto sid = [&](int32_t s) {
    auto [it, fresh] = state_id.try_emplace(s, static_cast<int32_t>(states.size()));
    if (fresh) states.push_back(s);
    return it->second;
  };
  auto rid = [&](int32_t r) {
    auto [it, fresh] = rule_id.try_emplace(r, static_cast<int32_t>(rules.size()));
    if (fresh) {
      rules.push_back(r);
      called.push_back(0);
    }
    return it->second;
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
         t.ctx_special.capacity() * 4;
}

}  // namespace loom::structured
