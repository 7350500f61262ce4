// The generation jobs the routes hand to the Dispatcher: each one renders a request's engine
// outputs in its API's shape, as one JSON response or as an SSE stream.
//   openai_response.cpp  /v1/completions and /v1/chat/completions (chunks, usage, [DONE])
//   anthropic_route.cpp  /v1/messages (message_start ... message_stop events)
//   ollama_job.cpp       /api/generate and /api/chat (NDJSON)
//   responses_job.cpp    /v1/responses (response.created ... response.completed events)
#pragma once

#include <memory>
#include <string>

#include "server/dispatcher.h"
#include "server/openai_request.h"

namespace loom::server {

struct ServerContext;

// Built after the requests were submitted (streams/request_ids filled in by the caller).
// For streams, the constructor-time start() sends the headers and any opening events.
std::shared_ptr<GenerationJob> make_openai_job(const ServerContext& ctx, GenerationSpec spec,
                                               std::string id, std::shared_ptr<Responder> out);
std::shared_ptr<GenerationJob> make_anthropic_job(const ServerContext& ctx, GenerationSpec spec,
                                                  std::string id, std::shared_ptr<Responder> out);
std::shared_ptr<GenerationJob> make_ollama_job(const ServerContext& ctx, GenerationSpec spec,
                                               std::string id, std::shared_ptr<Responder> out);
std::shared_ptr<GenerationJob> make_responses_job(const ServerContext& ctx, GenerationSpec spec,
                                                  std::string id, std::shared_ptr<Responder> out);

// Serialise for the wire: invalid UTF-8 (never expected: the detokenizer emits valid text, but
// a single token's bytes may be a partial character) becomes U+FFFD instead of throwing.
std::string dump_json(const Json& j);
// "data: <json>\n\n"
std::string sse_data(const Json& j);

// One sample's new text as reasoning / content / tool-call deltas: through the chat output
// parser when the request has one (its held remainder appended once the sample finished),
// else all content.
chat::ChatDelta next_chat_delta(chat::ChatOutputParser* parser, std::string text, bool finished);

}  // namespace loom::server
