// GbnfAst -> Grammar (grammar.h): one epsilon-free byte NFA per rule. Built Thompson-style with
// epsilon edges, then each state's epsilon closure is folded into its own edges. Decides which
// rule references are inlined (small, non-recursive) and which stay calls, and which
// repetitions become counted rules. Refuses undefined rules, left recursion, and a root that
// can never end.
//
// Termination (gbnf_termination.cpp): a grammar whose root rule cannot derive any finite
// string (`root ::= "a" root`) is refused with an error naming the rules that only recurse.
// A rule that cannot end but is used by only some alternatives does not make the grammar
// useless, so it is not refused: those alternatives are dead, and prune_dead_ends() removes
// every edge that leads into them, so that a matcher never enters a path it cannot finish
// ("length" stays the only way to end with an incomplete sentence).
#include <algorithm>
#include <cstdio>
#include <functional>

#include "structured/gbnf_ast.h"
#include "structured/grammar.h"

namespace loom::structured {
namespace {

// Rules up to this size (parse-tree nodes, inlined parts included) are copied into each use:
// the innermost frame then belongs to a bigger rule, so fewer tokens depend on the stack.
constexpr int64_t kInlineMax = 96;
// `x{m,n}` unrolls up to this many optional copies; beyond, a counted rule.
constexpr int32_t kUnrollMax = 8;
constexpr size_t kMaxStates = 4'000'000;

using Ranges = std::vector<std::pair<uint8_t, uint8_t>>;

int utf8_len(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

void utf8_encode(uint32_t cp, uint8_t* b) {
  switch (utf8_len(cp)) {
    case 1:
      b[0] = static_cast<uint8_t>(cp);
      break;
    case 2:
      b[0] = 0xC0 | (cp >> 6);
      b[1] = 0x80 | (cp & 0x3F);
      break;
    case 3:
      b[0] = 0xE0 | (cp >> 12);
      b[1] = 0x80 | ((cp >> 6) & 0x3F);
      b[2] = 0x80 | (cp & 0x3F);
      break;
    default:
      b[0] = 0xF0 | (cp >> 18);
      b[1] = 0x80 | ((cp >> 12) & 0x3F);
      b[2] = 0x80 | ((cp >> 6) & 0x3F);
      b[3] = 0x80 | (cp & 0x3F);
  }
}

// Splits code points [lo, hi] into UTF-8 byte-range sequences whose cross products are exact:
// split until, for every trailing length, either the leading parts agree or the trailing
// bytes span their full 80..BF range. Surrogates are not characters and are left out.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Ranges>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  for (uint32_t b : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= b && hi > b) {
      utf8_sequences(lo, b, out);
      utf8_sequences(b + 1, hi, out);
      return;
    }
  }
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  utf8_encode(lo, a);
  utf8_encode(hi, b);
  Ranges seq;
  for (int k = 0; k < n; ++k) seq.emplace_back(a[k], b[k]);
  out.push_back(std::move(seq));
}

struct RawEdge {
  enum class Kind : uint8_t { kEps, kIterEps, kByte, kCall } kind;
  uint8_t lo = 0, hi = 0;
  bool literal = false;
  int32_t callee = -1;
  int32_t to = 0;
};

class Compiler {
 public:
  explicit Compiler(const GbnfAst& ast) : ast_(ast) {}

  Result<std::shared_ptr<const Grammar>> run(std::string_view root_name) {
    int32_t root = -1;
    for (size_t i = 0; i < ast_.rules.size(); ++i)
      if (ast_.rules[i].name == root_name) root = static_cast<int32_t>(i);
    if (root < 0 || !ast_.rules[root].defined)
      return invalid_argument("GBNF: the grammar has no rule '" + std::string(root_name) + "'");
    for (const GbnfRuleAst& r : ast_.rules)
      if (!r.defined)
        return invalid_argument("GBNF line " + std::to_string(r.line) + ": undefined rule '" +
                                r.name + "'");
    LOOM_RETURN_IF_ERROR(check_root_terminates(root));
    find_recursive_rules();
    ast_to_rule_.assign(ast_.rules.size(), -1);
    g_ = std::make_shared<Grammar>();
    g_->root = rule_for(root);
    while (!pending_.empty()) {
      auto [ast_idx, rule] = pending_.back();
      pending_.pop_back();
      build(ast_.rules[ast_idx].body, g_->rules[rule].start, accept_[rule], rule, 0);
      if (raw_.size() > kMaxStates) return invalid_argument("GBNF: grammar too large");
    }
    if (raw_.size() > kMaxStates) return invalid_argument("GBNF: grammar too large");
    eliminate_epsilons();
    if (!prune_dead_ends())
      return invalid_argument("GBNF: the grammar can never end: rule '" + std::string(root_name) +
                              "' matches no finite text");
    compute_nullable();
    LOOM_RETURN_IF_ERROR(check_left_recursion());
    return std::shared_ptr<const Grammar>(std::move(g_));
  }

 private:
  int32_t new_state(int32_t rule) {
    raw_.emplace_back();
    state_rule_.push_back(rule);
    return static_cast<int32_t>(raw_.size() - 1);
  }
  void eps(int32_t from, int32_t to) {
    raw_[from].push_back({RawEdge::Kind::kEps, 0, 0, false, -1, to});
  }

  int32_t new_rule(std::string name) {
    const int32_t id = static_cast<int32_t>(g_->rules.size());
    GrammarRule r;
    r.name = std::move(name);
    g_->rules.push_back(r);
    g_->rules[id].start = new_state(id);
    accept_.push_back(new_state(id));
    return id;
  }
  int32_t rule_for(int32_t ast_idx) {
    if (ast_to_rule_[ast_idx] < 0) {
      ast_to_rule_[ast_idx] = new_rule(ast_.rules[ast_idx].name);
      pending_.emplace_back(ast_idx, ast_to_rule_[ast_idx]);
    }
    return ast_to_rule_[ast_idx];
  }

  void find_recursive_rules() {
    const size_t n = ast_.rules.size();
    std::vector<std::vector<int32_t>> refs(n);
    std::function<void(const GbnfExpr&, std::vector<int32_t>&)> collect =
        [&](const GbnfExpr& e, std::vector<int32_t>& out) {
          if (e.kind == GbnfExpr::Kind::kRef) out.push_back(e.ref);
          for (const GbnfExpr& k : e.kids) collect(k, out);
        };
    for (size_t i = 0; i < n; ++i) collect(ast_.rules[i].body, refs[i]);
    recursive_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {  // does i reach itself? (grammars are small)
      std::vector<char> seen(n, 0);
      std::vector<int32_t> work(refs[i].begin(), refs[i].end());
      while (!work.empty() && !recursive_[i]) {
        int32_t r = work.back();
        work.pop_back();
        if (r == static_cast<int32_t>(i)) recursive_[i] = 1;
        if (seen[r]) continue;
        seen[r] = 1;
        for (int32_t k : refs[r]) work.push_back(k);
      }
    }
    size_memo_.assign(n, -1);
  }

  // Parse-tree nodes this expression expands to when inlinable references are copied in.
  int64_t size_of(const GbnfExpr& e, int depth) {
    if (depth > 32) return kInlineMax + 1;
    switch (e.kind) {
      case GbnfExpr::Kind::kLiteral:
        return 1 + static_cast<int64_t>(e.bytes.size()) / 4;
      case GbnfExpr::Kind::kClass:
        return 1 + static_cast<int64_t>(e.ranges.size()) / 2;
      case GbnfExpr::Kind::kRef: {
        if (recursive_[e.ref]) return 1;
        const int64_t m = rule_size(e.ref);
        return m <= kInlineMax ? m : 1;
      }
      case GbnfExpr::Kind::kRepeat: {
        const int64_t k = size_of(e.kids[0], depth);
        const int64_t copies =
            e.max < 0 ? e.min + 1 : e.min + std::min<int64_t>(e.max - e.min, kUnrollMax + 1);
        return 1 + k * std::max<int64_t>(copies, 1);
      }
      default: {
        int64_t s = 1;
        for (const GbnfExpr& k : e.kids) s += size_of(k, depth);
        return s;
      }
    }
  }

  int64_t rule_size(int32_t r) {
    int64_t& m = size_memo_[r];
    if (m < 0) m = size_of(ast_.rules[r].body, 0);
    return m;
  }

  void build(const GbnfExpr& e, int32_t from, int32_t to, int32_t rule, int depth) {
    switch (e.kind) {
      case GbnfExpr::Kind::kAlt:
        for (const GbnfExpr& k : e.kids) build(k, from, to, rule, depth);
        if (e.kids.empty()) eps(from, to);
        return;
      case GbnfExpr::Kind::kSeq: {
        if (e.kids.empty()) {
          eps(from, to);
          return;
        }
        int32_t cur = from;
        for (size_t i = 0; i < e.kids.size(); ++i) {
          const int32_t next = i + 1 == e.kids.size() ? to : new_state(rule);
          build(e.kids[i], cur, next, rule, depth);
          cur = next;
        }
        return;
      }
      case GbnfExpr::Kind::kLiteral: {
        if (e.bytes.empty()) {
          eps(from, to);
          return;
        }
        int32_t cur = from;
        for (size_t i = 0; i < e.bytes.size(); ++i) {
          const int32_t next = i + 1 == e.bytes.size() ? to : new_state(rule);
          const uint8_t b = static_cast<uint8_t>(e.bytes[i]);
          raw_[cur].push_back({RawEdge::Kind::kByte, b, b, true, -1, next});
          cur = next;
        }
        return;
      }
      case GbnfExpr::Kind::kClass: {
        std::vector<Ranges> seqs;
        for (auto [lo, hi] : e.ranges) utf8_sequences(lo, hi, seqs);
        // Sequences that differ only in their last byte range share the path before it.
        for (const Ranges& seq : seqs) {
          int32_t cur = from;
          for (size_t i = 0; i < seq.size(); ++i) {
            const int32_t next = i + 1 == seq.size() ? to : new_state(rule);
            raw_[cur].push_back(
                {RawEdge::Kind::kByte, seq[i].first, seq[i].second, false, -1, next});
            cur = next;
          }
        }
        return;
      }
      case GbnfExpr::Kind::kRef: {
        if (!recursive_[e.ref] && depth < 32 && rule_size(e.ref) <= kInlineMax) {
          build(ast_.rules[e.ref].body, from, to, rule, depth + 1);
        } else {
          const int32_t callee = rule_for(e.ref);  // may grow raw_: before indexing it
          raw_[from].push_back({RawEdge::Kind::kCall, 0, 0, false, callee, to});
        }
        return;
      }
      case GbnfExpr::Kind::kRepeat: {
        const GbnfExpr& x = e.kids[0];
        int32_t cur = from;
        for (int32_t i = 0; i < e.min; ++i) {
          const int32_t next = (i + 1 == e.min && e.max == e.min) ? to : new_state(rule);
          build(x, cur, next, rule, depth);
          cur = next;
        }
        if (e.max == e.min) {
          if (e.min == 0) eps(from, to);
          return;
        }
        if (e.max < 0) {  // a loop inside this rule
          const int32_t loop = new_state(rule);
          eps(cur, loop);
          build(x, loop, loop, rule, depth);
          eps(loop, to);
          return;
        }
        const int32_t extra = e.max - e.min;
        if (extra <= kUnrollMax) {  // x (x (x)?)? ...: every copy may exit
          eps(cur, to);
          for (int32_t i = 0; i < extra; ++i) {
            const int32_t next = i + 1 == extra ? to : new_state(rule);
            build(x, cur, next, rule, depth);
            if (next != to) eps(next, to);
            cur = next;
          }
          return;
        }
        // Counted rule: start S is also where it may end; S -iter-> body -> S.
        const int32_t t = new_rule(g_->rules[rule].name + "-rep" + std::to_string(extra));
        g_->rules[t].max_iter = extra;
        const int32_t s = g_->rules[t].start;
        eps(s, accept_[t]);
        const int32_t b0 = new_state(t), b1 = new_state(t);
        raw_[s].push_back({RawEdge::Kind::kIterEps, 0, 0, false, -1, b0});
        build(x, b0, b1, t, depth);
        eps(b1, s);
        raw_[cur].push_back({RawEdge::Kind::kCall, 0, 0, false, t, to});
        return;
      }
    }
  }

  void eliminate_epsilons() {
    const int32_t n = static_cast<int32_t>(raw_.size());
    g_->states.resize(n);
    std::vector<uint32_t> seen(2 * static_cast<size_t>(n), 0);
    uint32_t epoch = 0;
    std::vector<std::pair<int32_t, bool>> work;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
    for (int32_t q = 0; q < n; ++q) {
      ++epoch;
      bytes.clear();
      calls.clear();
      bool final = false;
      const int32_t rule = state_rule_[q];
      work.assign(1, {q, false});
      while (!work.empty()) {
        auto [s, iter] = work.back();
        work.pop_back();
        uint32_t& mark = seen[2 * static_cast<size_t>(s) + iter];
        if (mark == epoch) continue;
        mark = epoch;
        if (s == accept_[rule]) final = true;
        for (const RawEdge& e : raw_[s]) {
          switch (e.kind) {
            case RawEdge::Kind::kEps:
              work.emplace_back(e.to, iter);
              break;
            case RawEdge::Kind::kIterEps:
              work.emplace_back(e.to, true);
              break;
            case RawEdge::Kind::kByte:
              bytes.push_back({e.lo, e.hi, e.literal, iter, e.to});
              break;
            case RawEdge::Kind::kCall:
              calls.push_back({e.callee, e.to, iter});
              break;
          }
        }
      }
      auto byte_key = [](const ByteEdge& a) {
        return std::make_tuple(a.lo, a.hi, a.literal, a.iter, a.target);
      };
      std::sort(bytes.begin(), bytes.end(),
                [&](auto& a, auto& b) { return byte_key(a) < byte_key(b); });
      bytes.erase(std::unique(bytes.begin(), bytes.end(),
                              [&](auto& a, auto& b) { return byte_key(a) == byte_key(b); }),
                  bytes.end());
      auto call_key = [](const CallEdge& a) { return std::make_tuple(a.rule, a.ret, a.iter); };
      std::sort(calls.begin(), calls.end(),
                [&](auto& a, auto& b) { return call_key(a) < call_key(b); });
      calls.erase(std::unique(calls.begin(), calls.end(),
                              [&](auto& a, auto& b) { return call_key(a) == call_key(b); }),
                  calls.end());
      GrammarState& st = g_->states[q];
      st.rule = rule;
      st.final = final;
      st.byte_begin = static_cast<uint32_t>(g_->byte_edges.size());
      g_->byte_edges.insert(g_->byte_edges.end(), bytes.begin(), bytes.end());
      st.byte_end = static_cast<uint32_t>(g_->byte_edges.size());
      st.call_begin = static_cast<uint32_t>(g_->call_edges.size());
      g_->call_edges.insert(g_->call_edges.end(), calls.begin(), calls.end());
      st.call_end = static_cast<uint32_t>(g_->call_edges.size());
    }
    for (GrammarRule& r : g_->rules) r.clamp_ok = r.max_iter > 0;
    for (int32_t q = 0; q < n; ++q) ++g_->rules[state_rule_[q]].n_states;
    for (int32_t q = 0; q < n; ++q) {
      const GrammarState& st = g_->states[q];
      for (uint32_t i = st.call_begin; i < st.call_end; ++i)
        if (g_->call_edges[i].iter) g_->rules[st.rule].clamp_ok = false;
    }
  }

  Status check_root_terminates(int32_t root) const {
    const std::vector<bool> ok = terminating_rules(ast_);
    if (ok[root]) return Status::ok();
    std::string culprits;
    int listed = 0;
    for (int32_t r : rules_reachable_from(ast_, root)) {
      if (ok[r]) continue;
      if (listed++ == 4) {
        culprits += ", ...";
        break;
      }
      culprits += (culprits.empty() ? "'" : ", '") + ast_.rules[r].name + "'";
    }
    return invalid_argument(
        "GBNF line " + std::to_string(ast_.rules[root].line) +
        ": the grammar can never end: every alternative of rule '" + ast_.rules[root].name +
        "' recurses forever (rules with no finite derivation: " + culprits + ")");
  }

  // Keeps only the edges after which the rule can still end (a byte into a state that can
  // finish, a call to a rule that can end returning to such a state): a dead alternative is
  // never offered. Returns false when the root rule itself cannot end.
  bool prune_dead_ends() {
    const int32_t n = g_->num_states();
    std::vector<char> live(n, 0);
    auto can_finish = [&](int32_t q) {
      const GrammarState& st = g_->states[q];
      if (st.final) return true;
      for (uint32_t i = st.byte_begin; i < st.byte_end; ++i)
        if (live[g_->byte_edges[i].target]) return true;
      for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
        const CallEdge& c = g_->call_edges[i];
        if (live[c.ret] && live[g_->rules[c.rule].start]) return true;
      }
      return false;
    };
    // States are mostly created before their successors: sweeping backwards converges in a
    // few passes.
    for (bool changed = true; changed;) {
      changed = false;
      for (int32_t q = n - 1; q >= 0; --q)
        if (!live[q] && can_finish(q)) live[q] = 1, changed = true;
    }
    if (!live[g_->rules[g_->root].start]) return false;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
    bytes.reserve(g_->byte_edges.size());
    calls.reserve(g_->call_edges.size());
    for (GrammarState& st : g_->states) {
      const uint32_t b0 = static_cast<uint32_t>(bytes.size());
      const uint32_t c0 = static_cast<uint32_t>(calls.size());
      for (uint32_t i = st.byte_begin; i < st.byte_end; ++i)
        if (live[g_->byte_edges[i].target]) bytes.push_back(g_->byte_edges[i]);
      for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
        const CallEdge& c = g_->call_edges[i];
        if (live[c.ret] && live[g_->rules[c.rule].start]) calls.push_back(c);
      }
      st.byte_begin = b0;
      st.byte_end = static_cast<uint32_t>(bytes.size());
      st.call_begin = c0;
      st.call_end = static_cast<uint32_t>(calls.size());
    }
    g_->byte_edges = std::move(bytes);
    g_->call_edges = std::move(calls);
    return true;
  }

  void compute_nullable() {
    const int32_t n = g_->num_states();
    std::vector<char> ns(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (int32_t q = 0; q < n; ++q) {
        if (ns[q]) continue;
        const GrammarState& st = g_->states[q];
        bool v = st.final;
        for (uint32_t i = st.call_begin; i < st.call_end && !v; ++i) {
          const CallEdge& c = g_->call_edges[i];
          v = g_->rules[c.rule].nullable && ns[c.ret];
        }
        if (v) {
          ns[q] = 1;
          changed = true;
          if (q == g_->rules[st.rule].start) g_->rules[st.rule].nullable = true;
        }
      }
    }
  }

  // Rule a -> rule b when a can call b before consuming a byte; a cycle is left recursion,
  // which would push frames forever.
  Status check_left_recursion() {
    const size_t nr = g_->rules.size();
    std::vector<std::vector<int32_t>> left(nr);
    std::vector<char> seen(g_->states.size(), 0);
    for (size_t r = 0; r < nr; ++r) {
      std::vector<int32_t> work{g_->rules[r].start}, visited;
      while (!work.empty()) {
        int32_t q = work.back();
        work.pop_back();
        if (seen[q]) continue;
        seen[q] = 1;
        visited.push_back(q);
        const GrammarState& st = g_->states[q];
        for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
          const CallEdge& c = g_->call_edges[i];
          left[r].push_back(c.rule);
          if (g_->rules[c.rule].nullable) work.push_back(c.ret);
        }
      }
      for (int32_t q : visited) seen[q] = 0;
    }
    std::vector<int8_t> color(nr, 0);  // 0 new, 1 on the DFS path, 2 done
    std::function<int32_t(int32_t)> dfs = [&](int32_t r) -> int32_t {
      color[r] = 1;
      for (int32_t k : left[r]) {
        if (color[k] == 1) return k;
        if (color[k] == 0) {
          int32_t bad = dfs(k);
          if (bad >= 0) return bad;
        }
      }
      color[r] = 2;
      return -1;
    };
    for (size_t r = 0; r < nr; ++r) {
      if (color[r] != 0) continue;
      int32_t bad = dfs(static_cast<int32_t>(r));
      if (bad >= 0) {
        std::string name = g_->rules[bad].name;
        for (const GbnfRuleAst& a : ast_.rules)
          if (a.name == name)
            return invalid_argument("GBNF line " + std::to_string(a.line) +
                                    ": left recursion: rule '" + name +
                                    "' can reach itself without consuming input");
        return invalid_argument("GBNF: left recursion through rule '" + name + "'");
      }
    }
    return Status::ok();
  }

  const GbnfAst& ast_;
  std::shared_ptr<Grammar> g_;
  std::vector<std::vector<RawEdge>> raw_;
  std::vector<int32_t> state_rule_;
  std::vector<int32_t> accept_;  // per grammar rule
  std::vector<int32_t> ast_to_rule_;
  std::vector<std::pair<int32_t, int32_t>> pending_;  // (ast rule, grammar rule) to build
  std::vector<char> recursive_;
  std::vector<int64_t> size_memo_;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root) {
  LOOM_ASSIGN_OR_RETURN(GbnfAst ast, parse_gbnf_ast(text));
  return Compiler(ast).run(root);
}

std::string Grammar::debug_string() const {
  std::string out;
  char buf[128];
  for (size_t r = 0; r < rules.size(); ++r) {
    std::snprintf(buf, sizeof buf, "rule %zu %s start=%d max_iter=%d%s\n", r, rules[r].name.c_str(),
                  rules[r].start, rules[r].max_iter, rules[r].nullable ? " nullable" : "");
    out += buf;
  }
  for (size_t q = 0; q < states.size(); ++q) {
    const GrammarState& st = states[q];
    if (st.byte_begin == st.byte_end && st.call_begin == st.call_end && !st.final) continue;
    std::snprintf(buf, sizeof buf, "  s%zu r%d%s:", q, st.rule, st.final ? " final" : "");
    out += buf;
    for (uint32_t i = st.byte_begin; i < st.byte_end; ++i) {
      const ByteEdge& e = byte_edges[i];
      std::snprintf(buf, sizeof buf, " [%02x-%02x%s%s]->%d", e.lo, e.hi, e.literal ? "L" : "",
                    e.iter ? "+" : "", e.target);
      out += buf;
    }
    for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
      const CallEdge& c = call_edges[i];
      std::snprintf(buf, sizeof buf, " call(%d%s)->%d", c.rule, c.iter ? "+" : "", c.ret);
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace loom::structured
