// gpt-oss's harmony format through /v1/chat/completions, on synth's tiny-gpt-oss (random
// weights; a placeholder vocabulary whose last ids are harmony's control tokens, <|return|> and
// <|call|> ending generation) serving gpt-oss's real chat template (tests/data/chat_templates):
//   - tool_choice "required" or a named function: the grammar makes the random model write a
//     commentary message to functions.NAME; the answer is that call (its arguments valid for the
//     tool's schema), finish_reason "tool_calls", no markup in content, the stream the same;
//   - a response_format answer: an analysis message is reasoning_content, the final one content,
//     each exactly the body the model wrote (read back from the logprobs' bytes);
//   - cut by max_tokens anywhere, or unconstrained and strewing markers, no marker reaches the
//     client and streams add up to the whole answer;
//   - the call sent back with the tool's result is the next turn's prompt;
//   - reasoning_effort reaches the template; a bad one is a 400 naming the field.
// The random model, left alone, writes analysis until max_tokens (it picks <|end|> about once
// in 500 tokens): the requests raise harmony's control tokens by kMarkerBias, which under a
// grammar only acts where it allows a marker, so messages end sooner; what the call or answer
// holds is still the grammar's and the model's.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

constexpr int32_t kMaxModelLen = 1024;
constexpr int kMarkerBias = 5;
const char* const kHarmonyMarkers[] = {"<|start|>",     "<|end|>",    "<|message|>", "<|channel|>",
                                       "<|constrain|>", "<|return|>", "<|call|>"};

std::string gpt_oss_template() {
  std::ifstream f(std::string(LOOM_TEST_DATA) + "/chat_templates/openai-gpt-oss-120b.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// gpt-oss's template prints every tool's description: a tool without one is its template
// error, as in Jinja2.
const json kWeather = json::parse(R"({"type": "function", "function": {
    "name": "get_weather", "description": "Weather",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["paris", "rome"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                   "required": ["city"], "additionalProperties": false}}})");
const json kTime = json::parse(R"({"type": "function", "function": {
    "name": "get_time", "description": "Time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 4}},
                   "required": ["zone"], "additionalProperties": false}}})");

// Checks `arguments` against kWeather's or kTime's parameters by hand.
void expect_valid_arguments(const std::string& name, const std::string& arguments) {
  const json a = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(a.is_object()) << arguments;
  if (name == "get_weather") {
    ASSERT_TRUE(a.contains("city")) << arguments;
    EXPECT_TRUE(a["city"] == "paris" || a["city"] == "rome") << arguments;
    for (auto it = a.begin(); it != a.end(); ++it) {
      EXPECT_TRUE(it.key() == "city" || it.key() == "days") << arguments;
      if (it.key() == "days") {
        ASSERT_TRUE(it->is_number_integer()) << arguments;
        EXPECT_GE(it->get<int64_t>(), 1) << arguments;
        EXPECT_LE(it->get<int64_t>(), 7) << arguments;
      }
    }
  } else {
    ASSERT_EQ(name, "get_time");
    ASSERT_EQ(a.size(), 1u) << arguments;
    ASSERT_TRUE(a.contains("zone") && a["zone"].is_string()) << arguments;
    size_t code_points = 0;
    for (unsigned char c : a["zone"].get<std::string>()) code_points += (c & 0xC0) != 0x80;
    EXPECT_LE(code_points, 4u) << arguments;
  }
}

bool has_markup(const std::string& s) {
  for (const char* m : kHarmonyMarkers)
    if (s.find(m) != std::string::npos) return true;
  return s.find("to=functions") != std::string::npos;
}

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r";
  const size_t b = s.find_first_not_of(ws);
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(ws) + 1 - b);
}

// An answer as the client sees it, whole or added up from a stream.
struct Answer {
  std::string content, reasoning;
  json calls = json::array();  // [{name, arguments}]
  json finish;
  bool operator==(const Answer&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Answer& a) {
  return os << "content " << json(a.content) << ", reasoning " << json(a.reasoning) << ", calls "
            << a.calls << ", finish " << a.finish;
}

Answer from_message(const json& choice) {
  const json& m = choice["message"];
  Answer a;
  if (m["content"].is_string()) a.content = m["content"];
  if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
    a.reasoning = m["reasoning_content"];
  for (const json& c : m.value("tool_calls", json::array())) {
    EXPECT_EQ(c["type"], "function") << c;
    EXPECT_TRUE(c["id"].is_string() && !c["id"].get<std::string>().empty()) << c;
    a.calls.push_back({{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}});
  }
  a.finish = choice["finish_reason"];
  return a;
}

Answer from_stream(const std::string& body) {
  Answer a;
  for (const SseEvent& e : parse_sse(body)) {
    if (e.data == "[DONE]") continue;
    const json ch = json::parse(e.data)["choices"][0];
    const json& d = ch["delta"];
    if (d.contains("content") && d["content"].is_string()) a.content += d["content"];
    if (d.contains("reasoning_content") && d["reasoning_content"].is_string())
      a.reasoning += d["reasoning_content"];
    for (const json& t : d.value("tool_calls", json::array())) {
      const size_t index = t["index"];
      if (t.contains("id")) {
        EXPECT_EQ(index, a.calls.size()) << body;
        a.calls.push_back({{"name", t["function"]["name"]}, {"arguments", ""}});
      }
      if (index >= a.calls.size()) {
        ADD_FAILURE() << "delta for a call never started: " << body;
        continue;
      }
      a.calls[index]["arguments"] =
          a.calls[index]["arguments"].get<std::string>() + t["function"].value("arguments", "");
    }
    if (!ch["finish_reason"].is_null()) a.finish = ch["finish_reason"];
  }
  return a;
}

// What the model generated, markers included: the logprobs' bytes, token by token.
std::string generated_text(const json& choice) {
  std::string out;
  for (const json& t : choice["logprobs"]["content"])
    for (const json& b : t["bytes"]) out += static_cast<char>(b.get<int>());
  return out;
}

// The body of the message whose header ends with `header`, up to the marker that ends it (or
// the end).
std::string body_after(const std::string& text, const std::string& header) {
  const size_t h = text.find(header);
  if (h == std::string::npos) return "";
  const size_t b = h + header.size();
  size_t e = text.size();
  for (const char* end : {"<|end|>", "<|return|>", "<|call|>"}) e = std::min(e, text.find(end, b));
  return text.substr(b, e - b);
}

class HarmonyServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = start_template_server(gpt_oss_template(), kMaxModelLen, "synth:tiny-gpt-oss");
    ASSERT_NE(s, nullptr);
    server_ = s.release();
    // Each marker is one control token; look their ids up rather than assume them.
    for (const char* m : kHarmonyMarkers) {
      auto r = post_json(port(), "/tokenize", {{"prompt", m}, {"add_special_tokens", false}});
      ASSERT_EQ(r.status, 200) << r.body;
      ASSERT_EQ(r.json()["tokens"].size(), 1u) << m << ": " << r.body;
      marker_bias_[std::to_string(r.json()["tokens"][0].get<int32_t>())] = kMarkerBias;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }

  static json request(json messages, int seed) {
    return {{"messages", std::move(messages)},
            {"max_tokens", 160},
            {"temperature", 1.0},
            {"seed", seed},
            {"logit_bias", marker_bias_}};
  }

  // The answer to `body` whole (with logprobs, for the generated text) and streamed; fails the
  // test where the two differ.
  static Answer ask(json body, std::string* generated = nullptr) {
    body["logprobs"] = true;
    auto r = post_json(port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return {};
    const json choice = r.json()["choices"][0];
    const Answer whole = from_message(choice);
    if (generated) *generated = generated_text(choice);
    body.erase("logprobs");
    body["stream"] = true;
    auto st = post_json(port(), "/v1/chat/completions", body);
    EXPECT_EQ(st.status, 200) << st.body;
    EXPECT_EQ(from_stream(st.body), whole) << st.body;
    return whole;
  }

  static inline server::Server* server_ = nullptr;
  static inline json marker_bias_ = json::object();
};

const json kAskWeather = json::array({{{"role", "user"}, {"content", "weather?"}}});

void expect_one_call(const Answer& a, const std::string& name, const std::string& generated) {
  EXPECT_EQ(a.finish, "tool_calls") << a;
  EXPECT_EQ(a.content, "") << a;
  EXPECT_FALSE(has_markup(a.reasoning)) << a;
  ASSERT_EQ(a.calls.size(), 1u) << a;
  EXPECT_EQ(a.calls[0]["name"], name) << a;
  const std::string arguments = a.calls[0]["arguments"];
  expect_valid_arguments(name, arguments);
  // The call is the commentary message the model wrote, its arguments that message's body.
  const std::string header =
      "<|channel|>commentary to=functions." + name + " <|constrain|>json" + "<|message|>";
  ASSERT_NE(generated.find(header), std::string::npos) << generated;
  EXPECT_EQ(json::parse(body_after(generated, header), nullptr, false),
            json::parse(arguments, nullptr, false))
      << generated;
}

TEST_F(HarmonyServer, RequiredToolCallIsParsedAndStreamed) {
  int with_analysis = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json body = request(kAskWeather, seed);
    body["tools"] = {kWeather};
    body["tool_choice"] = "required";
    std::string generated;
    const Answer a = ask(body, &generated);
    expect_one_call(a, "get_weather", generated);
    with_analysis += !a.reasoning.empty();
    EXPECT_EQ(a.reasoning, trim(body_after(generated, "<|channel|>analysis<|message|>")));
  }
  EXPECT_GT(with_analysis, 0);  // some calls came after reasoning
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

// Cut by max_tokens anywhere in the answer (analysis, the call's header, its arguments): the
// markup is never content or reasoning, a call is reported only once its name was read (then
// with the arguments written so far, finish_reason "length"), and the stream says the same.
TEST_F(HarmonyServer, CutAnswerLeavesNoMarkup) {
  json body = request(kAskWeather, 1);
  body["tools"] = {kWeather};
  body["tool_choice"] = "required";
  auto full = post_json(port(), "/v1/chat/completions", body);
  ASSERT_EQ(full.status, 200) << full.body;
  const int n = full.json()["usage"]["completion_tokens"];
  int cut_calls = 0;
  for (int max_tokens = 1; max_tokens < n; ++max_tokens) {
    SCOPED_TRACE("max_tokens " + std::to_string(max_tokens));
    body["max_tokens"] = max_tokens;
    const Answer a = ask(body);
    EXPECT_EQ(a.finish, "length") << a;
    EXPECT_EQ(a.content, "") << a;
    EXPECT_FALSE(has_markup(a.reasoning)) << a;
    ASSERT_LE(a.calls.size(), 1u) << a;
    if (a.calls.empty()) continue;
    EXPECT_EQ(a.calls[0]["name"], "get_weather") << a;
    EXPECT_FALSE(has_markup(a.calls[0]["arguments"])) << a;
    cut_calls +=
        json::parse(a.calls[0]["arguments"].get<std::string>(), nullptr, false).is_discarded();
  }
  EXPECT_GT(cut_calls, 0);
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

// Unconstrained (tool_choice auto, no response_format), the random model strews harmony's
// markers anywhere: whatever the parser makes of them, no marker reaches the client and the
// stream adds up to the whole answer.
TEST_F(HarmonyServer, FreeTextNeverLeaksMarkers) {
  for (int seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json body = request(kAskWeather, seed);
    body["max_tokens"] = 48;
    body["tools"] = {kWeather};
    std::string generated;
    const Answer a = ask(body, &generated);
    EXPECT_FALSE(has_markup(a.content)) << a << "\ngenerated: " << generated;
    EXPECT_FALSE(has_markup(a.reasoning)) << a;
    for (const json& c : a.calls) {
      EXPECT_FALSE(has_markup(c["name"])) << a;
      EXPECT_FALSE(has_markup(c["arguments"])) << a;
    }
  }
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

// Either of two tools, by name: each time the named one is called.
TEST_F(HarmonyServer, NamedFunctionIsTheOneCalled) {
  for (const std::string name : {"get_time", "get_weather"}) {
    for (int seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      json body = request(kAskWeather, seed);
      body["tools"] = {kWeather, kTime};
      body["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
      std::string generated;
      expect_one_call(ask(body, &generated), name, generated);
    }
  }
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

const json kCitySchema = {
    {"type", "json_schema"},
    {"json_schema",
     {{"name", "city"},
      {"schema", json::parse(R"({"type": "object", "properties": {"city": {"enum": ["paris",
          "rome"]}}, "required": ["city"], "additionalProperties": false})")}}}};

// The analysis message is reasoning_content and the final one content, each the body the model
// wrote; the answer follows response_format.
TEST_F(HarmonyServer, AnalysisIsReasoningFinalIsContent) {
  int with_reasoning = 0, final_only = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    json body = request(kAskWeather, seed);
    body["response_format"] = kCitySchema;
    std::string generated;
    const Answer a = ask(body, &generated);
    EXPECT_EQ(a.finish, "stop") << a;
    EXPECT_TRUE(a.calls.empty()) << a;
    const json doc = json::parse(a.content, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << a;
    EXPECT_TRUE(doc["city"] == "paris" || doc["city"] == "rome") << a;
    EXPECT_EQ(a.content, trim(body_after(generated, "<|channel|>final<|message|>"))) << generated;
    EXPECT_EQ(a.reasoning, trim(body_after(generated, "<|channel|>analysis<|message|>")))
        << generated;
    EXPECT_FALSE(has_markup(a.reasoning)) << a;
    with_reasoning += !a.reasoning.empty();
    final_only += generated.find("analysis") == std::string::npos;
  }
  // Both of the grammar's paths were taken, and some analysis had text.
  EXPECT_GT(with_reasoning, 0);
  EXPECT_GT(final_only, 0);
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

// The assistant's call sent back as the client got it (content null, reasoning_content, the
// arguments a JSON string) with the tool's result: the template renders it as harmony's call
// and result messages, and the next turn answers.
TEST_F(HarmonyServer, ToolCallRoundTripsAsTheNextTurnsPrompt) {
  json body = request(kAskWeather, 1);
  body["tools"] = {kWeather};
  body["tool_choice"] = "required";
  auto r = post_json(port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json msg = r.json()["choices"][0]["message"];
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << r.body;
  json messages = kAskWeather;
  messages.push_back(msg);
  messages.push_back({{"role", "tool"},
                      {"tool_call_id", msg["tool_calls"][0]["id"]},
                      {"content", "{\"temp\": 21}"}});

  auto tok = post_json(port(), "/tokenize", {{"messages", messages}, {"tools", {kWeather}}});
  ASSERT_EQ(tok.status, 200) << tok.body;
  const json tokenized = tok.json();
  auto detok = post_json(port(), "/detokenize", {{"tokens", tokenized["tokens"]}});
  ASSERT_EQ(detok.status, 200) << detok.body;
  const std::string prompt = detok.json()["prompt"];
  // The template writes the arguments back with tojson (sorted keys, ", " and ": ") and the
  // result as a JSON string.
  const json arguments =
      json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>());
  std::string args;
  for (const auto& [k, v] : arguments.items())
    args += (args.empty() ? "{" : ", ") + json(k).dump() + ": " + v.dump();
  args += "}";
  EXPECT_NE(prompt.find("<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                        "<|message|>" +
                        args +
                        "<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary"
                        "<|message|>\"{\\\"temp\\\": 21}\"<|end|><|start|>assistant"),
            std::string::npos)
      << prompt;
  const std::string reasoning = msg["reasoning_content"].is_string()
                                    ? msg["reasoning_content"].get<std::string>()
                                    : std::string();
  if (!reasoning.empty()) {
    EXPECT_NE(prompt.find("<|channel|>analysis<|message|>" + reasoning + "<|end|>"),
              std::string::npos)
        << prompt;
  }

  json next = request(messages, 2);
  next["tools"] = {kWeather};
  next["tool_choice"] = "none";
  next["response_format"] = kCitySchema;
  auto n = post_json(port(), "/v1/chat/completions", next);
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.json()["usage"]["prompt_tokens"], tokenized["count"]) << n.body;
  const Answer a = from_message(n.json()["choices"][0]);
  EXPECT_EQ(a.finish, "stop") << a;
  EXPECT_TRUE(a.calls.empty()) << a;
  EXPECT_TRUE(json::parse(a.content, nullptr, false).is_object()) << a;
}

// reasoning_effort is the template's variable ("Reasoning: high" in the system message): the
// prompt is the one chat_template_kwargs gives; a bad value is a 400 naming the field.
TEST_F(HarmonyServer, ReasoningEffort) {
  auto prompt_tokens = [&](const std::string& effort) {
    json body = request(kAskWeather, 1);
    body["max_tokens"] = 1;
    body["reasoning_effort"] = effort;
    auto r = post_json(port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    auto t = post_json(
        port(), "/tokenize",
        {{"messages", kAskWeather}, {"chat_template_kwargs", {{"reasoning_effort", effort}}}});
    EXPECT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(r.json()["usage"]["prompt_tokens"], t.json()["count"]) << effort;
    return r.json()["usage"]["prompt_tokens"].get<int>();
  };
  EXPECT_NE(prompt_tokens("low"), prompt_tokens("high"));

  json body = request(kAskWeather, 1);
  body["reasoning_effort"] = "extreme";
  auto r = post_json(port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 400) << r.body;
  const json err = r.json()["error"];
  EXPECT_EQ(err["param"], "reasoning_effort") << r.body;
  EXPECT_NE(err["message"].get<std::string>().find("reasoning_effort"), std::string::npos)
      << r.body;
  EXPECT_NE(err["message"].get<std::string>().find("extreme"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace loom::test
