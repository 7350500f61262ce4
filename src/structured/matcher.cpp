// CompiledGrammar (the shared per-position token tables) and GrammarMatcher (one sequence's
// stacks, masks, accept and rollback). See matcher.h for the guarantees.
#include "structured/matcher.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "structured/count_profile.h"
#include "structured/mask_cache.h"
#include "structured/stack_walker.h"
#include "structured/table_store.h"
#include "structured/token_table.h"
#include "structured/vocab_index.h"

namespace loom::structured {

// Shapes up to this many states are looked up in the vocabulary's shared store; larger ones
// belong to one grammar (a big schema's object rule) and would only fill the store.
constexpr int32_t kMaxSharedStates = 512;
// Masks kept per grammar (each n_vocab / 8 bytes: 19 KB for Qwen3; 1.2 MB per grammar, and
// GrammarCache keeps up to 256 grammars).
constexpr size_t kMaskCacheEntries = 64;

struct CompiledGrammar::Impl {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocab> vocab;
  bool cached = true;  // false: every table built from scratch, no mask cache (tests' reference)
  // Masks of states that walk at least this many context-dependent tokens are cached.
  size_t mask_cache_min_ctx = 256;
  // Context-dependent lists at least this long get the exit-byte prefilter (walk_context).
  size_t prefilter_min_ctx = 32;
  // Near-bound derivations that would walk at least this many tokens use a count profile.
  size_t profile_min_redo = 2048;
  MaskCache masks{kMaskCacheEntries};
  std::shared_ptr<TokenDfa> dfa;  // shared by this grammar's table builds
  std::mutex mu;
  // This grammar's tables by key; they may also sit in the vocabulary's store.
  std::unordered_map<TableKey, std::shared_ptr<const TokenTable>, TableKeyHash> tables;
  // Count profiles by near_bound() base key (count_profile.h).
  std::unordered_map<TableKey, std::shared_ptr<const CountProfile>, TableKeyHash> profiles;

  // The returned table lives as long as this CompiledGrammar.
  const TokenTable* table(const TableKey& key) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = tables.find(key);
      if (it != tables.end()) return it->second.get();
    }
    // Built outside the lock: two threads may build the same table; the first one is kept.
    std::shared_ptr<const TokenTable> built = resolve(key);
    std::lock_guard<std::mutex> lock(mu);
    auto [it, fresh] = tables.try_emplace(key, std::move(built));
    return it->second.get();
  }

  // For a key that names its call site in this grammar (too large a shape to share): the
  // table of the key without its bottom frame when that one is shared (a string or email
  // rule alone) and leaves few tokens to walk again; else null (build the key directly).
  const TokenTable* shared_base(const TableKey& key) {
    if (key.n < 2) return nullptr;
    TableKey base = key;
    --base.n;
    std::string shape;
    if (!table_shape(*grammar, base, kMaxSharedStates, shape)) return nullptr;
    const TokenTable* t = table(base);
    const size_t redo = ctx_src(*t).ctx.size() + t->popped_end.size();
    return redo * 4 < vocab->impl().sorted.size() ? t : nullptr;
  }

  // The tables of positions reachable from `start` by a few bytes, breadth first, until
  // kPrebuildBudget has gone: a first visit at mask time builds one (~1 ms for a large
  // identifier table, grammar-specific), which is what a grammar's p99 mask time is made of.
  void prebuild(Frontier start, StackArena& arena, StackWalker& walker) {
    using Clock = std::chrono::steady_clock;
    constexpr auto kPrebuildBudget = std::chrono::milliseconds(10);
    constexpr size_t kMaxFrontiers = 4096;
    const auto t0 = Clock::now();
    const int32_t max_len = vocab->impl().max_len;
    std::unordered_set<std::string> seen;
    std::deque<Frontier> queue;
    auto fkey = [](const Frontier& f) {
      return std::string(reinterpret_cast<const char*>(f.nodes.data()),
                         f.nodes.size() * sizeof(int32_t));
    };
    seen.insert(fkey(start));
    queue.push_back(std::move(start));
    // Also stops once this many frontiers in a row named no new table: the reachable
    // positions are covered (a small grammar) and the rest would only cost compile time.
    constexpr int kMaxIdle = 256;
    int idle = 0;
    Frontier next;
    while (!queue.empty() && seen.size() < kMaxFrontiers && idle < kMaxIdle) {
      const Frontier f = std::move(queue.front());
      queue.pop_front();
      const size_t n_before = tables.size();  // only this thread writes it during create
      for (const int32_t node : f.nodes) {
        if (Clock::now() - t0 > kPrebuildBudget) return;
        table(table_key(*grammar, arena, node, max_len));
      }
      idle = tables.size() > n_before ? 0 : idle + 1;
      for (int b = 0; b < 256; ++b) {
        walker.advance(f, static_cast<uint8_t>(b), false, next);
        if (next.dead() || !seen.insert(fkey(next)).second) continue;
        queue.push_back(next);
      }
    }
  }

  // The table already built for this key's position with the fewest more iterations left (a near
  // bound key one count earlier): a derivation from it walks again only the tokens it still
  // allows that are longer than the iterations left, so an identifier growing a character or
  // a few per token costs a few dozen walks per new count instead of every identifier token.
  const TokenTable* nearest_built(const TableKey& key, const TableKey& base) {
    constexpr int kMaxLookback = 16;
    std::lock_guard<std::mutex> lock(mu);
    TableKey k = key;
    for (int j = 1; j <= kMaxLookback; ++j) {
      for (int i = 0; i < k.n; ++i) {
        if (base.count[i] == key.count[i]) continue;  // not near its bound
        k.count[i] = key.count[i] - j;
        if (k.count[i] <= base.count[i]) return nullptr;  // as far as the base: use it
      }
      auto it = tables.find(k);
      if (it != tables.end()) return it->second.get();
    }
    return nullptr;
  }

  // The profile of a near-bound key's family (count_profile.h), built once a derivation from
  // `from` would walk at least profile_min_redo tokens again. A profile costs about one
  // build of the family's widest table, so only families whose tables leave most of the
  // vocabulary rejected get one: an identifier (a fifth of Qwen3's tokens, every count
  // derived again on most of them) pays it back within a few counts, where a string body
  // near its maxLength allows nearly every token and is derived for a few counts a document
  // from tables the store already shares.
  const CountProfile* count_profile(const TableKey& key, const TableKey& base, int32_t remaining,
                                    const TokenTable& from) {
    const TokenVocab::Impl& v = vocab->impl();
    const int32_t frame = near_bound_frame(*grammar, key, v.max_len);
    if (frame < 0) return nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = profiles.find(base);
      if (it != profiles.end()) return it->second.get();
    }
    // The tokens a derivation would walk again: those longer than `remaining` that `from`
    // allows; and the tokens a profile walk would reach, about those `from` does not reject.
    const int32_t r = std::clamp(remaining, 0, v.max_len);
    const size_t redo =
        std::min(static_cast<size_t>(v.n_longer[r]), static_cast<size_t>(from.n_accepted));
    const size_t reach = static_cast<size_t>(from.n_accepted) + ctx_src(from).ctx.size();
    if (redo < profile_min_redo || reach * 4 > v.sorted.size()) return nullptr;
    // Another grammar (or call site) may have profiled the same shape already.
    std::string shape;
    const bool shared = cached && table_shape(*grammar, base, kMaxSharedStates, shape);
    if (shared) shape += "#" + std::to_string(frame);
    std::shared_ptr<const CountProfile> built = shared ? v.profiles->find(shape) : nullptr;
    if (!built) {
      built = build_count_profile(*grammar, v, base, frame);
      if (shared) built = v.profiles->insert(shape, std::move(built));
    }
    std::lock_guard<std::mutex> lock(mu);
    return profiles.try_emplace(base, std::move(built)).first->second.get();
  }

  std::shared_ptr<const TokenTable> resolve(const TableKey& key) {
    const TokenVocab::Impl& v = vocab->impl();
    if (!cached) return build_token_table(*grammar, v, key);
    std::string shape;
    const bool shared = table_shape(*grammar, key, kMaxSharedStates, shape);
    if (shared)
      if (auto t = v.tables->find(shape)) return t;
    std::shared_ptr<const TokenTable> t;
    TableKey base;
    int32_t remaining = 0;
    if (near_bound(*grammar, key, v.max_len, &base, &remaining)) {
      const TokenTable* nearest = nearest_built(key, base);
      const TokenTable& from = nearest ? *nearest : *table(base);
      if (const CountProfile* p = count_profile(key, base, remaining, from))
        t = table_from_profile(*p, v, remaining);
      else
        t = derive_near_bound(*grammar, v, key, from, remaining, dfa.get());
    } else if (const TokenTable* bt = shared_base(key))
      t = refine_token_table(*grammar, v, key, *bt, dfa.get());
    else
      t = build_token_table(*grammar, v, key, dfa.get());
    return shared ? v.tables->insert(shape, std::move(t)) : t;
  }
};

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab) {
  return create_impl(std::move(grammar), std::move(vocab), true);
}

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create_uncached(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab) {
  return create_impl(std::move(grammar), std::move(vocab), false);
}

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create_impl(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab, bool cached) {
  if (!grammar || !vocab) return invalid_argument("CompiledGrammar: null grammar or vocabulary");
  std::shared_ptr<CompiledGrammar> cg(new CompiledGrammar());
  cg->impl_ = std::make_unique<Impl>();
  cg->impl_->grammar = std::move(grammar);
  cg->impl_->vocab = std::move(vocab);
  cg->impl_->cached = cached;
  if (cached) cg->impl_->dfa = make_token_dfa(*cg->impl_->grammar);
  // A small vocabulary (tests) caches smaller walks too, so that the cache gets exercised.
  const size_t n_vocab = static_cast<size_t>(cg->impl_->vocab->size());
  cg->impl_->mask_cache_min_ctx = cached ? std::min<size_t>(256, n_vocab / 16 + 1) : SIZE_MAX;
  cg->impl_->prefilter_min_ctx = cached ? std::min<size_t>(32, n_vocab / 256 + 1) : SIZE_MAX;
  cg->impl_->profile_min_redo = std::min<size_t>(2048, n_vocab / 16 + 1);
  // The first mask is needed at once: build the start positions' tables now.
  StackArena arena;
  StackWalker walker(*cg->impl_->grammar, arena);
  Frontier f;
  walker.start(f);
  for (int32_t node : f.nodes)
    cg->impl_->table(table_key(*cg->impl_->grammar, arena, node, cg->impl_->vocab->impl().max_len));
  if (cached) cg->impl_->prebuild(std::move(f), arena, walker);
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

CompiledGrammar::~CompiledGrammar() = default;
const Grammar& CompiledGrammar::grammar() const {
  return *impl_->grammar;
}
const TokenVocab& CompiledGrammar::vocab() const {
  return *impl_->vocab;
}

struct GrammarMatcher::Impl {
  explicit Impl(std::shared_ptr<const CompiledGrammar> c)
      : cg(std::move(c)),
        g(&cg->grammar()),
        v(&cg->vocab().impl()),
        walker(*g, arena),
        scratch_walker(*g, scratch),
        levels(static_cast<size_t>(v->max_len) + 2) {
    walker.start(cur);
  }

  std::shared_ptr<const CompiledGrammar> cg;
  const Grammar* g;
  const TokenVocab::Impl* v;
  StackArena arena;  // every stack ever reached (append-only: history stays valid)
  StackWalker walker;
  Frontier cur;
  std::vector<Frontier> history;  // state before each accepted token
  bool ended = false;             // EOS accepted

  // Mask scratch, reused so filling a mask does not allocate once warm.
  StackArena scratch;
  StackWalker scratch_walker;
  std::vector<Frontier> levels;  // levels[d]: state after d bytes of the token being walked
  std::vector<int32_t> frames;
  Frontier a, b;
  // node_tables[id]: the table of arena node id, once looked up (the arena is append-only, so
  // a node's key never changes): a warm mask takes no lock and computes no key.
  std::vector<const TokenTable*> node_tables;
  std::vector<int8_t> node_frames;  // node_frames[id]: frames in that table's key
  std::string state_key;            // the mask cache's key for `cur` (reused buffer)

  // The contents of every stack in `cur`: what a mask depends on, whatever the arena ids.
  void make_state_key() {
    state_key.clear();
    for (const int32_t node : cur.nodes) {
      for (int32_t n = node; n >= 0; n = arena[n].parent) {
        const int32_t sc[2] = {arena[n].state, arena[n].count};
        state_key.append(reinterpret_cast<const char*>(sc), sizeof sc);
      }
      const int32_t end = -1;
      state_key.append(reinterpret_cast<const char*>(&end), sizeof end);
    }
  }

  bool walk(std::string_view bytes, bool literal_only, Frontier& out) {
    a = cur;
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (a.dead()) return false;
      walker.advance(a, static_cast<uint8_t>(bytes[i]), literal_only, b);
      std::swap(a, b);
    }
    if (a.dead() && !a.can_end) return false;
    out = a;
    return true;
  }

  // Copies the real stack under `node` into the scratch arena; returns the copy's top.
  int32_t copy_stack(int32_t node) {
    frames.clear();
    for (int32_t n = node; n >= 0; n = arena[n].parent) frames.push_back(n);
    int32_t parent = kBottom;
    for (size_t i = frames.size(); i-- > 0;) {
      const StackNode& n = arena[frames[i]];
      parent = scratch.intern(n.state, n.count, parent);
    }
    return parent;
  }

  static void set_bit(std::span<uint32_t> words, int32_t id) { words[id >> 5] |= 1u << (id & 31); }

  // follow[b]: byte b can be consumed right after a path leaves the `key_frames` top frames
  // of the scratch stack `top` (the byte edges of the closure of the frame below them).
  uint64_t follow[4] = {};
  // exit_byte_bit() of every byte in follow, and bit 63 (no byte's) so that a token whose
  // exit is unknown (every bit) always goes on to the exact check.
  uint64_t follow_sig = 0;
  Frontier follow_f;
  void compute_follow(int32_t top, int32_t key_frames) {
    follow[0] = follow[1] = follow[2] = follow[3] = 0;
    follow_sig = uint64_t{1} << 63;
    int32_t p = top;
    for (int32_t k = 0; k < key_frames && p >= 0; ++k) p = scratch[p].parent;
    if (p < 0) return;  // leaving them ends the input: no byte can follow
    scratch_walker.begin(follow_f);
    scratch_walker.close(p, follow_f);
    for (const int32_t id : follow_f.nodes) {
      const StackNode sn = scratch[id];
      const GrammarState& st = g->states[sn.state];
      for (uint32_t e = st.byte_begin; e < st.byte_end; ++e) {
        const ByteEdge& be = g->byte_edges[e];
        if (be.iter && sn.count >= g->rules[st.rule].max_iter) continue;
        for (int w = be.lo >> 6; w <= be.hi >> 6; ++w) {  // bits lo..hi, a word at a time
          const int lo = std::max<int>(be.lo, w * 64) - w * 64;
          const int hi = std::min<int>(be.hi, w * 64 + 63) - w * 64;
          follow[w] |= (~uint64_t{0} >> (63 - hi)) & (~uint64_t{0} << lo);
        }
      }
    }
    for (int w = 0; w < 4; ++w)
      for (uint64_t bits = follow[w]; bits; bits &= bits - 1)
        follow_sig |= exit_byte_bit(static_cast<uint8_t>(w * 64 + __builtin_ctzll(bits)));
  }

  // The table's context-dependent tokens, walked with the real stack below `node`.
  void walk_context(int32_t node, int32_t key_frames, const TokenTable& table,
                    std::span<uint32_t> words) {
    const TokenTable& t = ctx_src(table);
    scratch.clear();
    Frontier& f0 = levels[0];
    f0.clear();
    const int32_t top = copy_stack(node);
    f0.nodes.push_back(top);
    // The reference (create_uncached) walks every token: tests compare the prefilter with it.
    // A short list is walked as fast as the follow set is computed.
    const bool prefilter = t.ctx.size() >= cg->impl().prefilter_min_ctx;
    if (prefilter && !t.ctx.empty()) compute_follow(top, key_frames);
    size_t valid = 0;
    const size_t n = t.ctx.size();
    size_t i = 0;
    while (i < n) {
      const int32_t id = t.ctx[i];
      const std::string_view bytes(t.ctx_blob.data() + t.ctx_off[i],
                                   t.ctx_off[i + 1] - t.ctx_off[i]);
      const size_t len = bytes.size();
      // Every path that can accept the token leaves the key's frames after lo..hi of its bytes
      // and then takes the next byte with the frames below: rejected without a walk if they
      // can take none of those. levels[] stays valid for the prefix shared with the last walk.
      if (prefilter) {
        // The signature first: most rejected tokens share no exit-byte bit with the follow set.
        if (!(t.ctx_sig[i] & follow_sig)) {
          valid = std::min<size_t>(valid, t.ctx_lcp[i]);
          ++i;
          continue;
        }
        const TokenTable::Exit ex = t.ctx_exit[i];
        bool can = ex.lo >= len;  // unknown (kNoExit): walk it
        for (size_t k = ex.lo; !can && k <= ex.hi && k < len; ++k) {
          const uint8_t xb = static_cast<uint8_t>(bytes[k]);
          can = (follow[xb >> 6] >> (xb & 63)) & 1;
        }
        if (!can) {
          valid = std::min<size_t>(valid, t.ctx_lcp[i]);
          ++i;
          continue;
        }
      }
      size_t d = std::min<size_t>(t.ctx_lcp[i], valid);
      bool died = false;
      while (d < len) {
        if (levels[d].dead()) {
          died = true;
          break;
        }
        scratch_walker.advance(levels[d], static_cast<uint8_t>(bytes[d]), false, levels[d + 1]);
        ++d;
      }
      valid = d;
      if (!died) {
        if (!levels[len].dead() || levels[len].can_end) set_bit(words, id);
        ++i;
        continue;
      }
      do ++i;
      while (i < n && t.ctx_lcp[i] >= d);
    }
    for (const int32_t id : table.ctx_special) {
      const std::string& bytes = v->bytes[id];
      Frontier* x = &levels[0];
      bool ok = true;
      for (size_t k = 0; k < bytes.size(); ++k) {
        if (x->dead()) {
          ok = false;
          break;
        }
        scratch_walker.advance(*x, static_cast<uint8_t>(bytes[k]), true, levels[k + 1]);
        x = &levels[k + 1];
      }
      if (ok && (!x->dead() || x->can_end)) set_bit(words, id);
    }
  }

  bool terminated() const { return ended || (cur.can_end && !walker.any_byte(cur)); }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : impl_(std::make_unique<Impl>(std::move(grammar))) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> words) {
  Impl& m = *impl_;
  const size_t nw = bitmask_words(static_cast<int32_t>(m.v->bytes.size()));
  LOOM_CHECK(words.size() >= nw);
  std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(nw), 0u);
  if (!m.terminated()) {
    CompiledGrammar::Impl& cg = m.cg->impl();
    size_t n_ctx = 0;
    for (const int32_t node : m.cur.nodes) {
      if (static_cast<size_t>(node) >= m.node_tables.size()) {
        m.node_tables.resize(static_cast<size_t>(m.arena.size()) * 2, nullptr);
        m.node_frames.resize(m.node_tables.size(), 0);
      }
      const TokenTable*& t = m.node_tables[node];
      if (!t) {
        const TableKey key = table_key(*m.g, m.arena, node, m.v->max_len);
        t = cg.table(key);
        m.node_frames[node] = static_cast<int8_t>(key.n);
      }
      n_ctx += ctx_src(*t).ctx.size() + t->ctx_special.size();
    }
    const bool expensive = n_ctx >= cg.mask_cache_min_ctx;
    if (expensive) m.make_state_key();
    if (!expensive || !cg.masks.get(m.state_key, words.first(nw))) {
      for (const int32_t node : m.cur.nodes) {
        const TokenTable& t = *m.node_tables[node];
        if (t.n_accepted > 0 && t.accepted_ids.empty()) {
          const uint32_t* src = t.accepted.data();
          for (size_t w = 0; w < nw; ++w) words[w] |= src[w];
        }
        for (const int32_t id : t.accepted_ids) Impl::set_bit(words, id);
        if (!ctx_src(t).ctx.empty() || !t.ctx_special.empty())
          m.walk_context(node, m.node_frames[node], t, words);
      }
      if (expensive) cg.masks.put(m.state_key, words.first(nw));
    }
  }
  if (m.cur.can_end)
    for (const int32_t id : m.v->eos_ids) Impl::set_bit(words, id);
}

bool GrammarMatcher::accept_token(int32_t id) {
  Impl& m = *impl_;
  if (m.ended || id < 0 || id >= static_cast<int32_t>(m.v->bytes.size())) return false;
  if (m.v->eos[id]) {
    if (!m.cur.can_end) return false;
    m.history.push_back(m.cur);
    m.ended = true;
    return true;
  }
  const std::string& bytes = m.v->bytes[id];
  if (bytes.empty()) return false;
  Frontier next;
  if (!m.walk(bytes, m.v->special[id] != 0, next)) return false;
  m.history.push_back(std::move(m.cur));
  m.cur = std::move(next);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  Impl& m = *impl_;
  if (m.ended) return false;
  if (bytes.empty()) return true;
  Frontier next;
  if (!m.walk(bytes, false, next)) return false;
  m.cur = std::move(next);
  return true;
}

bool GrammarMatcher::can_end() const {
  return impl_->cur.can_end;
}
bool GrammarMatcher::is_terminated() const {
  return impl_->terminated();
}

void GrammarMatcher::rollback(int32_t n_tokens) {
  Impl& m = *impl_;
  LOOM_CHECK(n_tokens >= 0 && static_cast<size_t>(n_tokens) <= m.history.size());
  if (n_tokens == 0) return;
  const size_t keep = m.history.size() - static_cast<size_t>(n_tokens);
  m.cur = std::move(m.history[keep]);
  m.history.resize(keep);
  m.ended = false;
}

int32_t GrammarMatcher::num_accepted_tokens() const {
  return static_cast<int32_t>(impl_->history.size());
}

}  // namespace loom::structured
