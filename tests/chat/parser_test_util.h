// Test helpers: run a ChatOutputParser over a text in a given split and collect what the
// deltas add up to, so that every split can be compared with one push of the whole text.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/output_format.h"

namespace loom::chat::testing {

struct Collected {
  std::string reasoning;
  std::string content;
  struct Call {
    std::string id, name, arguments;  // from the deltas
  };
  std::vector<Call> streamed;
  std::vector<ToolCall> calls;  // tool_calls() at the end
};

struct ParserSetup {
  OutputFormat format;
  bool tools_enabled = true;
  bool starts_in_reasoning = false;
  nlohmann::ordered_json tools;  // optional (set_tools)
  bool closed_by_token = false;  // finish(closed_by_token): an end-of-generation token ended it
};

inline void add_delta(Collected* c, const ChatDelta& d) {
  c->reasoning += d.reasoning;
  c->content += d.content;
  for (const auto& t : d.tool_calls) {
    ASSERT_GE(t.index, 0);
    ASSERT_LE(t.index, static_cast<int32_t>(c->streamed.size()));
    if (t.index == static_cast<int32_t>(c->streamed.size())) {
      // A call's first delta carries its id and name.
      ASSERT_FALSE(t.id.empty());
      ASSERT_FALSE(t.name.empty());
      c->streamed.push_back({t.id, t.name, ""});
    } else {
      EXPECT_TRUE(t.id.empty());
      EXPECT_TRUE(t.name.empty());
    }
    c->streamed[t.index].arguments += t.arguments;
  }
}

// Splits `text` at the given byte offsets (ascending).
inline Collected run_parser(const ParserSetup& s, const std::string& text,
                            const std::vector<size_t>& cuts) {
  ChatOutputParser p(s.format, s.tools_enabled, s.starts_in_reasoning);
  if (!s.tools.is_null()) p.set_tools(s.tools);
  Collected c;
  size_t prev = 0;
  for (size_t cut : cuts) {
    add_delta(&c, p.push(std::string_view(text).substr(prev, cut - prev)));
    prev = cut;
  }
  add_delta(&c, p.push(std::string_view(text).substr(prev)));
  add_delta(&c, p.finish(s.closed_by_token));
  c.calls = p.tool_calls();
  return c;
}

inline void expect_same(const Collected& a, const Collected& b, const std::string& what) {
  EXPECT_EQ(a.reasoning, b.reasoning) << what;
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.streamed.size(), b.streamed.size()) << what;
  for (size_t i = 0; i < a.streamed.size(); ++i) {
    EXPECT_EQ(a.streamed[i].name, b.streamed[i].name) << what;
    EXPECT_EQ(a.streamed[i].arguments, b.streamed[i].arguments) << what;
  }
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
    EXPECT_EQ(a.calls[i].complete, b.calls[i].complete) << what;
  }
}

// What the deltas announced is what tool_calls() reports: the same calls, ids, names and
// arguments (except arguments the model wrote as a JSON string, unwrapped once complete).
inline void expect_streamed_is_reported(const Collected& c) {
  ASSERT_EQ(c.streamed.size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(c.streamed[i].id, c.calls[i].id);
    EXPECT_EQ(c.streamed[i].name, c.calls[i].name);
    if (c.streamed[i].arguments.rfind('"', 0) != 0) {
      EXPECT_EQ(c.streamed[i].arguments, c.calls[i].arguments);
    }
  }
}

// One push of the whole text, then every 2-way split and one byte at a time: all identical.
inline Collected parse_all_splits(const ParserSetup& s, const std::string& text) {
  Collected whole = run_parser(s, text, {});
  expect_streamed_is_reported(whole);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    expect_same(whole, run_parser(s, text, {cut}), "split at " + std::to_string(cut));
    if (::testing::Test::HasFailure()) return whole;
  }
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  expect_same(whole, run_parser(s, text, bytes), "one byte at a time");
  // Three-way splits around every position pair would be quadratic; a stride covers them.
  for (size_t a = 1; a < text.size(); a += 7) {
    for (size_t b = a + 1; b < text.size(); b += 5) {
      expect_same(whole, run_parser(s, text, {a, b}),
                  "split at " + std::to_string(a) + "," + std::to_string(b));
      if (::testing::Test::HasFailure()) return whole;
    }
  }
  return whole;
}

}  // namespace loom::chat::testing
