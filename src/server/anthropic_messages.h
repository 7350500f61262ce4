// Anthropic Messages API request side: the message list (text, tool_use, tool_result, thinking
// blocks), tools / tool_choice and thinking, converted into what the chat template and
// apply_output_constraints() take (OpenAI-shape messages and a ToolsRequest). Used by
// anthropic_route.cpp for /v1/messages and /v1/messages/count_tokens.
#pragma once

#include <cstdint>
#include <optional>

#include "server/api_error.h"
#include "server/constraints.h"
#include "server/json_fields.h"
#include "server/openai_request.h"

namespace loom::server {

struct ServerContext;

// A /v1/messages body → the generation it asks for (what handle_messages submits): the
// messages rendered by the chat template, tools, thinking and output_format applied, every
// field validated (an ApiError naming the field otherwise).
std::optional<ApiError> parse_anthropic_request(const ServerContext& ctx, const Json& body,
                                                GenerationSpec* spec);

// body.system + body.messages → the chat template's message list:
//   - text blocks of one turn are joined with "\n";
//   - an assistant turn's tool_use blocks become tool_calls [{id, type: "function",
//     function: {name, arguments: <JSON text>}}] (content null when the turn has no text);
//   - its thinking blocks become reasoning_content (the field Qwen3-style templates read; other
//     templates ignore it); redacted_thinking is dropped (opaque to any local model);
//   - a user turn's tool_result blocks become {"role": "tool", "tool_call_id", "content"}
//     messages, in order, before the turn's own text (OpenAI's order: results follow the calls);
//   - image, document and any other block type: 400 (text-only models).
std::optional<ApiError> anthropic_messages(const Json& body, Json* out);

// tools [{name, description?, input_schema}] and tool_choice {type: auto | any | tool | none,
// name?, disable_parallel_tool_use?} → ToolsRequest, validated (schemas compile, the named tool
// is declared). Server tools (a `type` other than "custom") are refused by name.
std::optional<ApiError> read_anthropic_tools(FieldReader& r, ToolsRequest* out);

// thinking {type: "enabled", budget_tokens, display?} | {type: "adaptive", display?} |
// {type: "disabled"} → enable_thinking (nullopt when absent). budget_tokens is checked as
// Anthropic checks it (an integer ≥ 1024 and, when max_tokens is known, < max_tokens) but is not
// enforced as a separate budget: the reasoning and the answer share max_tokens. display
// "omitted" and type "between_tools" are refused (not implemented).
std::optional<ApiError> read_anthropic_thinking(FieldReader& r, std::optional<int64_t> max_tokens,
                                                std::optional<bool>* enable_thinking);

// output_config {format?: {type: "json_schema", schema}, effort?} (and the beta's top-level
// output_format {type: "json_schema", schema}) → the answer's grammar, compiled as OpenAI's
// response_format json_schema is. effort is type-checked and has no effect.
std::optional<ApiError> read_anthropic_output_format(FieldReader& r, AnswerConstraint* out);

}  // namespace loom::server
