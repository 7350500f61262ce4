// Free text that never contains a trigger string: an Aho-Corasick automaton over the
// triggers' code points, printed as one GBNF rule per automaton state. Every state may end
// (text may stop partway into a trigger), and a character that would complete a trigger has
// no transition at all. Characters that occur in no trigger lead back to the start state, so
// each state's rule is a handful of classes.
#include <map>
#include <queue>

#include "structured/charset.h"
#include "structured/frontends.h"

namespace loom::structured {

using detail::CharSet;

Result<std::string> add_text_without(GbnfBuilder& b, const std::vector<std::string>& triggers,
                                     std::string_view name) {
  struct State {
    std::map<uint32_t, int> next;  // trie edges
    int fail = 0;
    bool match = false;  // a trigger ends here (directly or via a suffix)
  };
  std::vector<State> st(1);
  CharSet alphabet;
  for (const std::string& t : triggers) {
    if (t.empty()) return invalid_argument("text_without: empty trigger string");
    std::vector<uint32_t> cps;
    if (!detail::decode_utf8(t, &cps))
      return invalid_argument("text_without: trigger is not valid UTF-8");
    int s = 0;
    for (uint32_t c : cps) {
      alphabet.add(c, c);
      auto it = st[s].next.find(c);
      if (it == st[s].next.end()) {
        st.push_back({});
        it = st[s].next.emplace(c, static_cast<int>(st.size()) - 1).first;
      }
      s = it->second;
    }
    st[s].match = true;
  }
  if (triggers.empty()) return b.add_rule(name, "( . )*");

  // Breadth-first failure links; `match` inherited along them.
  std::queue<int> q;
  for (auto& [c, s] : st[0].next) q.push(s);
  while (!q.empty()) {
    const int u = q.front();
    q.pop();
    for (auto& [c, v] : st[u].next) {
      int f = st[u].fail;
      while (f && !st[f].next.count(c)) f = st[f].fail;
      auto it = st[f].next.find(c);
      st[v].fail = (it != st[f].next.end() && it->second != v) ? it->second : 0;
      st[v].match = st[v].match || st[st[v].fail].match;
      q.push(v);
    }
  }
  auto delta = [&](int s, uint32_t c) {
    while (s && !st[s].next.count(c)) s = st[s].fail;
    auto it = st[s].next.find(c);
    return it == st[s].next.end() ? 0 : it->second;
  };

  // Live states: those not completing a trigger. Rule names first (rules refer forward).
  std::vector<std::string> rule(st.size());
  for (size_t i = 0; i < st.size(); ++i)
    if (!st[i].match) rule[i] = b.reserve(i == 0 ? std::string(name) : std::string(name) + "-s");
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i].match) continue;
    std::map<int, CharSet> by_target;  // target state -> characters leading there
    CharSet to_start = alphabet.complement();
    for (const detail::CodeRange& r : alphabet.ranges()) {
      for (uint32_t c = r.lo; c <= r.hi; ++c) {
        const int t = delta(static_cast<int>(i), c);
        if (st[t].match) continue;  // would complete a trigger
        if (t == 0)
          to_start.add(c, c);
        else
          by_target[t].add(c, c);
      }
    }
    std::string alts;
    if (!to_start.empty()) alts = detail::gbnf_class(to_start) + " " + rule[0];
    for (const auto& [t, cs] : by_target) {
      const std::string x =
          cs.size() == 1 ? detail::gbnf_char_literal(cs.ranges()[0].lo) : detail::gbnf_class(cs);
      alts += (alts.empty() ? "" : " | ") + x + " " + rule[t];
    }
    b.define(rule[i], alts.empty() ? "\"\"" : "( " + alts + " )?");
  }
  return rule[0];
}

}  // namespace loom::structured
