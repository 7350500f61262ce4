// Structured outputs and tool calls over real HTTP with the random-weight test model: whatever
// the model "wants", the output follows the request's schema / regex / choice / tool list (so
// only a working constraint passes), streams reassemble to the non-streamed answer, and every
// bad constraint is a 400 that names its field while the server stays healthy.
#include <gtest/gtest.h>

#include <regex>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

json chat_body(json extra, int max_tokens = 200) {
  json b = {{"messages", {{{"role", "user"}, {"content", "Give me the data."}}}},
            {"max_tokens", max_tokens},
            {"temperature", 1.0}};
  for (auto it = extra.begin(); it != extra.end(); ++it) b[it.key()] = it.value();
  return b;
}

// A small schema whose documents are short whatever the model does: enums, booleans, bounded
// integers and strings.
json person_schema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "role": {"enum": ["admin", "user", null]},
      "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
    },
    "required": ["name", "age", "role"],
    "additionalProperties": false
  })");
}

// Validates a document against person_schema() by hand (independent of the grammar engine).
void expect_person(const std::string& text) {
  json doc;
  ASSERT_NO_THROW(doc = json::parse(text)) << text;
  ASSERT_TRUE(doc.is_object()) << text;
  for (auto it = doc.begin(); it != doc.end(); ++it)
    EXPECT_TRUE(it.key() == "name" || it.key() == "age" || it.key() == "role" || it.key() == "tags")
        << text;
  ASSERT_TRUE(doc.contains("name") && doc["name"].is_string()) << text;
  // maxLength counts code points.
  size_t cps = 0;
  for (unsigned char c : doc["name"].get<std::string>()) cps += (c & 0xC0) != 0x80;
  EXPECT_LE(cps, 6u) << text;
  ASSERT_TRUE(doc.contains("age") && doc["age"].is_number_integer()) << text;
  EXPECT_GE(doc["age"].get<int64_t>(), 0);
  EXPECT_LE(doc["age"].get<int64_t>(), 120);
  ASSERT_TRUE(doc.contains("role")) << text;
  EXPECT_TRUE(doc["role"].is_null() || doc["role"] == "admin" || doc["role"] == "user") << text;
  if (doc.contains("tags")) {
    ASSERT_TRUE(doc["tags"].is_array()) << text;
    EXPECT_LE(doc["tags"].size(), 3u);
    for (const json& t : doc["tags"]) EXPECT_TRUE(t.is_boolean()) << text;
  }
}

TEST(StructuredOutput, JsonSchemaResponseFormatIsFollowed) {
  const uint16_t port = shared_port();
  for (int seed = 1; seed <= 6; ++seed) {
    json rf = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "person"}, {"schema", person_schema()}, {"strict", true}}}};
    auto r = post_json(port, "/v1/chat/completions",
                       chat_body({{"response_format", rf}, {"seed", seed}}));
    ASSERT_EQ(r.status, 200) << r.body;
    json j = r.json();
    const json& choice = j["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "stop") << r.body;  // the document ended by itself
    expect_person(choice["message"]["content"].get<std::string>());
  }
}

TEST(StructuredOutput, CompletionsGuidedFieldsAreFollowed) {
  const uint16_t port = shared_port();
  const std::vector<std::string> choices = {"red", "green", "blue sky"};
  for (int seed = 1; seed <= 5; ++seed) {
    json b = {{"prompt", "Pick a colour:"},
              {"max_tokens", 40},
              {"seed", seed},
              {"guided_choice", choices}};
    auto r = post_json(port, "/v1/completions", b);
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.json()["choices"][0]["text"];
    EXPECT_NE(std::find(choices.begin(), choices.end(), text), choices.end()) << text;

    const std::string re = "[a-c]{2,4}-[0-9]+(\\.[0-9]{1,2})?";
    b = {{"prompt", "Code:"},
         {"max_tokens", 40},
         {"seed", seed},
         {"structured_outputs", {{"regex", re}}}};
    r = post_json(port, "/v1/completions", b);
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.json()["choices"][0];
    const std::string code = c["text"];
    if (c["finish_reason"] == "stop") {
      EXPECT_TRUE(std::regex_match(code, std::regex(re))) << code;
    }
    // Whatever the finish, the text is a prefix the regex can still complete.
    EXPECT_TRUE(std::regex_match(code.substr(0, 1), std::regex("[a-c]"))) << code;
  }
}

// Every field that carries a constraint, on the route that takes it: the output follows it
// (so a field that was parsed and then dropped fails here, whatever the model wants).
TEST(StructuredOutput, EveryConstraintFieldIsFollowed) {
  const uint16_t port = shared_port();
  const json rf_schema = {{"type", "json_schema"},
                          {"json_schema", {{"name", "person"}, {"schema", person_schema()}}}};
  const std::vector<std::pair<std::string, json>> person_fields = {
      {"guided_json", {{"guided_json", person_schema()}}},
      {"json_schema (llama-server)", {{"json_schema", person_schema()}}},
      {"structured_outputs.json", {{"structured_outputs", {{"json", person_schema()}}}}},
      {"response_format json_schema", {{"response_format", rf_schema}}},
  };
  const std::string gbnf = R"(root ::= "yes" | "no" | [0-9] [0-9]? [0-9]?)";
  const std::regex gbnf_re("yes|no|[0-9]{1,3}");
  for (int seed = 1; seed <= 3; ++seed) {
    for (const auto& [name, field] : person_fields) {
      for (const char* route : {"/v1/chat/completions", "/v1/completions"}) {
        SCOPED_TRACE(name + " " + route + " seed " + std::to_string(seed));
        json b = std::string(route) == "/v1/completions"
                     ? json{{"prompt", "Data:"}, {"max_tokens", 200}, {"temperature", 1.0}}
                     : chat_body({}, 200);
        b["seed"] = seed;
        for (auto it = field.begin(); it != field.end(); ++it) b[it.key()] = it.value();
        auto r = post_json(port, route, b);
        ASSERT_EQ(r.status, 200) << r.body;
        const json c = r.json()["choices"][0];
        ASSERT_EQ(c["finish_reason"], "stop") << r.body;
        expect_person(c.contains("message") ? c["message"]["content"].get<std::string>()
                                            : c["text"].get<std::string>());
      }
    }
    // Any JSON object: response_format json_object (chat) and structured_outputs.json_object.
    for (const json& field : {json{{"response_format", {{"type", "json_object"}}}},
                              json{{"structured_outputs", {{"json_object", true}}}}}) {
      SCOPED_TRACE(field.dump());
      json b = chat_body(field, 200);
      b["seed"] = seed;
      auto r = post_json(port, "/v1/chat/completions", b);
      ASSERT_EQ(r.status, 200) << r.body;
      const json c = r.json()["choices"][0];
      const std::string text = c["message"]["content"];
      if (c["finish_reason"] == "stop") {
        json doc;
        ASSERT_NO_THROW(doc = json::parse(text)) << text;
        EXPECT_TRUE(doc.is_object()) << text;
      } else {
        EXPECT_EQ(text.substr(0, 1), "{") << text;
      }
    }
    // GBNF under all three names, and a regex and a choice under vLLM's older names.
    for (const json& field : {json{{"guided_grammar", gbnf}}, json{{"grammar", gbnf}},
                              json{{"structured_outputs", {{"grammar", gbnf}}}},
                              json{{"guided_regex", "yes|no|[0-9]{1,3}"}},
                              json{{"structured_outputs", {{"choice", {"yes", "no", "7"}}}}}}) {
      SCOPED_TRACE(field.dump());
      json b = {{"prompt", "Answer:"}, {"max_tokens", 20}, {"temperature", 1.0}, {"seed", seed}};
      for (auto it = field.begin(); it != field.end(); ++it) b[it.key()] = it.value();
      auto r = post_json(port, "/v1/completions", b);
      ASSERT_EQ(r.status, 200) << r.body;
      const json c = r.json()["choices"][0];
      ASSERT_EQ(c["finish_reason"], "stop") << r.body;
      EXPECT_TRUE(std::regex_match(c["text"].get<std::string>(), gbnf_re)) << r.body;
    }
  }
}

// Only the user's stop strings can cut a constrained document, and they do: with "beta" among
// `stop`, the one allowed text stops before it (stop_reason says which); without, it completes.
TEST(StructuredOutput, UserStopStringsCutAConstrainedDocument) {
  const uint16_t port = shared_port();
  json b = {{"prompt", "Say:"},
            {"max_tokens", 40},
            {"temperature", 1.0},
            {"seed", 3},
            {"guided_choice", {"alpha beta gamma"}}};
  auto r = post_json(port, "/v1/completions", b);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], "alpha beta gamma") << r.body;
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop") << r.body;
  b["stop"] = {"beta"};
  r = post_json(port, "/v1/completions", b);
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.json()["choices"][0];
  EXPECT_EQ(c["text"], "alpha ") << r.body;
  EXPECT_EQ(c["finish_reason"], "stop") << r.body;
  EXPECT_EQ(c["stop_reason"], "beta") << r.body;
}

// /metrics counts the compiled-grammar cache: a new schema is a miss (compiled), the same
// schema again a hit; a schema that differs only by a property name is a new compile.
TEST(StructuredOutput, GrammarCacheCountersOnMetrics) {
  const uint16_t port = shared_port();
  const std::string l = std::string("{model_name=\"") + kTestModelName + "\"}";
  auto counters = [&] {
    const std::string page = http_request(port, "GET", "/metrics").body;
    return std::pair<double, double>{metric_value(page, "loom:grammar_cache_hits_total" + l),
                                     metric_value(page, "loom:grammar_cache_misses_total" + l)};
  };
  auto ask = [&](const std::string& key) {
    const json schema = {{"type", "object"},
                         {"properties", {{key, {{"type", "boolean"}}}}},
                         {"required", {key}},
                         {"additionalProperties", false}};
    const json b = {{"prompt", "x"}, {"max_tokens", 16}, {"guided_json", schema}};
    EXPECT_EQ(post_json(port, "/v1/completions", b).status, 200);
  };
  const auto [hits0, misses0] = counters();
  ASSERT_GE(hits0, 0.0);
  ASSERT_GE(misses0, 0.0);
  ask("metrics_probe_a");
  const auto [hits1, misses1] = counters();
  EXPECT_EQ(misses1, misses0 + 1);
  EXPECT_EQ(hits1, hits0);
  ask("metrics_probe_a");
  const auto [hits2, misses2] = counters();
  EXPECT_EQ(hits2, hits1 + 1);
  EXPECT_EQ(misses2, misses1);
  ask("metrics_probe_b");
  EXPECT_EQ(counters().second, misses2 + 1);
}

json weather_tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 8},
        "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": -9, "maximum": 9},
        "b": {"type": "integer", "minimum": -9, "maximum": 9}}, "required": ["a", "b"],
        "additionalProperties": false}}}
  ])");
}

void expect_valid_call(const json& call) {
  ASSERT_EQ(call["type"], "function") << call.dump();
  ASSERT_TRUE(call["id"].is_string() && !call["id"].get<std::string>().empty()) << call.dump();
  const std::string name = call["function"]["name"];
  json args;
  ASSERT_NO_THROW(args = json::parse(call["function"]["arguments"].get<std::string>()))
      << call.dump();
  if (name == "get_weather") {
    ASSERT_TRUE(args["city"].is_string()) << call.dump();
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << call.dump();
    EXPECT_EQ(args.size(), 2u);
  } else {
    ASSERT_EQ(name, "add") << call.dump();
    ASSERT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << call.dump();
    EXPECT_LE(std::abs(args["a"].get<int>()), 9);
    EXPECT_EQ(args.size(), 2u);
  }
}

TEST(StructuredOutput, RequiredAndNamedToolChoiceProduceValidCalls) {
  const uint16_t port = shared_port();
  for (int seed = 1; seed <= 5; ++seed) {
    auto r = post_json(port, "/v1/chat/completions",
                       chat_body({{"tools", weather_tools()},
                                  {"tool_choice", "required"},
                                  {"parallel_tool_calls", false},
                                  {"seed", seed}},
                                 200));
    ASSERT_EQ(r.status, 200) << r.body;
    json c = r.json()["choices"][0];
    ASSERT_EQ(c["finish_reason"], "tool_calls") << r.body;
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
    expect_valid_call(c["message"]["tool_calls"][0]);

    json named = {{"type", "function"}, {"function", {{"name", "add"}}}};
    r = post_json(
        port, "/v1/chat/completions",
        chat_body({{"tools", weather_tools()}, {"tool_choice", named}, {"seed", seed}}, 200));
    ASSERT_EQ(r.status, 200) << r.body;
    c = r.json()["choices"][0];
    ASSERT_EQ(c["finish_reason"], "tool_calls") << r.body;
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
    EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "add");
    expect_valid_call(c["message"]["tool_calls"][0]);
    EXPECT_TRUE(c["message"]["content"].is_null()) << r.body;
  }
}

// A response format and tools together, as OpenAI takes them: under "auto" the turn is an
// answer in the format or a valid call; under "required" it is a call. parallel_tool_calls
// false keeps "auto" to one call.
TEST(StructuredOutput, ResponseFormatWithToolsIsAnAnswerOrACall) {
  const uint16_t port = shared_port();
  const json rf = {{"type", "json_schema"},
                   {"json_schema", {{"name", "person"}, {"schema", person_schema()}}}};
  int answers = 0, calls = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    auto r = post_json(port, "/v1/chat/completions",
                       chat_body({{"tools", weather_tools()},
                                  {"tool_choice", "auto"},
                                  {"parallel_tool_calls", false},
                                  {"response_format", rf},
                                  {"seed", seed}},
                                 200));
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.json()["choices"][0];
    if (c["finish_reason"] == "tool_calls") {
      ++calls;
      ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
      expect_valid_call(c["message"]["tool_calls"][0]);
    } else {
      ++answers;
      ASSERT_EQ(c["finish_reason"], "stop") << r.body;
      expect_person(c["message"]["content"].get<std::string>());
    }
    r = post_json(port, "/v1/chat/completions",
                  chat_body({{"tools", weather_tools()},
                             {"tool_choice", "required"},
                             {"parallel_tool_calls", false},
                             {"response_format", rf},
                             {"seed", seed}},
                            200));
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.json()["choices"][0]["finish_reason"], "tool_calls") << r.body;
    const json required = r.json();  // kept: a range-for over a temporary's member dangles
    for (const json& call : required["choices"][0]["message"]["tool_calls"])
      expect_valid_call(call);
  }
  RecordProperty("answers", answers);
  RecordProperty("calls", calls);
  EXPECT_GT(answers, 0);  // both kinds of turn came up (4 and 4 with these seeds)
  EXPECT_GT(calls, 0);
}

// Fields the OpenAI routes do not take are a 400 naming them (never silently ignored); the
// no-effect fields SDKs send (user, metadata, store: false, ...) pass.
TEST(StructuredOutput, UnknownFieldsAre400sNamingThem) {
  const uint16_t port = shared_port();
  struct Case {
    std::string route;
    json extra;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", {{"prediction", {{"type", "content"}}}}, "prediction"},
      {"/v1/chat/completions", {{"functions", json::array()}}, "functions"},
      {"/v1/chat/completions", {{"store", true}}, "store"},
      {"/v1/chat/completions", {{"service_tier", "flex"}}, "service_tier"},
      {"/v1/chat/completions", {{"modalities", {"text", "audio"}}}, "modalities"},
      {"/v1/chat/completions",
       {{"stream", true}, {"stream_options", {{"bogus", 1}}}},
       "stream_options.bogus"},
      {"/v1/completions", {{"tools", weather_tools()}}, "tools"},
      {"/v1/completions", {{"tool_choice", "auto"}}, "tool_choice"},
      {"/v1/completions", {{"messages", json::array()}}, "messages"},
      {"/v1/completions", {{"chat_template_kwargs", json::object()}}, "chat_template_kwargs"},
  };
  for (const Case& c : cases) {
    json b =
        c.route == "/v1/completions" ? json{{"prompt", "Hi"}, {"max_tokens", 4}} : chat_body({}, 4);
    for (auto it = c.extra.begin(); it != c.extra.end(); ++it) b[it.key()] = it.value();
    auto r = post_json(port, c.route, b);
    EXPECT_EQ(r.status, 400) << b.dump() << " -> " << r.body;
    if (r.status != 400) continue;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
  }
  const json no_effect = {
      {"user", "u1"},           {"metadata", {{"k", "v"}}},   {"store", false},
      {"service_tier", "auto"}, {"prompt_cache_key", "k"},    {"safety_identifier", "s"},
      {"modalities", {"text"}}, {"unknown_but_null", nullptr}};
  json b = chat_body(no_effect, 4);
  EXPECT_EQ(post_json(port, "/v1/chat/completions", b).status, 200);
  b = {{"prompt", "Hi"}, {"max_tokens", 4}};
  for (auto it = no_effect.begin(); it != no_effect.end(); ++it) b[it.key()] = it.value();
  EXPECT_EQ(post_json(port, "/v1/completions", b).status, 200);
  EXPECT_EQ(http_request(port, "GET", "/health", "").status, 200);
}

TEST(StructuredOutput, StreamedToolCallsReassembleToTheSameCall) {
  const uint16_t port = shared_port();
  json body = chat_body({{"tools", weather_tools()},
                         {"tool_choice", "required"},
                         {"parallel_tool_calls", false},
                         {"seed", 7}},
                        200);
  auto whole = post_json(port, "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json expect = whole.json()["choices"][0]["message"]["tool_calls"][0];
  body["stream"] = true;
  auto r = post_json(port, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string name, args, id, finish, content;
  for (const SseEvent& e : parse_sse(r.body)) {
    if (e.data == "[DONE]") continue;
    json ck = json::parse(e.data);
    for (const json& ch : ck["choices"]) {
      const json& d = ch["delta"];
      if (d.contains("content") && d["content"].is_string())
        content += d["content"].get<std::string>();
      if (d.contains("tool_calls")) {
        for (const json& tc : d["tool_calls"]) {
          EXPECT_EQ(tc["index"], 0);
          if (tc.contains("id")) {
            EXPECT_TRUE(id.empty()) << "id sent twice";
            id = tc["id"];
            name = tc["function"]["name"];
          }
          if (tc["function"].contains("arguments"))
            args += tc["function"]["arguments"].get<std::string>();
        }
      }
      if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, "") << "tool-call markup leaked into content";
  EXPECT_EQ(name, expect["function"]["name"]);
  EXPECT_EQ(json::parse(args), json::parse(expect["function"]["arguments"].get<std::string>()));
}

TEST(StructuredOutput, ToolResultsRenderInAFollowUpTurn) {
  const uint16_t port = shared_port();
  json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"}
  ])");
  json b = {
      {"messages", messages}, {"tools", weather_tools()}, {"max_tokens", 8}, {"ignore_eos", true}};
  auto r = post_json(port, "/v1/chat/completions", b);
  ASSERT_EQ(r.status, 200) << r.body;
}

// vLLM's structural tag: free text, and whatever follows a trigger is the tagged structure.
// The trigger's characters get a logit bias so that the random model writes it often.
TEST(StructuredOutput, StructuralTagConstrainsTextAfterItsTrigger) {
  const uint16_t port = shared_port();
  auto ids = post_json(port, "/tokenize", {{"prompt", "<f="}, {"add_special_tokens", false}});
  ASSERT_EQ(ids.status, 200) << ids.body;
  const json tokens = ids.json()["tokens"];
  ASSERT_TRUE(tokens.is_array() && !tokens.empty()) << ids.body;
  json bias = json::object();
  for (const json& t : tokens) bias[std::to_string(t.get<int>())] = 9;
  json tag = json::parse(R"({"type": "structural_tag", "triggers": ["<f="],
    "structures": [{"begin": "<f=add>", "schema": {"type": "object", "properties":
      {"a": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["a"],
      "additionalProperties": false}, "end": "</f>"}]})");
  const std::regex whole("<f=add>\\{\"a\":(0|[1-9][0-9]?)\\}</f>");
  int structures = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    auto r = post_json(port, "/v1/completions",
                       {{"prompt", "Call"},
                        {"max_tokens", 80},
                        {"seed", seed},
                        {"logit_bias", bias},
                        {"response_format", tag}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.json()["choices"][0]["text"];
    // Every trigger starts a whole structure, unless the text ran out inside it.
    for (size_t p = text.find("<f="); p != std::string::npos; p = text.find("<f=", p + 1)) {
      const std::string rest = text.substr(p);
      std::smatch m;
      if (std::regex_search(rest, m, whole, std::regex_constants::match_continuous)) {
        ++structures;
      } else {
        EXPECT_LT(rest.size(), 20u) << "an incomplete structure before the end: " << text;
      }
    }
  }
  EXPECT_GE(structures, 3) << "the biased model should open the structure a few times";
}

// A reasoning model with thinking turned off: the answer itself is constrained, and nothing
// is reported as reasoning.
TEST(StructuredOutput, SchemaAppliesWhenThinkingIsOff) {
  server::ServerOptions so;
  so.chat_template =
      "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{%- endfor -%}"
      "{%- if add_generation_prompt -%}<|assistant|>"
      "{%- if enable_thinking is defined and not enable_thinking -%}<think>\n\n</think>\n\n{%- "
      "endif -%}"
      "{%- endif -%}";
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  json rf = {{"type", "json_schema"},
             {"json_schema", {{"name", "person"}, {"schema", person_schema()}}}};
  for (int seed = 1; seed <= 3; ++seed) {
    auto r = post_json(s->port(), "/v1/chat/completions",
                       chat_body({{"response_format", rf},
                                  {"seed", seed},
                                  {"chat_template_kwargs", {{"enable_thinking", false}}}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const json m = r.json()["choices"][0]["message"];
    EXPECT_TRUE(m["reasoning_content"].is_null()) << r.body;
    expect_person(m["content"].get<std::string>());
  }
  s->stop();
}

TEST(StructuredOutput, BadConstraintsAre400sNamingTheField) {
  const uint16_t port = shared_port();
  struct Case {
    json extra;
    std::string param;
    std::string in_message;
  };
  const json schema_rf = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "x"},
        {"schema", {{"type", "object"}, {"patternProperties", {{"^a", {{"type", "string"}}}}}}}}}};
  const std::vector<Case> cases = {
      {{{"response_format", schema_rf}}, "response_format", "patternProperties"},
      {{{"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", 5}}}}}}}},
       "response_format",
       "type"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format", "yaml"},
      {{{"guided_regex", "(a)\\1"}}, "guided_regex", "backreference"},
      {{{"guided_choice", json::array()}}, "guided_choice", "guided_choice"},
      {{{"guided_json", {{"type", "object"}}}, {"guided_regex", "a"}}, "guided_regex", "only one"},
      {{{"structured_outputs", {{"yaml", "x"}}}}, "structured_outputs", "yaml"},
      {{{"grammar", "root ::= undefined-rule"}}, "grammar", "undefined-rule"},
      {{{"tools", weather_tools()},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice",
       "nope"},
      {{{"tool_choice", "required"}}, "tool_choice", "tools"},
      {{{"tool_choice", "sometimes"}}, "tool_choice", "sometimes"},
      {{{"tools",
         json::parse(
             R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"strung"}}}}}])")}},
       "tools",
       "strung"},
      {{{"tools", json::parse(R"([{"type":"function","function":{"name":"bad name!"}}])")}},
       "tools",
       "bad name!"},
      {{{"tools", json::parse(R"([{"type":"retrieval"}])")}}, "tools", "type"},
  };
  for (const Case& c : cases) {
    auto r = post_json(port, "/v1/chat/completions", chat_body(c.extra));
    EXPECT_EQ(r.status, 400) << c.extra.dump() << " -> " << r.body;
    if (r.status != 400) continue;
    json e = r.json()["error"];
    EXPECT_EQ(e["param"], c.param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(c.in_message), std::string::npos) << r.body;
  }
  auto h = http_request(port, "GET", "/health", "");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

}  // namespace
}  // namespace loom::test
