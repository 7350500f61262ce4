// Structured outputs and tools at the API edge: reads every request field that constrains the
// output (OpenAI response_format; vLLM structured_outputs and the older guided_*; llama-server
// grammar / json_schema; tools, tool_choice, parallel_tool_calls), validates them (a bad schema
// or an unsupported keyword is a 400 naming it, never an unconstrained answer), and turns them
// into the request's grammar (SamplingParams::grammar) and the way its text becomes API output
// (reasoning, content, tool calls: OutputParsing).
#pragma once

#include <optional>
#include <string>

#include "chat/output_format.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace loom::server {

struct ServerContext;
struct GenerationSpec;

// The answer's own grammar (GBNF, root "root"), or "" for free text.
struct AnswerConstraint {
  std::string gbnf;
  std::string field;  // the request field it came from, for error messages
};
// Reads response_format, structured_outputs, guided_json / guided_regex / guided_choice /
// guided_grammar (+ guided_decoding_backend, type-checked), grammar and json_schema. Two
// constraints in one request: 400.
std::optional<ApiError> read_answer_constraint(FieldReader& r, AnswerConstraint* out);

// OpenAI tools, normalized: each {"type": "function", "function": {"name", "description"?,
// "parameters"}}.
struct ToolsRequest {
  Json tools = Json::array();
  chat::ChatGrammarRequest::ToolMode mode = chat::ChatGrammarRequest::ToolMode::kNone;
  std::string function_name;  // mode kNamed
  bool parallel_tool_calls = true;
  bool declared() const { return !tools.empty(); }
};
// Reads and validates tools / tool_choice / parallel_tool_calls (OpenAI chat shapes).
std::optional<ApiError> read_openai_tools(FieldReader& r, ToolsRequest* out);
// Checks a normalized tool list (names, parameters schemas) and the tool choice against it.
std::optional<ApiError> validate_tools(const ToolsRequest& tools, const char* param);

// Combines the answer constraint, the tools and the model's reasoning format into
// spec->params.grammar (compiled through the server's grammar cache) and spec->output.
// chat = false for /v1/completions (no reasoning, no tools).
struct ChatPromptInfo {
  bool chat = false;
  std::string rendered_prompt;     // decides whether the model starts inside reasoning
  bool thinking_disabled = false;  // chat_template_kwargs enable_thinking: false
};
// Ollama's `format`: "json" (any JSON object) or a JSON Schema object; "" / absent: free text.
std::optional<ApiError> read_ollama_format(const Json* format, AnswerConstraint* out);

std::optional<ApiError> apply_output_constraints(const ServerContext& ctx,
                                                 const AnswerConstraint& answer,
                                                 const ToolsRequest& tools,
                                                 const ChatPromptInfo& prompt,
                                                 GenerationSpec* spec);

}  // namespace loom::server
