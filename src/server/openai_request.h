// Parsing and validation of generation requests: OpenAI /v1/completions and
// /v1/chat/completions, and (in anthropic_route.cpp) Anthropic /v1/messages, all into one
// GenerationSpec: the prompts as token ids plus vLLM SamplingParams. Every check that can be
// made before the engine sees the request is made here, so bad input is a 400 naming the
// field, never an engine error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/output_format.h"
#include "sampling/sampling_params.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace loom::server {

struct ServerContext;
struct ResponsesContext;  // responses_api.h
struct ToolsRequest;      // constraints.h

enum class ApiKind { kCompletion, kChat, kAnthropic, kOllamaGenerate, kOllamaChat, kResponses };

// How each sequence's text becomes API output in chat APIs: reasoning, content and tool calls
// (a chat::ChatOutputParser per sequence when enabled; plain content otherwise).
struct OutputParsing {
  bool enabled = false;
  chat::OutputFormat format;
  bool tools_enabled = false;
  bool starts_in_reasoning = false;
  nlohmann::ordered_json tools;  // the declared tools (qwen3_coder types its values by them)
};

struct GenerationSpec {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;                          // as the response reports it
  std::vector<std::vector<int32_t>> prompts;  // one engine request per prompt
  std::vector<std::string> prompt_texts;      // decoded prompts (echo)
  SamplingParams params;                      // shared by every prompt; n samples each
  bool stream = false;
  // vLLM's prompt_logprobs field (-1: not asked): the response's prompt_logprobs, top k each.
  int32_t prompt_logprobs = -1;
  bool include_usage = false;  // stream_options.include_usage
  // stream_options.continuous_usage_stats (vLLM): usage on every chunk, not only the last.
  bool continuous_usage = false;
  bool echo = false;           // completions: prepend the prompt to the text
  bool chat_logprobs = false;  // chat: logprobs=true
  OutputParsing output;
  std::shared_ptr<const ResponsesContext> responses;  // kResponses only
};

// Parse a body into JSON; invalid JSON or UTF-8 → 400; anything but an object → 400.
std::optional<ApiError> parse_json_object(const std::string& body, Json* out);

// The `model` field: absent is fine (the one served model); another name → 404.
std::optional<ApiError> check_model(const ServerContext& ctx, FieldReader& r, std::string* model);

// Reads the sampling fields shared by the APIs (temperature, top_p, ..., stop, seed) into
// spec->params; kind-specific fields are read by the callers.
void read_sampling_fields(const ServerContext& ctx, FieldReader& r, GenerationSpec* spec);

// max_tokens defaulting, SamplingParams::validate, and the engine's own request checks
// (vocabulary, --max-model-len, KV capacity) for every prompt. `max_tokens` is what the request
// asked for (nullopt: as many as fit).
std::optional<ApiError> finish_spec(const ServerContext& ctx, std::optional<int64_t> max_tokens,
                                    GenerationSpec* spec);

// A chat message list → the list the template sees ({"role", "content": string, ...}): content
// parts are joined, unknown roles and non-text parts refused.
// An assistant turn's tool_calls are checked too (a list of {id?, type?: "function",
// function: {name, arguments}}), each error naming the path (messages[1].tool_calls[0].function).
std::optional<ApiError> normalize_messages(const Json& messages, Json* out, const char* param);

// OpenAI-shape messages as clients send them: each key must be one that message's role takes
// (user: role, content, name; assistant: also tool_calls, reasoning_content; tool: also
// tool_call_id), else a 400 naming messages[i].key. Null values are let through (SDKs echo
// assistant messages back with refusal: null and the like).
std::optional<ApiError> check_message_keys(const Json& messages, const char* param);

// Declared tools (and a tool_choice other than "none") on a chat template that never reads
// `tools`: the template would drop them and the model would never be told of them → 400
// naming `param` that says how to give the server a template that renders tools.
std::optional<ApiError> check_template_tools(const ServerContext& ctx, const ToolsRequest& tools,
                                             const char* param);

std::optional<ApiError> parse_completion_request(const ServerContext& ctx, const Json& body,
                                                 GenerationSpec* spec);
std::optional<ApiError> parse_chat_request(const ServerContext& ctx, const Json& body,
                                           GenerationSpec* spec);

}  // namespace loom::server
