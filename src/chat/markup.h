// The literal markup each family's chat template renders and its models emit, shared by the
// output parser's syntaxes and the grammar builder so that the two can never disagree.
#pragma once

namespace loom::chat::markup {

inline constexpr const char* kThinkOpen = "<think>";
inline constexpr const char* kThinkClose = "</think>";

// hermes and qwen3_coder
inline constexpr const char* kToolCallOpen = "<tool_call>";
inline constexpr const char* kToolCallClose = "</tool_call>";
// qwen3_coder
inline constexpr const char* kFunctionOpen = "<function=";
inline constexpr const char* kFunctionClose = "</function>";
inline constexpr const char* kParameterOpen = "<parameter=";
inline constexpr const char* kParameterClose = "</parameter>";

// llama3_json
inline constexpr const char* kPythonTag = "<|python_tag|>";

// mistral
inline constexpr const char* kMistralToolCalls = "[TOOL_CALLS]";
inline constexpr const char* kMistralArgs = "[ARGS]";
inline constexpr const char* kMistralCallId = "[CALL_ID]";

// deepseek_v3 (the full-width bars and "▁" are part of the special tokens' text)
inline constexpr const char* kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr const char* kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr const char* kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr const char* kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr const char* kDeepSeekSep = "<｜tool▁sep｜>";

// harmony (gpt-oss): messages "<|start|>ROLE [to=RECIPIENT]<|channel|>CHANNEL [to=RECIPIENT]
// [<|constrain|>json]<|message|>BODY" ended by <|end|>, <|return|> (the final answer) or
// <|call|> (a tool call). Channels: analysis (reasoning), commentary (tool calls, preambles),
// final (the answer).
inline constexpr const char* kHarmonyStart = "<|start|>";
inline constexpr const char* kHarmonyChannel = "<|channel|>";
inline constexpr const char* kHarmonyMessage = "<|message|>";
inline constexpr const char* kHarmonyConstrain = "<|constrain|>";
inline constexpr const char* kHarmonyEnd = "<|end|>";
inline constexpr const char* kHarmonyReturn = "<|return|>";
inline constexpr const char* kHarmonyCall = "<|call|>";
inline constexpr const char* kHarmonyFunctions = "functions.";  // recipient prefix of a tool

}  // namespace loom::chat::markup
