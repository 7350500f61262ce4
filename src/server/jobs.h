// The generation jobs the routes hand to the Dispatcher: each one renders a request's engine
// outputs in its API's shape, as one JSON response or as an SSE stream.
//   openai_response.cpp  /v1/completions and /v1/chat/completions (chunks, usage, [DONE])
//   anthropic_route.cpp  /v1/messages (message_start ... message_stop events)
//   ollama_job.cpp       /api/generate and /api/chat (NDJSON)
//   responses_job.cpp    /v1/responses (response.created ... response.completed events)
#pragma once

#include <memory>
#include <string>
#include <vector>

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

// Hands `job` to the dispatcher once its requests were submitted: it takes their ids and
// streams, counts them in ctx.in_flight until they end, names `route` in the request log, and
// a client that hangs up aborts every one of them.
void dispatch_job(ServerContext& ctx, const std::shared_ptr<GenerationJob>& job,
                  std::vector<std::string> request_ids,
                  std::vector<std::shared_ptr<RequestStream>> streams, const char* route,
                  Responder& out);

// Serialise for the wire: invalid UTF-8 (never expected: the detokenizer emits valid text, but
// a single token's bytes may be a partial character) becomes U+FFFD instead of throwing.
std::string dump_json(const Json& j);
// "data: <json>\n\n"
std::string sse_data(const Json& j);

// One sample's new text as reasoning / content / tool-call deltas: through the chat output
// parser when the request has one (its held remainder appended once the sample finished),
// else all content. `c`: the sample's output whose text this is (is it finished, and did an
// end-of-generation token end it).
chat::ChatDelta next_chat_delta(chat::ChatOutputParser* parser, std::string text,
                                const CompletionOutput& c);

// One delta's parts in the order the model wrote them, for APIs that answer in blocks or items
// (Anthropic, Responses): more arguments for the call that was open before this text (it must
// close before anything else can follow), then reasoning, answer text, and the calls begun in
// this text (each call's first delta, with its id and name, then its arguments).
template <class OnArguments, class OnReasoning, class OnContent, class OnCallBegins>
void visit_in_order(const chat::ChatDelta& d, OnArguments&& on_arguments,
                    OnReasoning&& on_reasoning, OnContent&& on_content,
                    OnCallBegins&& on_call_begins) {
  size_t i = 0;
  for (; i < d.tool_calls.size() && d.tool_calls[i].id.empty(); ++i) on_arguments(d.tool_calls[i]);
  if (!d.reasoning.empty()) on_reasoning(d.reasoning);
  if (!d.content.empty()) on_content(d.content);
  for (; i < d.tool_calls.size(); ++i) {
    if (!d.tool_calls[i].id.empty()) on_call_begins(d.tool_calls[i]);
    on_arguments(d.tool_calls[i]);
  }
}

}  // namespace loom::server
