// next_chat_delta's end of a sample: how it ended decides whether a harmony (gpt-oss) message
// still open is closed. The model's own end (an end-of-generation token, whose text is not in
// the output, or its grammar's end: a forced call's arguments complete) closes it, so an open
// call is a call; max_tokens and a stop string cut it: an incomplete call, none of it content.
#include <gtest/gtest.h>

#include "server/jobs.h"

namespace loom::server {
namespace {

constexpr const char* kCall =
    "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>commentary "
    "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}";

struct Ended {
  chat::ChatDelta delta;
  size_t calls = 0;
  bool complete = false;  // the last call
};

Ended end_with(FinishReason reason, std::optional<int32_t> token, std::string stop_reason) {
  chat::ChatOutputParser p({chat::ToolCallFormat::kHarmony, chat::ReasoningFormat::kHarmony},
                           /*tools_enabled=*/true, /*starts_in_reasoning=*/false);
  CompletionOutput c;
  c.finish_reason = reason;
  c.stop_token = token;
  c.stop_reason = std::move(stop_reason);
  Ended e;
  e.delta = next_chat_delta(&p, kCall, c);
  e.calls = p.tool_calls().size();
  e.complete = e.calls > 0 && p.tool_calls().back().complete;
  return e;
}

TEST(ChatDelta, HarmonyCallClosedByTheModelIsACall) {
  const std::optional<int32_t> tokens[] = {200012, std::nullopt};
  for (const std::optional<int32_t>& token : tokens) {
    const Ended e = end_with(FinishReason::kStop, token, "");  // <|call|>, or the grammar's end
    EXPECT_EQ(e.calls, 1u);
    EXPECT_TRUE(e.complete);
    EXPECT_EQ(e.delta.reasoning, "Call it.");
    EXPECT_EQ(e.delta.content, "");
  }
  for (const Ended& e : {end_with(FinishReason::kLength, std::nullopt, ""),
                         end_with(FinishReason::kStop, std::nullopt, "Paris")}) {
    EXPECT_EQ(e.calls, 1u);
    EXPECT_FALSE(e.complete);
    EXPECT_EQ(e.delta.content, "");
  }
}

}  // namespace
}  // namespace loom::server
