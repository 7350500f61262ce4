// Graph-structured stacks and the byte step of the pushdown automaton (stack_walker.h).
#include "structured/stack_walker.h"

#include <algorithm>

namespace loom::structured {
namespace {

inline uint64_t node_hash(int32_t s, int32_t c, int32_t p) {
  uint64_t h = static_cast<uint32_t>(s) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(static_cast<uint32_t>(c)) << 32 | static_cast<uint32_t>(p)) *
       0xC2B2AE3D27D4EB4Full;
  return h ^ (h >> 29);
}

}  // namespace

StackArena::StackArena() : slots_(64, -1) {}

void StackArena::clear() {
  nodes_.clear();
  std::fill(slots_.begin(), slots_.end(), -1);
}

void StackArena::grow() {
  slots_.assign(slots_.size() * 2, -1);
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const StackNode& n = nodes_[i];
    size_t h = node_hash(n.state, n.count, n.parent) & mask;
    while (slots_[h] >= 0) h = (h + 1) & mask;
    slots_[h] = static_cast<int32_t>(i);
  }
}

int32_t StackArena::intern(int32_t state, int32_t count, int32_t parent) {
  const size_t mask = slots_.size() - 1;
  size_t h = node_hash(state, count, parent) & mask;
  for (;;) {
    const int32_t id = slots_[h];
    if (id < 0) break;
    const StackNode& n = nodes_[id];
    if (n.state == state && n.count == count && n.parent == parent) return id;
    h = (h + 1) & mask;
  }
  const int32_t id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({state, count, parent});
  slots_[h] = id;
  if (nodes_.size() * 2 > slots_.size()) grow();
  return id;
}

void StackWalker::begin(Frontier& out) {
  out.clear();
  if (++epoch_ == 0) {  // wrapped: forget every old mark
    std::fill(seen_.begin(), seen_.end(), 0);
    epoch_ = 1;
  }
}

void StackWalker::close(int32_t node, Frontier& out) {
  const Grammar& g = *g_;
  work_.clear();
  work_.push_back(node);
  while (!work_.empty()) {
    const int32_t id = work_.back();
    work_.pop_back();
    if (static_cast<size_t>(id) >= seen_.size())
      seen_.resize(std::max<size_t>(arena_->size() * 2, 1024), 0);
    if (seen_[id] == epoch_) continue;
    seen_[id] = epoch_;
    const StackNode n = (*arena_)[id];
    const GrammarState& st = g.states[n.state];
    if (st.byte_begin != st.byte_end) out.nodes.push_back(id);
    if (st.final) {
      if (n.parent == kBottom)
        out.can_end = true;
      else if (n.parent == kOutside)
        out.popped = true;
      else
        work_.push_back(n.parent);
    }
    for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
      const CallEdge& c = g.call_edges[i];
      int32_t count = n.count;
      if (c.iter) {
        if (count >= g.rules[st.rule].max_iter) continue;
        ++count;
      }
      // A call whose return point can only end the rule is a tail call: no frame for it, so
      // right recursion (`list ::= item list | item`) runs in constant stack depth.
      const int32_t ret = g.is_pure_end(c.ret) ? n.parent : arena_->intern(c.ret, count, n.parent);
      work_.push_back(arena_->intern(g.rules[c.rule].start, 0, ret));
    }
  }
}

void StackWalker::finish(Frontier& out) {
  std::sort(out.nodes.begin(), out.nodes.end());
}

void StackWalker::advance(const Frontier& in, uint8_t b, bool literal_only, Frontier& out) {
  const Grammar& g = *g_;
  begin(out);
  for (const int32_t id : in.nodes) {
    const StackNode n = (*arena_)[id];
    const GrammarState& st = g.states[n.state];
    for (uint32_t i = st.byte_begin; i < st.byte_end; ++i) {
      const ByteEdge& e = g.byte_edges[i];
      if (b < e.lo || b > e.hi || (literal_only && !e.literal)) continue;
      int32_t count = n.count;
      if (e.iter) {
        if (count >= g.rules[st.rule].max_iter) continue;
        ++count;
      }
      close(arena_->intern(e.target, count, n.parent), out);
    }
  }
  finish(out);
}

bool StackWalker::any_byte(const Frontier& f) const {
  const Grammar& g = *g_;
  for (const int32_t id : f.nodes) {
    const StackNode& n = (*arena_)[id];
    const GrammarState& st = g.states[n.state];
    for (uint32_t i = st.byte_begin; i < st.byte_end; ++i)
      if (!g.byte_edges[i].iter || n.count < g.rules[st.rule].max_iter) return true;
  }
  return false;
}

void StackWalker::start(Frontier& out) {
  begin(out);
  close(arena_->intern(g_->rules[g_->root].start, 0, kBottom), out);
  finish(out);
}

}  // namespace loom::structured
