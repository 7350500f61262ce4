// The pushdown automaton's runtime: graph-structured stacks and the byte step.
//
// A parser state is a set of stacks. Stacks are nodes {state, count, parent} in a StackArena,
// hash-consed so that equal stacks have equal ids: a set of stacks is then a sorted vector of
// top-node ids (a Frontier), deduplicated by id, and stacks share their common bottoms.
// Frontier nodes are always at states with byte edges: calls are pushed and finished rules
// popped eagerly (the epsilon closure), so advancing by a byte only looks at byte edges.
#pragma once

#include <cstdint>
#include <vector>

#include "structured/grammar.h"

namespace loom::structured {

// Parent ids below zero: the bottom of the real stack (the root rule may end: can_end), or
// the unknown rest of the stack below a grammar position (token tables: "popped").
constexpr int32_t kBottom = -1;
constexpr int32_t kOutside = -2;

struct StackNode {
  int32_t state;
  int32_t count;  // iterations started, for counted rules; 0 otherwise
  int32_t parent;
};

class StackArena {
 public:
  StackArena();
  int32_t intern(int32_t state, int32_t count, int32_t parent);
  const StackNode& operator[](int32_t id) const { return nodes_[id]; }
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  void clear();  // keeps capacity (scratch arenas are reused without allocating)

 private:
  void grow();
  std::vector<StackNode> nodes_;
  std::vector<int32_t> slots_;  // open addressing over nodes_, -1 empty
};

struct Frontier {
  std::vector<int32_t> nodes;  // sorted node ids at states with byte edges
  bool can_end = false;        // a path popped past kBottom
  bool popped = false;         // a path popped into kOutside
  void clear() {
    nodes.clear();
    can_end = popped = false;
  }
  bool dead() const { return nodes.empty(); }
};

class StackWalker {
 public:
  StackWalker(const Grammar& g, StackArena& arena) : g_(&g), arena_(&arena) {}

  // The closure of one node, added to `out` (caller sorts with finish()).
  void begin(Frontier& out);
  void close(int32_t node, Frontier& out);
  void finish(Frontier& out);
  // out = closure of every node reached from `in` by consuming byte b. literal_only: only
  // edges of grammar literals (special tokens).
  void advance(const Frontier& in, uint8_t b, bool literal_only, Frontier& out);
  // Whether any byte can follow (some frontier node has a usable byte edge).
  bool any_byte(const Frontier& f) const;
  // Closure of a fresh stack at the grammar's root rule.
  void start(Frontier& out);

  StackArena& arena() { return *arena_; }
  const Grammar& grammar() const { return *g_; }

 private:
  const Grammar* g_;
  StackArena* arena_;
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  std::vector<int32_t> work_;
};

}  // namespace loom::structured
