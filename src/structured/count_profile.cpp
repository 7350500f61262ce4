// Count profiles (count_profile.h): the vocabulary walked once through a lazily built DFA
// whose states are *weighted* frontiers — each stack carries the fewest iterations of the
// profiled frame a path to it has taken — and the per-count tables filtered from them.
#include "structured/count_profile.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>

namespace loom::structured {
namespace {

// The profiled frame's count starts here: far below any real count, so its bound never stops
// a path, and a node with a count under kMarkLimit is that frame (fresh frames start at 0; a
// clamped far count is above -max_len - 1). The iterations taken are carried per path
// instead: once the frame has ended its count is gone from the stack.
constexpr int32_t kMark = -(1 << 30);
constexpr int32_t kMarkLimit = kMark + (1 << 29);
constexpr int32_t kInf = 1 << 30;

bool marked(int32_t count) {
  return count < kMarkLimit;
}

size_t common_prefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t m = 0;
  while (m < n && a[m] == b[m]) ++m;
  return m;
}

uint16_t need16(int32_t w) {
  return w >= CountProfile::kNever ? CountProfile::kNever : static_cast<uint16_t>(w);
}

struct Item {
  int32_t node;
  int32_t w;  // iterations of the profiled frame taken on the cheapest path to this stack
};

struct WState {
  std::vector<Item> items;  // sorted by node, one per node (the least w)
  int32_t pop_w = kInf;     // least w of the paths that left the key's frames on this step
  int32_t alive_w = kInf;   // least w over items
};

// The pushdown step of StackWalker (stack_walker.cpp) with a weight per path: a path through
// an iteration edge of the profiled frame pays one. Equal stacks keep their cheapest path
// (the same future, fewer iterations spent), so weights relax like shortest paths.
class WeightedWalker {
 public:
  WeightedWalker(const Grammar& g, StackArena& arena) : g_(g), arena_(arena) {}

  void advance(const WState& in, uint8_t b, bool literal_only, WState& out) {
    begin(out);
    for (const Item& it : in.items) {
      const StackNode n = arena_[it.node];
      const GrammarState& st = g_.states[n.state];
      for (uint32_t i = st.byte_begin; i < st.byte_end; ++i) {
        const ByteEdge& e = g_.byte_edges[i];
        if (b < e.lo || b > e.hi || (literal_only && !e.literal)) continue;
        int32_t count = n.count, w = it.w;
        if (e.iter) {
          if (count >= g_.rules[st.rule].max_iter) continue;
          ++count;
          w += marked(n.count);
        }
        close(arena_.intern(e.target, count, n.parent), w, out);
      }
    }
    finish(out);
  }

  void start(int32_t node, WState& out) {
    begin(out);
    out.items.push_back({node, 0});  // a key's frames are frontier nodes: no closure
    finish(out);
  }

 private:
  void begin(WState& out) {
    out.items.clear();
    out.pop_w = out.alive_w = kInf;
    if (++epoch_ == 0) {
      std::fill(stamp_.begin(), stamp_.end(), 0);
      epoch_ = 1;
    }
  }

  void close(int32_t node, int32_t w0, WState& out) {
    work_.clear();
    work_.push_back({node, w0});
    while (!work_.empty()) {
      const Item cur = work_.back();
      work_.pop_back();
      const size_t id = static_cast<size_t>(cur.node);
      if (id >= stamp_.size()) {
        const size_t n = std::max<size_t>(static_cast<size_t>(arena_.size()) * 2, 1024);
        stamp_.resize(n, 0);
        best_.resize(n, kInf);
      }
      if (stamp_[id] == epoch_ && best_[id] <= cur.w) continue;
      stamp_[id] = epoch_;
      best_[id] = cur.w;
      const StackNode n = arena_[cur.node];
      const GrammarState& st = g_.states[n.state];
      if (st.byte_begin != st.byte_end) out.items.push_back(cur);
      if (st.final) {
        if (n.parent == kOutside)
          out.pop_w = std::min(out.pop_w, cur.w);
        else if (n.parent >= 0)
          work_.push_back({n.parent, cur.w});
      }
      for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
        const CallEdge& c = g_.call_edges[i];
        int32_t count = n.count, w = cur.w;
        if (c.iter) {
          if (count >= g_.rules[st.rule].max_iter) continue;
          ++count;
          w += marked(n.count);
        }
        const int32_t ret =
            g_.is_pure_end(c.ret) ? n.parent : arena_.intern(c.ret, count, n.parent);
        work_.push_back({arena_.intern(g_.rules[c.rule].start, 0, ret), w});
      }
    }
  }

  // Sorted by node, the cheapest item of each node kept.
  static void finish(WState& out) {
    std::sort(out.items.begin(), out.items.end(), [](const Item& a, const Item& b) {
      return a.node != b.node ? a.node < b.node : a.w < b.w;
    });
    size_t k = 0;
    for (size_t i = 0; i < out.items.size(); ++i)
      if (k == 0 || out.items[k - 1].node != out.items[i].node) out.items[k++] = out.items[i];
    out.items.resize(k);
    for (const Item& it : out.items) out.alive_w = std::min(out.alive_w, it.w);
  }

  const Grammar& g_;
  StackArena& arena_;
  std::vector<uint32_t> stamp_;
  std::vector<int32_t> best_;
  uint32_t epoch_ = 0;
  std::vector<Item> work_;
};

// Weighted frontiers interned, one transition per (state, byte) computed once: as LazyDfa in
// token_table.cpp, private to one profile build.
class WeightedDfa {
 public:
  explicit WeightedDfa(const Grammar& g) : walker_(g, arena_) {}

  int32_t add_start(const TableKey& key, int32_t frame) {
    int32_t node = kOutside;
    for (int i = key.n; i-- > 0;)
      node = arena_.intern(key.state[i], i == frame ? kMark : key.count[i], node);
    WState s;
    walker_.start(node, s);
    return intern(s);
  }
  const WState& state(int32_t d) const { return states_[d]; }
  bool dead(int32_t d) const { return states_[d].items.empty(); }

  int32_t step(int32_t d, uint8_t b) {
    const size_t slot = static_cast<size_t>(d) * 256 + b;
    if (trans_[slot] >= 0) return trans_[slot];
    walker_.advance(states_[d], b, false, scratch_);
    const int32_t next = intern(scratch_);
    trans_[slot] = next;
    return next;
  }

  // A special token: literal edges only, no caching (few such tokens). Fills `need`.
  void special(int32_t start, const std::string& bytes, CountProfile::Need& need) {
    WState cur = states_[start], next;
    int32_t before = kInf;  // least w of a path that left the frames with bytes left
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (cur.items.empty()) {
        need.accept = need.pop_end = CountProfile::kNever;
        need.exit = need16(before);
        return;
      }
      walker_.advance(cur, static_cast<uint8_t>(bytes[i]), true, next);
      std::swap(cur, next);
      if (i + 1 < bytes.size()) before = std::min(before, cur.pop_w);
    }
    need.accept = need16(cur.alive_w);
    need.pop_end = need16(cur.pop_w);
    need.exit = need16(before);
  }

 private:
  int32_t intern(const WState& s) {
    key_.assign(reinterpret_cast<const char*>(s.items.data()), s.items.size() * sizeof(Item));
    key_.append(reinterpret_cast<const char*>(&s.pop_w), sizeof s.pop_w);
    auto [it, fresh] = index_.try_emplace(key_, static_cast<int32_t>(states_.size()));
    if (fresh) {
      states_.push_back(s);
      trans_.resize(states_.size() * 256, -1);
    }
    return it->second;
  }

  StackArena arena_;
  WeightedWalker walker_;
  std::vector<WState> states_;
  std::vector<int32_t> trans_;  // (state, byte) -> state, -1 unknown
  std::unordered_map<std::string, int32_t> index_;
  std::string key_;
  WState scratch_;
};

// The list of normal tokens context-dependent at some count (exit below both other needs), in
// sort order, written directly: the profile knows their positions.
std::shared_ptr<const TokenTable> ctx_union(const std::vector<CountProfile::Need>& normal,
                                            const TokenVocab::Impl& v) {
  auto table = std::make_shared<TokenTable>();
  TokenTable& t = *table;
  auto member = [](const CountProfile::Need& n) { return n.exit < std::min(n.accept, n.pop_end); };
  size_t n_ctx = 0, blob = 0;
  for (const CountProfile::Need& n : normal)
    if (member(n)) {
      ++n_ctx;
      blob += v.sorted_off[n.pos + 1] - v.sorted_off[n.pos];
    }
  t.ctx.reserve(n_ctx);
  t.ctx_exit.reserve(n_ctx);
  t.ctx_sig.reserve(n_ctx);
  t.ctx_lcp.reserve(n_ctx);
  t.ctx_off.reserve(n_ctx + 1);
  t.ctx_off.push_back(0);
  t.ctx_blob.reserve(blob);
  int32_t prev = -1;
  for (const CountProfile::Need& n : normal) {
    if (!member(n)) continue;
    const std::string_view bytes = v.sorted_bytes(n.pos);
    size_t lcp = 0;
    if (prev >= 0)
      lcp = n.pos == prev + 1 ? v.lcp[n.pos] : common_prefix(v.sorted_bytes(prev), bytes);
    t.ctx.push_back(n.id);
    t.ctx_exit.push_back(n.offsets);
    t.ctx_sig.push_back(exit_signature(bytes, n.offsets));
    t.ctx_lcp.push_back(static_cast<uint16_t>(std::min<size_t>(lcp, 65535)));
    t.ctx_blob.append(bytes);
    t.ctx_off.push_back(static_cast<uint32_t>(t.ctx_blob.size()));
    prev = n.pos;
  }
  return table;
}

}  // namespace

int near_bound_frame(const Grammar& g, const TableKey& key, int32_t max_len) {
  int frame = -1;
  for (int i = 0; i < key.n; ++i) {
    const GrammarRule& r = g.rules[g.states[key.state[i]].rule];
    if (r.max_iter == 0 || !r.clamp_ok || r.max_iter - key.count[i] > max_len) continue;
    if (frame >= 0) return -1;
    frame = i;
  }
  return frame;
}

std::unique_ptr<CountProfile> build_count_profile(const Grammar& g, const TokenVocab::Impl& v,
                                                  const TableKey& base, int32_t frame) {
  auto profile = std::make_unique<CountProfile>();
  CountProfile& p = *profile;
  p.frame = frame;
  WeightedDfa dfa(g);
  const int32_t start = dfa.add_start(base, frame);
  // Per depth d of the current token: the DFA state after d bytes, the least w of a path that
  // left the key's frames at a depth in 1..d, the first and last such depth (any w).
  const size_t depths = static_cast<size_t>(v.max_len) + 1;
  std::vector<int32_t> dst(depths), pmin(depths);
  std::vector<uint16_t> pf(depths), pd(depths);
  dst[0] = start;
  pmin[0] = kInf;
  pf[0] = pd[0] = TokenTable::kNoExit;
  size_t valid = 0;  // dst[0..valid] hold the previous token's path
  const size_t n = v.sorted.size();
  size_t i = 0;
  while (i < n) {
    const std::string_view bytes = v.sorted_bytes(i);
    const size_t len = bytes.size();
    size_t d = std::min<size_t>(v.lcp[i], valid);
    while (d < len && !dfa.dead(dst[d])) {
      const int32_t nx = dfa.step(dst[d], static_cast<uint8_t>(bytes[d]));
      dst[d + 1] = nx;
      pmin[d + 1] = pmin[d];
      pf[d + 1] = pf[d];
      pd[d + 1] = pd[d];
      const int32_t pw = dfa.state(nx).pop_w;
      if (pw < kInf) {
        const uint16_t depth = static_cast<uint16_t>(std::min<size_t>(d + 1, TokenTable::kNoExit));
        if (pmin[d] == kInf) pf[d + 1] = depth;
        pmin[d + 1] = std::min(pmin[d], pw);
        pd[d + 1] = depth;
      }
      ++d;
    }
    valid = d;
    if (d == len) {
      const WState& end = dfa.state(dst[len]);
      const TokenTable::Exit offsets{pf[len], pd[len]};
      const CountProfile::Need need{v.sorted[i],
                                    static_cast<int32_t>(i),
                                    need16(end.alive_w),
                                    need16(end.pop_w),
                                    need16(len > 0 ? pmin[len - 1] : kInf),
                                    offsets};
      if (need.accept != CountProfile::kNever || need.pop_end != CountProfile::kNever ||
          need.exit != CountProfile::kNever)
        p.normal.push_back(need);
      ++i;
      continue;
    }
    // Every path died after d bytes: so do they for each following token with these d bytes,
    // which left the frames at the same depths with the same iterations.
    const uint16_t exit = need16(pmin[d]);
    if (exit != CountProfile::kNever) {
      const TokenTable::Exit offsets{pf[d], pd[d]};
      do {
        p.normal.push_back({v.sorted[i], static_cast<int32_t>(i), CountProfile::kNever,
                            CountProfile::kNever, exit, offsets});
        ++i;
      } while (i < n && v.lcp[i] >= d);
      continue;
    }
    if (d == 0) {  // the start is dead: nothing passes (a key's frames always have byte edges)
      i = n;
      continue;
    }
    if (d == 1) {  // the whole first-byte block
      i = v.first_end[static_cast<uint8_t>(bytes[0])];
      continue;
    }
    do ++i;
    while (i < n && v.lcp[i] >= d);
  }
  for (const int32_t id : v.specials) {
    CountProfile::Need need{id, -1, 0, 0, 0, {TokenTable::kNoExit, TokenTable::kNoExit}};
    dfa.special(start, v.bytes[id], need);
    if (need.accept != CountProfile::kNever || need.pop_end != CountProfile::kNever ||
        need.exit != CountProfile::kNever)
      p.specials.push_back(need);
  }
  p.ctx_union = ctx_union(p.normal, v);
  p.ctx_at.assign(static_cast<size_t>(v.max_len) + 2, 0);
  for (const CountProfile::Need& n : p.normal) {
    if (n.exit >= std::min(n.accept, n.pop_end)) continue;  // as ctx_union()
    const uint16_t to =
        std::min<uint16_t>(std::min(n.accept, n.pop_end), static_cast<uint16_t>(v.max_len + 1));
    p.ctx_from.push_back(n.exit);
    p.ctx_to.push_back(to);
    ++p.ctx_at[n.exit];  // differences, summed below
    --p.ctx_at[to];
  }
  for (size_t r = 1; r < p.ctx_at.size(); ++r) p.ctx_at[r] += p.ctx_at[r - 1];
  for (const CountProfile::Need& n : p.normal)
    if (n.accept != CountProfile::kNever || n.pop_end != CountProfile::kNever)
      p.accepts.push_back({n.id, n.accept, n.pop_end});
  return profile;
}

std::unique_ptr<TokenTable> table_from_profile(const CountProfile& p, const TokenVocab::Impl& v,
                                               int32_t remaining) {
  auto table = std::make_unique<TokenTable>();
  TokenTable& t = *table;
  t.accepted.assign(bitmask_words(static_cast<int32_t>(v.bytes.size())), 0);
  const uint16_t r = static_cast<uint16_t>(std::clamp<int32_t>(remaining, 0, 0xFFFE));
  auto accept = [&](int32_t id) {
    t.accepted[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    ++t.n_accepted;
  };
  for (const CountProfile::Accept& n : p.accepts) {
    if (n.accept <= r) {
      accept(n.id);
    } else if (n.pop_end <= r) {
      accept(n.id);
      t.popped_end.push_back(n.id);
    }
  }
  // From max_len iterations left up nothing changes: no token needs more.
  const size_t at = std::min<size_t>(r, p.ctx_at.size() - 2);
  const TokenTable& u = *p.ctx_union;
  if (static_cast<size_t>(p.ctx_at[at]) * 8 >= u.ctx.size()) {
    t.ctx_owner = p.ctx_union;
  } else {
    const size_t n = static_cast<size_t>(p.ctx_at[at]);
    t.ctx.reserve(n);
    t.ctx_exit.reserve(n);
    t.ctx_sig.reserve(n);
    t.ctx_lcp.reserve(n);
    t.ctx_off.reserve(n + 1);
    t.ctx_blob.reserve(u.ctx.empty() ? 0 : u.ctx_blob.size() / u.ctx.size() * n * 2);
    t.ctx_off.push_back(0);
    size_t prev = SIZE_MAX;  // index in u of the last token copied
    for (size_t k = 0; k < u.ctx.size(); ++k) {
      if (at < p.ctx_from[k] || at >= p.ctx_to[k]) continue;
      const std::string_view bytes(u.ctx_blob.data() + u.ctx_off[k],
                                   u.ctx_off[k + 1] - u.ctx_off[k]);
      size_t lcp = 0;
      if (prev != SIZE_MAX)
        lcp = k == prev + 1 ? u.ctx_lcp[k]
                            : common_prefix(std::string_view(u.ctx_blob.data() + u.ctx_off[prev],
                                                             u.ctx_off[prev + 1] - u.ctx_off[prev]),
                                            bytes);
      t.ctx.push_back(u.ctx[k]);
      t.ctx_exit.push_back(u.ctx_exit[k]);
      t.ctx_sig.push_back(u.ctx_sig[k]);
      t.ctx_lcp.push_back(static_cast<uint16_t>(std::min<size_t>(lcp, 65535)));
      t.ctx_blob.append(bytes);
      t.ctx_off.push_back(static_cast<uint32_t>(t.ctx_blob.size()));
      prev = k;
    }
  }
  for (const CountProfile::Need& n : p.specials) {
    if (n.accept <= r) {
      accept(n.id);
    } else if (n.pop_end <= r) {
      accept(n.id);
      t.popped_end.push_back(n.id);
    } else if (n.exit <= r) {
      t.ctx_special.push_back(n.id);
    }
  }
  finish_accepted_ids(t);
  return table;
}

size_t profile_bytes(const CountProfile& p) {
  return sizeof p + (p.normal.capacity() + p.specials.capacity()) * sizeof(CountProfile::Need) +
         (p.ctx_from.capacity() + p.ctx_to.capacity()) * 2 + p.ctx_at.capacity() * 4 +
         p.accepts.capacity() * sizeof(CountProfile::Accept) +
         (p.ctx_union ? table_bytes(*p.ctx_union) : 0);
}

}  // namespace loom::structured
