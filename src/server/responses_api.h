// OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) on the same
// chat template, engine, tool-call and reasoning parsers as /v1/chat/completions:
//   responses_request.cpp  the request: input items → the template's messages, flat function
//                          tools, tool_choice, text.format, reasoning.effort, previous_response_id
//   responses_job.cpp      the response object and its event stream (response.created ...
//                          response.completed, every event with a sequence_number)
//   responses_routes.cpp   the routes; responses_store.h the bounded store for `store: true`
// Every request field loom cannot honour is a 400 naming it, never silently ignored.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "server/openai_request.h"

namespace loom::server {

class ResponsesStore;

// What a Responses request carries beyond its GenerationSpec.
struct ResponsesContext {
  // The request's settings as the response object reports them: instructions,
  // max_output_tokens, metadata, parallel_tool_calls, previous_response_id, reasoning, store,
  // temperature, text, tool_choice, tools, top_p, truncation, user.
  Json echo = Json::object();
  // The conversation this response continues: the stored items of previous_response_id (if
  // any) followed by this request's input items (instructions are not items: OpenAI does not
  // carry them over to the next response).
  Json items = Json::array();
  bool store = false;
  ResponsesStore* store_to = nullptr;  // where a finished response goes when `store`
  size_t store_capacity = 0;           // --max-stored-responses
};

// POST /v1/responses body → spec (kind kResponses, spec->responses set). `store` resolves
// previous_response_id.
std::optional<ApiError> parse_responses_request(const ServerContext& ctx, ResponsesStore& store,
                                                const Json& body, GenerationSpec* spec);

}  // namespace loom::server
