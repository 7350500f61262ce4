// The Responses API over HTTP on the shared test server (synth:tiny, the test chat template) and
// on servers with a reasoning template or a small store: the response object against
// /v1/chat/completions for the same conversation (same template, same greedy text, same
// prompt tokens), the event stream's documented order and sequence numbers reassembling to the
// non-streamed object, function tools and tool_choice, text.format, previous_response_id
// through the store (GET, DELETE, LRU), reasoning items, and every unsupported field a 400
// naming it.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

json user(const std::string& text) {
  return {{"role", "user"}, {"content", text}};
}

void expect_error(const HttpResult& r, int status, const std::string& param,
                  const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  const json e = r.json()["error"];
  ASSERT_TRUE(e.is_object()) << r.body;
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.body;
  }
  EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

// The text of a response's message items.
std::string output_text(const json& resp) {
  std::string s;
  for (const json& it : resp["output"])
    if (it["type"] == "message")
      for (const json& p : it["content"]) s += p["text"].get<std::string>();
  return s;
}

struct Event {
  std::string type;
  json data;
};

std::vector<Event> events(const HttpResult& r) {
  std::vector<Event> out;
  for (const SseEvent& e : parse_sse(r.body)) {
    json d = json::parse(e.data, nullptr, false);
    EXPECT_FALSE(d.is_discarded()) << e.data;
    EXPECT_EQ(d["type"], e.event) << e.data;  // the event: line names the data's type
    out.push_back({e.event, d});
  }
  return out;
}

// The documented order: created, in_progress, per item (added, its parts and deltas, done),
// then one terminal event; sequence numbers 0, 1, 2, ...; returns the terminal response.
json check_stream_order(const std::vector<Event>& ev) {
  EXPECT_GE(ev.size(), 3u);
  if (ev.size() < 3) return json();
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i].data["sequence_number"], i) << i;
  EXPECT_EQ(ev[0].type, "response.created");
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].data["response"]["output"], json::array());
  EXPECT_EQ(ev[1].type, "response.in_progress");
  size_t i = 2;
  int64_t index = 0;
  while (i + 1 < ev.size()) {
    EXPECT_EQ(ev[i].type, "response.output_item.added") << i;
    EXPECT_EQ(ev[i].data["output_index"], index);
    const json item = ev[i].data["item"];
    const std::string id = item["id"].get<std::string>();
    EXPECT_EQ(item["status"], "in_progress");
    ++i;
    std::string streamed;
    if (item["type"] == "function_call") {
      EXPECT_EQ(id.rfind("fc_", 0), 0u) << id;
      for (; i < ev.size() && ev[i].type == "response.function_call_arguments.delta"; ++i) {
        EXPECT_EQ(ev[i].data["item_id"], id);
        streamed += ev[i].data["delta"].get<std::string>();
      }
      EXPECT_EQ(ev[i].type, "response.function_call_arguments.done");
      EXPECT_EQ(ev[i].data["name"], item["name"]);
      ++i;
    } else {
      const bool message = item["type"] == "message";
      EXPECT_EQ(id.rfind(message ? "msg_" : "rs_", 0), 0u) << id;
      const std::string part = message ? "output_text" : "reasoning_text";
      const std::string delta =
          message ? "response.output_text.delta" : "response.reasoning_text.delta";
      const std::string done =
          message ? "response.output_text.done" : "response.reasoning_text.done";
      EXPECT_EQ(ev[i].type, "response.content_part.added");
      EXPECT_EQ(ev[i].data["part"]["type"], part);
      ++i;
      for (; i < ev.size() && ev[i].type == delta; ++i) {
        EXPECT_EQ(ev[i].data["item_id"], id);
        EXPECT_EQ(ev[i].data["output_index"], index);
        EXPECT_EQ(ev[i].data["content_index"], 0);
        streamed += ev[i].data["delta"].get<std::string>();
      }
      EXPECT_EQ(ev[i].type, done);
      EXPECT_EQ(ev[i].data["text"], streamed);
      ++i;
      EXPECT_EQ(ev[i].type, "response.content_part.done");
      EXPECT_EQ(ev[i].data["part"]["text"], streamed);
      ++i;
    }
    EXPECT_EQ(ev[i].type, "response.output_item.done") << i;
    EXPECT_EQ(ev[i].data["item"]["id"], id);
    EXPECT_NE(ev[i].data["item"]["status"], "in_progress");
    if (item["type"] == "function_call") {
      EXPECT_EQ(json::parse(ev[i].data["item"]["arguments"].get<std::string>()),
                json::parse(streamed));
    }
    ++i;
    ++index;
  }
  const Event& last = ev.back();
  const std::string status = last.data["response"]["status"].get<std::string>();
  EXPECT_EQ(last.type, "response." + status);
  EXPECT_EQ(last.data["response"]["output"].size(), static_cast<size_t>(index));
  return last.data["response"];
}

// Everything but the ids (random per response) and created_at.
json without_ids(json r) {
  r.erase("id");
  r.erase("created_at");
  r["usage"].erase("input_tokens_details");  // a repeated prompt hits the prefix cache
  for (json& it : r["output"]) it.erase("id");
  return r;
}

TEST(Responses, TextMatchesChatCompletionsAndStreamsTheSameObject) {
  const uint16_t port = shared_port();
  const json body = {{"model", kTestModelName},
                     {"instructions", "Be brief."},
                     {"input", "Why is the sky blue?"},
                     {"max_output_tokens", 9},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  auto r = post_json(port, "/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = r.json();
  EXPECT_EQ(resp["object"], "response");
  EXPECT_EQ(resp["id"].get<std::string>().rfind("resp_", 0), 0u) << resp["id"];
  EXPECT_EQ(resp["model"], kTestModelName);
  EXPECT_EQ(resp["status"], "incomplete");
  EXPECT_EQ(resp["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(resp["instructions"], "Be brief.");
  EXPECT_EQ(resp["max_output_tokens"], 9);
  EXPECT_EQ(resp["store"], false);
  EXPECT_EQ(resp["temperature"], 0);
  EXPECT_EQ(resp["text"]["format"]["type"], "text");
  ASSERT_EQ(resp["output"].size(), 1u) << resp;
  const json msg = resp["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "incomplete");
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  const json u = resp["usage"];
  EXPECT_EQ(u["output_tokens"], 9);
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int64_t>() + 9);
  EXPECT_TRUE(u["input_tokens_details"]["cached_tokens"].is_number_integer());
  EXPECT_EQ(u["output_tokens_details"]["reasoning_tokens"], 0);

  // The same conversation through chat completions: same prompt, same greedy text.
  auto c = post_json(port, "/v1/chat/completions",
                     {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                user("Why is the sky blue?")})},
                      {"max_tokens", 9},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(output_text(resp), c.json()["choices"][0]["message"]["content"]);
  EXPECT_EQ(u["input_tokens"], c.json()["usage"]["prompt_tokens"]);

  json sb = body;
  sb["stream"] = true;
  auto s = post_json(port, "/v1/responses", sb);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.headers["content-type"], "text/event-stream");
  const json final = check_stream_order(events(s));
  EXPECT_EQ(without_ids(final), without_ids(resp));
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

TEST(Responses, InputItemsRenderAsTheEquivalentChatMessages) {
  const uint16_t port = shared_port();
  const json input = json::array({
      {{"role", "developer"}, {"content", "Use tools."}},
      {{"type", "message"},
       {"role", "user"},
       {"content", json::array({{{"type", "input_text"}, {"text", "Weather in"}},
                                {{"type", "input_text"}, {"text", "Paris?"}}})}},
      {{"type", "function_call"},
       {"call_id", "call_1"},
       {"name", "get_weather"},
       {"arguments", "{\"city\":\"Paris\"}"}},
      {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "21 C"}},
      {{"type", "message"},
       {"role", "assistant"},
       {"id", "msg_1"},
       {"status", "completed"},
       {"content",
        json::array(
            {{{"type", "output_text"}, {"text", "It is 21 C."}, {"annotations", json::array()}}})}},
      user("Thanks"),
  });
  auto r = post_json(
      port, "/v1/responses",
      {{"input", input}, {"max_output_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json messages = json::array({
      {{"role", "developer"}, {"content", "Use tools."}},
      user("Weather in\nParis?"),
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        json::array(
            {{{"id", "call_1"},
              {"type", "function"},
              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "21 C"}},
      {{"role", "assistant"}, {"content", "It is 21 C."}},
      user("Thanks"),
  });
  auto c = post_json(
      port, "/v1/chat/completions",
      {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(r.json()["usage"]["input_tokens"], c.json()["usage"]["prompt_tokens"]);
  EXPECT_EQ(output_text(r.json()), c.json()["choices"][0]["message"]["content"]);
}

const json kTools = json::array(
    {{{"type", "function"},
      {"name", "get_weather"},
      {"description", "Weather in a city"},
      {"parameters",
       {{"type", "object"},
        {"properties",
         {{"city", {{"type", "string"}, {"maxLength", 8}}}, {"unit", {{"enum", {"c", "f"}}}}}},
        {"required", {"city", "unit"}},
        {"additionalProperties", false}}},
      {"strict", true}},
     {{"type", "function"},
      {"name", "add"},
      {"parameters",
       {{"type", "object"},
        {"properties", {{"a", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
        {"required", {"a"}},
        {"additionalProperties", false}}}}});

void check_call(const json& item) {
  EXPECT_EQ(item["type"], "function_call") << item;
  EXPECT_EQ(item["status"], "completed") << item;
  EXPECT_EQ(item["call_id"].get<std::string>().rfind("call_", 0), 0u) << item;
  const json args = json::parse(item["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << item;
  if (item["name"] == "get_weather") {
    EXPECT_TRUE(args["city"].is_string() && args["city"].get<std::string>().size() <= 8 * 4);
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args;
  } else {
    EXPECT_EQ(item["name"], "add") << item;
    EXPECT_TRUE(args["a"].is_number_integer()) << args;
  }
}

TEST(Responses, FunctionToolsAndToolChoice) {
  const uint16_t port = shared_port();
  for (int seed : {1, 2}) {
    json body = {{"input", "Weather in Paris?"}, {"tools", kTools},
                 {"tool_choice", "required"},    {"parallel_tool_calls", false},
                 {"max_output_tokens", 200},     {"seed", seed}};
    auto r = post_json(port, "/v1/responses", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json resp = r.json();
    EXPECT_EQ(resp["status"], "completed") << resp;
    EXPECT_EQ(resp["tools"], kTools);
    EXPECT_EQ(resp["tool_choice"], "required");
    EXPECT_EQ(resp["parallel_tool_calls"], false);
    ASSERT_EQ(resp["output"].size(), 1u) << resp;
    check_call(resp["output"][0]);

    body["tool_choice"] = {{"type", "function"}, {"name", "add"}};
    auto named = post_json(port, "/v1/responses", body);
    ASSERT_EQ(named.status, 200) << named.body;
    EXPECT_EQ(named.json()["output"][0]["name"], "add") << named.body;
    check_call(named.json()["output"][0]);

    // Streamed: the arguments' deltas add up to the call, and the stream's object is the
    // non-streamed one.
    body["tool_choice"] = "required";
    body["temperature"] = 0;
    auto once = post_json(port, "/v1/responses", body);
    body["stream"] = true;
    auto s = post_json(port, "/v1/responses", body);
    ASSERT_EQ(s.status, 200) << s.body;
    const json final = check_stream_order(events(s));
    json a = without_ids(final), b = without_ids(once.json());
    for (json* x : {&a, &b})
      for (json& it : (*x)["output"]) it.erase("call_id");
    EXPECT_EQ(a, b);
  }
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

TEST(Responses, TextFormatJsonSchemaAndJsonObject) {
  const uint16_t port = shared_port();
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"ok", {{"type", "boolean"}}},
                         {"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 5}}}}},
                       {"required", {"ok", "n"}},
                       {"additionalProperties", false}};
  for (int seed : {1, 2, 3}) {
    auto r = post_json(port, "/v1/responses",
                       {{"input", "Answer in JSON"},
                        {"max_output_tokens", 100},
                        {"seed", seed},
                        {"text",
                         {{"format",
                           {{"type", "json_schema"},
                            {"name", "answer"},
                            {"schema", schema},
                            {"strict", true}}}}}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json resp = r.json();
    EXPECT_EQ(resp["text"]["format"]["name"], "answer");
    if (resp["status"] != "completed") continue;  // cut short: not a whole document yet
    const json doc = json::parse(output_text(resp), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << output_text(resp);
    EXPECT_TRUE(doc["ok"].is_boolean()) << doc;
    EXPECT_TRUE(doc["n"].is_number_integer() && doc["n"] >= 1 && doc["n"] <= 5) << doc;
    EXPECT_EQ(doc.size(), 2u) << doc;
  }
  auto o = post_json(port, "/v1/responses",
                     {{"input", "JSON please"},
                      {"max_output_tokens", 100},
                      {"seed", 4},
                      {"text", {{"format", {{"type", "json_object"}}}}}});
  ASSERT_EQ(o.status, 200) << o.body;
  if (o.json()["status"] == "completed")
    EXPECT_TRUE(json::parse(output_text(o.json()), nullptr, false).is_object()) << o.body;
  else
    EXPECT_EQ(output_text(o.json()).substr(0, 1), "{") << o.body;
}

TEST(Responses, StoreGetDeleteAndPreviousResponseId) {
  const uint16_t port = shared_port();
  auto first = post_json(port, "/v1/responses",
                         {{"input", "Hello"},
                          {"store", true},
                          {"max_output_tokens", 5},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"metadata", {{"topic", "greeting"}}}});
  ASSERT_EQ(first.status, 200) << first.body;
  const json r1 = first.json();
  const std::string id = r1["id"];
  EXPECT_EQ(r1["store"], true);
  EXPECT_EQ(r1["metadata"]["topic"], "greeting");
  auto got = http_request(port, "GET", "/v1/responses/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json(), r1);
  EXPECT_EQ(http_request(port, "GET", "/v1/responses/" + id + "?stream=false").json(), r1);
  expect_error(http_request(port, "GET", "/v1/responses/" + id + "?stream=true"), 400, "stream",
               "stream=true");

  // The follow-up sees the first exchange: its prompt is the three-turn conversation's.
  auto second = post_json(port, "/v1/responses",
                          {{"input", "And again?"},
                           {"previous_response_id", id},
                           {"max_output_tokens", 3},
                           {"temperature", 0},
                           {"ignore_eos", true}});
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.json()["previous_response_id"], id);
  auto c =
      post_json(port, "/v1/chat/completions",
                {{"messages", json::array({user("Hello"),
                                           {{"role", "assistant"}, {"content", output_text(r1)}},
                                           user("And again?")})},
                 {"max_tokens", 3},
                 {"temperature", 0},
                 {"ignore_eos", true}});
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(second.json()["usage"]["input_tokens"], c.json()["usage"]["prompt_tokens"]);
  EXPECT_EQ(output_text(second.json()), c.json()["choices"][0]["message"]["content"]);
  // store false (the default): not kept.
  expect_error(http_request(port, "GET", "/v1/responses/" + second.json()["id"].get<std::string>()),
               404, "", "not found");

  auto del = http_request(port, "DELETE", "/v1/responses/" + id);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json(), (json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}));
  expect_error(http_request(port, "GET", "/v1/responses/" + id), 404, "", "not found");
  expect_error(http_request(port, "DELETE", "/v1/responses/" + id), 404, "", "not found");
  auto gone = post_json(port, "/v1/responses", {{"input", "x"}, {"previous_response_id", id}});
  expect_error(gone, 400, "previous_response_id", "not found");
  EXPECT_EQ(gone.json()["error"]["code"], "previous_response_not_found");
}

TEST(Responses, StoreKeepsTheLeastRecentlyUsedWithinItsSize) {
  server::ServerOptions so;
  so.max_stored_responses = 2;
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  std::vector<std::string> ids;
  auto create = [&] {
    auto r = post_json(s->port(), "/v1/responses",
                       {{"input", "hi"}, {"store", true}, {"max_output_tokens", 1}});
    EXPECT_EQ(r.status, 200) << r.body;
    ids.push_back(r.json()["id"]);
  };
  create();
  create();
  EXPECT_EQ(http_request(s->port(), "GET", "/v1/responses/" + ids[0]).status, 200);  // used
  create();  // drops ids[1], the least recently used
  EXPECT_EQ(http_request(s->port(), "GET", "/v1/responses/" + ids[0]).status, 200);
  EXPECT_EQ(http_request(s->port(), "GET", "/v1/responses/" + ids[1]).status, 404);
  EXPECT_EQ(http_request(s->port(), "GET", "/v1/responses/" + ids[2]).status, 200);
  s->stop();

  so.max_stored_responses = 0;
  auto off = start_test_server(so);
  ASSERT_TRUE(off);
  expect_error(post_json(off->port(), "/v1/responses", {{"input", "hi"}, {"store", true}}), 400,
               "store", "--max-stored-responses");
  off->stop();
}

TEST(Responses, ReasoningItemsFromAReasoningTemplate) {
  server::ServerOptions so;
  so.chat_template = kTestReasoningChatTemplate;  // the prompt opens <think>
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  const json body = {{"input", "Hi"},
                     {"max_output_tokens", 8},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"reasoning", {{"effort", "high"}, {"summary", "auto"}}}};
  auto r = post_json(s->port(), "/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = r.json();
  EXPECT_EQ(resp["reasoning"]["effort"], "high");
  ASSERT_GE(resp["output"].size(), 1u) << resp;
  const json rs = resp["output"][0];
  EXPECT_EQ(rs["type"], "reasoning") << rs;
  EXPECT_EQ(rs["content"][0]["type"], "reasoning_text");
  EXPECT_FALSE(rs["content"][0]["text"].get<std::string>().empty());
  EXPECT_GT(resp["usage"]["output_tokens_details"]["reasoning_tokens"].get<int64_t>(), 0);
  json sb = body;
  sb["stream"] = true;
  auto st = post_json(s->port(), "/v1/responses", sb);
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(without_ids(check_stream_order(events(st))), without_ids(resp));

  // The reasoning item goes back as the assistant turn's reasoning_content.
  json input = json::array({user("Hi"), rs, user("More")});
  auto next = post_json(s->port(), "/v1/responses",
                        {{"input", input}, {"max_output_tokens", 2}, {"ignore_eos", true}});
  EXPECT_EQ(next.status, 200) << next.body;
  s->stop();
  // The shared server's template does not reason.
  expect_error(post_json(shared_port(), "/v1/responses",
                         {{"input", "Hi"}, {"reasoning", {{"effort", "low"}}}}),
               400, "reasoning", "does not reason");
  auto none =
      post_json(shared_port(), "/v1/responses",
                {{"input", "Hi"}, {"max_output_tokens", 2}, {"reasoning", {{"effort", "none"}}}});
  EXPECT_EQ(none.status, 200) << none.body;
}

TEST(Responses, UnsupportedOrBadFieldsAre400sNamingThem) {
  const uint16_t port = shared_port();
  struct Case {
    json body;
    std::string param;
    std::string needle;
  };
  const json in = "Hi";
  const std::vector<Case> cases = {
      {{{"input", in}, {"frobnicate", 1}}, "frobnicate", "frobnicate"},
      {{{"input", in}, {"n", 2}}, "n", "\"n\""},
      {json::object(), "input", "input is required"},
      {{{"input", 5}}, "input", "string or a list"},
      {{{"input", json::array()}}, "input", "at least one"},
      {{{"input", json::array({{{"type", "item_reference"}, {"id", "x"}}})}},
       "input",
       "item_reference"},
      {{{"input", json::array({{{"role", "robot"}, {"content", "x"}}})}}, "input", "robot"},
      {{{"input", json::array({{{"role", "user"}, {"content", "x"}, {"name", "bob"}}})}},
       "input",
       "input[0].name"},
      {{{"input", json::array({{{"role", "user"},
                                {"content", json::array({{{"type", "input_image"},
                                                          {"image_url", "http://x"}}})}}})}},
       "input",
       "input_image"},
      {{{"input",
         json::array({{{"type", "function_call_output"}, {"call_id", "nope"}, {"output", "1"}}})}},
       "input",
       "no function_call with call_id 'nope'"},
      {{{"input", json::array({{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}}})}},
       "input",
       "arguments"},
      {{{"input",
         json::array(
             {{{"type", "reasoning"}, {"encrypted_content", "xyz"}, {"summary", json::array()}}})}},
       "input",
       "encrypted_content"},
      {{{"input", in}, {"tools", json::array({{{"type", "web_search"}}})}}, "tools", "web_search"},
      {{{"input", in},
        {"tools",
         json::array({{{"type", "function"}, {"name", "f"}, {"function", json::object()}}})}},
       "tools",
       "tools[0].function"},
      {{{"input", in}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"name", "zzz"}}}},
       "tool_choice",
       "zzz"},
      {{{"input", in}, {"tool_choice", "required"}}, "tool_choice", "requires tools"},
      {{{"input", in}, {"tools", kTools}, {"tool_choice", "sometimes"}},
       "tool_choice",
       "sometimes"},
      {{{"input", in}, {"text", {{"format", {{"type", "yaml"}}}}}}, "text", "yaml"},
      {{{"input", in}, {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}}},
       "text",
       "text.format.schema is required"},
      {{{"input", in},
        {"text",
         {{"format",
           {{"type", "json_schema"},
            {"name", "x"},
            {"schema", {{"type", "object"}, {"patternProperties", {{"a", json::object()}}}}}}}}}},
       "text",
       "patternProperties"},
      {{{"input", in},
        {"text",
         {{"format",
           {{"type", "json_schema"}, {"name", "bad name!"}, {"schema", json::object()}}}}}},
       "text",
       "text.format.name"},
      {{{"input", in}, {"text", {{"verbosity", "low"}}}}, "text", "verbosity"},
      {{{"input", in}, {"reasoning", {{"effort", "huge"}}}}, "reasoning", "effort"},
      {{{"input", in}, {"reasoning", {{"summary", "detailed"}}}}, "reasoning", "summary"},
      {{{"input", in}, {"max_output_tokens", 0}}, "max_output_tokens", "max_output_tokens"},
      {{{"input", in}, {"max_output_tokens", "ten"}}, "max_output_tokens", "max_output_tokens"},
      {{{"input", in}, {"temperature", -1}}, "temperature", "temperature"},
      {{{"input", in}, {"include", json::array({"reasoning.encrypted_content"})}},
       "include",
       "include"},
      {{{"input", in}, {"truncation", "auto"}}, "truncation", "auto"},
      {{{"input", in}, {"background", true}}, "background", "background"},
      {{{"input", in}, {"top_logprobs", 3}}, "top_logprobs", "top_logprobs"},
      {{{"input", in}, {"metadata", {{"k", 1}}}}, "metadata", "metadata"},
      {{{"input", in}, {"store", "yes"}}, "store", "store"},
      {{{"input", in}, {"previous_response_id", "resp_missing"}},
       "previous_response_id",
       "not found"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    expect_error(post_json(port, "/v1/responses", c.body), 400, c.param, c.needle);
  }
  expect_error(post_json(port, "/v1/responses", {{"input", in}, {"model", "other"}}), 404, "model",
               "other");
  expect_error(http_request(port, "GET", "/v1/responses/a/input_items"), 404, "", "no route");
  expect_error(http_request(port, "PUT", "/v1/responses/x"), 405, "", "not allowed");
  EXPECT_EQ(http_request(port, "GET", "/health").status, 200);
}

}  // namespace
}  // namespace loom::test
