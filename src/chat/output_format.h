// How a model family writes tool calls and reasoning, and the streaming parser that turns its
// raw output text into API output: reasoning text, answer text, and tool calls. One parser per
// generated sequence (DESIGN.md: "one streaming state machine per request").
//
// Formats are detected from the chat template (as llama.cpp does) and can be forced by name
// with --tool-call-parser / --reasoning-parser (vLLM's names).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom::chat {

enum class ToolCallFormat {
  kNone,        // the template has no tool-call convention: tools cannot be used
  kHermes,      // Qwen 2.5/3, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  kLlama3Json,  // Llama 3.1-3.3: {"name": ..., "parameters": {...}} (optionally after
                // <|python_tag|>)
  kMistral,     // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
  kDeepSeekV3,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
  kQwen3Coder,  // <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
  kHarmony,  // gpt-oss: <|channel|>commentary to=functions.NAME ...<|message|>{...}<|call|>
};
enum class ReasoningFormat {
  kNone,
  kDeepSeekR1,  // <think> ... </think>; the prompt may already open <think>
  kQwen3,       // <think> ... </think> written by the model; absent when thinking is off
  kHarmony,     // gpt-oss: the analysis channel's messages are reasoning, final's the answer
};

// vLLM's names: "hermes", "llama3_json", "mistral", "deepseek_v3", "qwen3_coder", "openai"
// (harmony); "deepseek_r1", "qwen3", "openai_gptoss" (harmony). Unknown names: an error
// listing the known ones.
Result<ToolCallFormat> tool_call_format_from_name(std::string_view name);
Result<ReasoningFormat> reasoning_format_from_name(std::string_view name);
// Every name the two accept, comma-separated (for help texts and those errors).
std::string tool_call_format_names();
std::string reasoning_format_names();
const char* tool_call_format_name(ToolCallFormat f);
const char* reasoning_format_name(ReasoningFormat f);
// From a chat template's source text.
ToolCallFormat detect_tool_call_format(std::string_view chat_template);
ReasoningFormat detect_reasoning_format(std::string_view chat_template);

struct OutputFormat {
  ToolCallFormat tools = ToolCallFormat::kNone;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
};

// The markers a ChatOutputParser(format, tools_enabled, ...) reads (<think>, <tool_call>,
// [TOOL_CALLS], harmony's <|channel|> ...). Some vocabularies make them control tokens: those
// must still reach the parser's text when skip_special_tokens drops the other control tokens.
std::vector<std::string> parser_markers(OutputFormat format, bool tools_enabled);

// Whether the rendered prompt leaves the model inside a reasoning block (e.g. DeepSeek-R1's
// template ends the generation prompt with "<think>\n"; Qwen3's with enable_thinking=false
// closes an empty one, so the model starts in the answer).
bool prompt_opens_reasoning(ReasoningFormat f, std::string_view rendered_prompt);

struct ToolCall {
  std::string id;  // "call_" + 24 random alphanumerics (or the model's own id)
  std::string name;
  std::string arguments;  // JSON object text (complete calls); as written so far (cut ones)
  // false: the call's markup ended after its name was read (so streams had announced it) but
  // before the call did: the output was cut off (max_tokens, a stop string), or the markup
  // broke off. Its arguments are the text written so far, usually not valid JSON.
  bool complete = true;
};

// What a chunk of model text added, in API terms.
struct ChatDelta {
  std::string reasoning;
  std::string content;
  struct ToolCallDelta {
    int32_t index = 0;      // which call (0, 1, ...)
    std::string id;         // set on a call's first delta only
    std::string name;       // set on a call's first delta only
    std::string arguments;  // a fragment of the arguments' JSON text
  };
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// Streaming: push() the text as it is generated (any split, one byte at a time included) and
// concatenating what it returns gives exactly what finish() would return for the whole text at
// once. Markup is never leaked as content: text that might be the start of a marker is held
// back until it is known. Calls' arguments are streamed as they arrive, compact (whitespace
// outside JSON strings dropped), so that they add up to the finished call's arguments; a
// call's id and name come first.
class ChatOutputParser {
 public:
  // tools_enabled: the request declared tools (and tool_choice is not "none"); otherwise tool
  // markup is plain content. starts_in_reasoning: see prompt_opens_reasoning().
  ChatOutputParser(OutputFormat format, bool tools_enabled, bool starts_in_reasoning);
  ~ChatOutputParser();
  ChatOutputParser(ChatOutputParser&&) noexcept;
  // The request's tools (OpenAI shape). Formats whose markup does not carry value types
  // (qwen3_coder) type each argument by its parameter's schema; call before the first push().
  void set_tools(const nlohmann::ordered_json& tools);
  ChatDelta push(std::string_view text);
  // End of output: releases held-back text. Call markup never comes back as content. A call
  // cut short (finish_reason "length", a stop string) is reported once, as tool_calls()'s
  // last entry with complete = false and the arguments written so far, exactly what its
  // deltas streamed; one cut before its name was read was never announced and is dropped
  // with its markup, as is a trailing partial opener ("<tool_ca") of a cut output.
  // Whitespace between reasoning, text and calls is markup spacing and is not content.
  // closed_by_token: the model ended the output, at an end-of-generation token (whose text is
  // not in it) or at its grammar's end, not max_tokens or a stop string; in harmony (gpt-oss)
  // that closes the last message, so a call open there (ended by <|call|>) is complete.
  ChatDelta finish(bool closed_by_token = false);
  // The calls parsed so far, in order (complete ones' arguments as compact JSON text); after
  // finish() also a call cut short (complete = false). Every call whose id a delta announced
  // is here after finish(), so a stream's deltas add up to the non-streamed answer.
  const std::vector<ToolCall>& tool_calls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The grammar for a constrained chat output, as GBNF (see src/structured): optional free
// reasoning first (the model thinks freely, then the answer is constrained), then either
//   - answer_rule_gbnf: the answer's own grammar (response_format / structured outputs), or
//   - tool calls in the family's markup whose arguments follow each tool's `parameters`
//     schema: mode kRequired (one call, or several with parallel_tool_calls), kNamed (one call
//     to `function_name`), kAuto (free text; a call's markup, once it starts, is constrained).
struct ChatGrammarRequest {
  enum class ToolMode { kNone, kAuto, kRequired, kNamed };
  OutputFormat format;
  bool starts_in_reasoning = false;
  bool allow_reasoning = true;  // the model may open a reasoning block itself (Qwen3)
  // An answer grammar in GBNF with root rule "root", or empty (free text).
  std::string answer_gbnf;
  ToolMode tool_mode = ToolMode::kNone;
  nlohmann::ordered_json tools;  // the request's OpenAI-shape tools list
  std::string function_name;     // kNamed
  bool parallel_tool_calls = true;
};
// Returns "" when nothing needs constraining (free text, no required calls). Errors: a tool
// whose parameters schema cannot be compiled (names the tool and keyword), kNamed naming an
// undeclared function, tools with ToolCallFormat::kNone.
Result<std::string> build_chat_grammar(const ChatGrammarRequest& request);

}  // namespace loom::chat
