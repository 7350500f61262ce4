// Ollama's API over HTTP on the shared test server (synth:tiny, the test chat template) and on
// one with a reasoning template: the listing routes, /api/generate and /api/chat in NDJSON
// streams and single objects (the same text either way, Ollama's field names and done
// reasons, counts that add up, context ids that continue a conversation), `format` giving
// JSON, `think`, and every unsupported input a 4xx {"error": "..."} with the server healthy.
#include <gtest/gtest.h>

#include <sstream>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

// NDJSON lines, each parsed.
std::vector<json> lines(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  std::string l;
  while (std::getline(in, l)) {
    if (l.empty()) continue;
    out.push_back(json::parse(l, nullptr, false));
    EXPECT_FALSE(out.back().is_discarded()) << l;
  }
  return out;
}

void expect_error(const HttpResult& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = r.json();
  ASSERT_TRUE(j.contains("error") && j["error"].is_string()) << r.body;
  EXPECT_NE(j["error"].get<std::string>().find(needle), std::string::npos) << r.body;
}

TEST(Ollama, VersionTagsPsShow) {
  const uint16_t port = shared_port();
  auto v = http_request(port, "GET", "/api/version");
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(v.json()["version"], "0.1.0");
  auto lv = http_request(port, "GET", "/version").json();
  EXPECT_EQ(lv["version"], "0.1.0");
  EXPECT_TRUE(lv["commit"].is_string() && !lv["commit"].get<std::string>().empty()) << lv;
  EXPECT_TRUE(lv["compiler"].is_string()) << lv;

  for (const char* path : {"/api/tags", "/api/ps"}) {
    auto t = http_request(port, "GET", path);
    ASSERT_EQ(t.status, 200) << t.body;
    const json m = t.json()["models"][0];
    EXPECT_EQ(m["name"], kTestModelName) << path;
    EXPECT_EQ(m["model"], kTestModelName) << path;
    EXPECT_GT(m["size"].get<int64_t>(), 0) << path;
    EXPECT_EQ(m["details"]["format"], "gguf") << path;
    EXPECT_EQ(m["details"]["family"], "llama") << path;
    // synth:tiny is written with every matrix F32 (general.file_type 0, LLAMA_FTYPE_ALL_F32).
    EXPECT_EQ(m["details"]["quantization_level"], "F32") << path;
  }
  auto s = post_json(port, "/api/show", {{"model", kTestModelName}});
  ASSERT_EQ(s.status, 200) << s.body;
  const json show = s.json();
  EXPECT_EQ(show["template"], kTestChatTemplate);
  EXPECT_EQ(show["model_info"]["general.architecture"], "llama");
  EXPECT_EQ(show["model_info"]["llama.context_length"], kTestMaxModelLen);
  EXPECT_EQ(show["model_info"]["general.file_type"], 0);
  EXPECT_EQ(show["capabilities"][0], "completion");
  expect_error(post_json(port, "/api/show", {{"model", "other"}}), 404, "not found");
}

TEST(Ollama, GenerateStreamsWhatTheSingleObjectHolds) {
  const uint16_t port = shared_port();
  const json body = {{"model", kTestModelName},
                     {"prompt", "Why is the sky blue?"},
                     {"options", {{"temperature", 0}, {"num_predict", 12}, {"seed", 3}}}};
  json once = body;
  once["stream"] = false;
  auto r = post_json(port, "/api/generate", once);
  ASSERT_EQ(r.status, 200) << r.body;
  const json whole = r.json();
  EXPECT_EQ(whole["model"], kTestModelName);
  EXPECT_EQ(whole["done"], true);
  EXPECT_EQ(whole["done_reason"], "length");
  EXPECT_EQ(whole["eval_count"], 12);
  EXPECT_GT(whole["prompt_eval_count"].get<int64_t>(), 0);
  EXPECT_GT(whole["total_duration"].get<int64_t>(), 0);
  for (const char* k : {"load_duration", "prompt_eval_duration", "eval_duration"})
    EXPECT_TRUE(whole[k].is_number_integer()) << k;
  const std::string created = whole["created_at"].get<std::string>();
  EXPECT_EQ(created.size(), 30u) << created;  // 2026-12-02T09:10:11.123456789Z
  EXPECT_EQ(created.back(), 'Z');
  // context: the prompt's ids then the output's.
  EXPECT_EQ(whole["context"].size(),
            whole["prompt_eval_count"].get<size_t>() + whole["eval_count"].get<size_t>());

  auto st = post_json(port, "/api/generate", body);  // streams by default
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.headers["content-type"], "application/x-ndjson");
  const std::vector<json> ls = lines(st.body);
  ASSERT_GE(ls.size(), 2u);
  std::string text;
  for (size_t i = 0; i + 1 < ls.size(); ++i) {
    EXPECT_EQ(ls[i]["done"], false) << ls[i];
    text += ls[i]["response"].get<std::string>();
  }
  const json& last = ls.back();
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["done_reason"], "length");
  EXPECT_EQ(last["response"], "");
  EXPECT_EQ(text, whole["response"].get<std::string>());
  EXPECT_EQ(last["context"], whole["context"]);

  // The next turn continues from the returned context: its prompt counts those ids too.
  json next = once;
  next["prompt"] = "And the sea?";
  next["context"] = whole["context"];
  auto n = post_json(port, "/api/generate", next);
  ASSERT_EQ(n.status, 200) << n.body;
  json alone = once;
  alone["prompt"] = "And the sea?";
  auto a = post_json(port, "/api/generate", alone);
  EXPECT_EQ(n.json()["prompt_eval_count"].get<size_t>(),
            a.json()["prompt_eval_count"].get<size_t>() + whole["context"].size());
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

TEST(Ollama, ChatStreamsAndStops) {
  const uint16_t port = shared_port();
  const json body = {{"model", kTestModelName},
                     {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", "Hi"}}})},
                     {"options", {{"temperature", 0}, {"num_predict", 10}}}};
  json once = body;
  once["stream"] = false;
  auto r = post_json(port, "/api/chat", once);
  ASSERT_EQ(r.status, 200) << r.body;
  const json whole = r.json();
  EXPECT_EQ(whole["message"]["role"], "assistant");
  EXPECT_EQ(whole["done"], true);
  EXPECT_FALSE(whole.contains("context"));
  auto st = post_json(port, "/api/chat", body);
  ASSERT_EQ(st.status, 200) << st.body;
  std::string text;
  const std::vector<json> ls = lines(st.body);
  for (const json& l : ls) text += l["message"]["content"].get<std::string>();
  EXPECT_EQ(text, whole["message"]["content"].get<std::string>());
  EXPECT_EQ(ls.back()["done_reason"], whole["done_reason"]);
  // A stop string from the answer ends it with done_reason "stop", the stop text cut.
  const std::string t = whole["message"]["content"].get<std::string>();
  const std::string mid = utf8_middle(t, 2);
  EXPECT_NE(mid, t) << "the answer is too short to cut";
  if (mid != t) {
    json stop = once;
    stop["options"]["stop"] = json::array({mid});
    auto s = post_json(port, "/api/chat", stop);
    ASSERT_EQ(s.status, 200) << s.body;
    EXPECT_EQ(s.json()["done_reason"], "stop");
    EXPECT_EQ(s.json()["message"]["content"], t.substr(0, t.find(mid)));
  }
  // Nothing to say: the model is loaded (Ollama's "load" answer).
  auto load =
      post_json(port, "/api/chat", {{"model", kTestModelName}, {"messages", json::array()}});
  ASSERT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(load.json()["done_reason"], "load");
  auto gload = post_json(port, "/api/generate", {{"model", kTestModelName}});
  EXPECT_EQ(gload.json()["done_reason"], "load");
}

TEST(Ollama, FormatJsonGivesJson) {
  const uint16_t port = shared_port();
  int complete = 0;
  // The schema bounds its document (so it must end); any JSON object may run to num_predict.
  const json schema = {
      {"type", "object"},
      {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
      {"required", {"n"}},
      {"additionalProperties", false}};
  for (const json& format : {schema, json("json")}) {
    auto r = post_json(port, "/api/generate",
                       {{"model", kTestModelName},
                        {"prompt", "Give JSON"},
                        {"format", format},
                        {"stream", false},
                        {"options", {{"temperature", 0.8}, {"seed", 5}, {"num_predict", 200}}}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    if (format.is_object()) {
      EXPECT_EQ(j["done_reason"], "stop") << j;
    }
    if (j["done_reason"] != "stop") continue;  // cut by num_predict: only "stop" is complete
    const json doc = json::parse(j["response"].get<std::string>(), nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << j["response"];
    ASSERT_TRUE(doc.is_object()) << doc;
    if (format.is_object()) {
      EXPECT_TRUE(doc["n"].is_number_integer()) << doc;
    }
    ++complete;
  }
  EXPECT_GE(complete, 1);
}

TEST(Ollama, ThinkGoesToItsOwnField) {
  // The test model speaks inside <think> when the prompt opens it (a DeepSeek-R1-style
  // template): that text is "thinking", never "content".
  server::ServerOptions so;
  so.chat_template = kTestReasoningChatTemplate;
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  auto r = post_json(s->port(), "/api/chat",
                     {{"model", kTestModelName},
                      {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                      {"think", true},
                      {"stream", false},
                      {"options", {{"temperature", 0}, {"num_predict", 8}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.json()["message"];
  EXPECT_FALSE(m["thinking"].get<std::string>().empty()) << m;
  EXPECT_EQ(m["content"], "") << m;
  auto show = post_json(s->port(), "/api/show", {{"model", kTestModelName}}).json();
  EXPECT_NE(std::find(show["capabilities"].begin(), show["capabilities"].end(), "thinking"),
            show["capabilities"].end())
      << show;
  s->stop();
  // The shared server's template does not reason: think is refused.
  expect_error(post_json(shared_port(), "/api/chat",
                         {{"model", kTestModelName},
                          {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                          {"think", true}}),
               400, "does not support thinking");
}

TEST(Ollama, BadInputIsA4xxWithOllamasErrorShape) {
  const uint16_t port = shared_port();
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  struct Case {
    const char* path;
    json body;
    int status;
    const char* needle;
  };
  const Case cases[] = {
      {"/api/generate", {{"prompt", "x"}, {"options", {{"num_gpu", 1}}}}, 400, "load-time"},
      {"/api/generate", {{"prompt", "x"}, {"options", {{"mirostat", 1}}}}, 400, "mirostat"},
      {"/api/generate",
       {{"prompt", "x"}, {"options", {{"temperature", "hot"}}}},
       400,
       "temperature"},
      {"/api/generate",
       {{"prompt", "x"}, {"options", {{"repeat_last_n", 64}}}},
       400,
       "repeat_last_n"},
      {"/api/generate", {{"prompt", "x"}, {"options", {{"num_ctx", 100000}}}}, 400, "num_ctx"},
      {"/api/generate", {{"prompt", "x"}, {"images", {"aGk="}}}, 400, "images"},
      {"/api/generate", {{"prompt", "x"}, {"suffix", "y"}}, 400, "suffix"},
      {"/api/generate", {{"prompt", "x"}, {"template", "{{ .Prompt }}"}}, 400, "template"},
      {"/api/generate", {{"prompt", "x"}, {"format", "yaml"}}, 400, "format"},
      {"/api/generate",
       {{"prompt", "x"}, {"format", {{"type", "object"}, {"not", {}}}}},
       400,
       "format"},
      {"/api/generate", {{"prompt", "x"}, {"context", {-1}}}, 400, "context"},
      {"/api/generate", {{"prompt", "x"}, {"bogus", 1}}, 400, "bogus"},
      {"/api/generate", {{"prompt", "x"}, {"model", "other"}}, 404, "other"},
      {"/api/chat", {{"messages", "hi"}}, 400, "messages"},
      {"/api/chat",
       {{"messages", json::array({{{"role", "user"}, {"content", "x"}, {"images", {"aGk="}}}})}},
       400,
       "images"},
      {"/api/chat", {{"messages", msgs}, {"think", "very"}}, 400, "think"},
      {"/api/chat", {{"messages", msgs}, {"keep_alive", json::array()}}, 400, "keep_alive"},
      // Ollama parses keep_alive as a Go duration: a word is not one.
      {"/api/chat", {{"messages", msgs}, {"keep_alive", "forever"}}, 400, "keep_alive"},
      {"/api/chat", {{"messages", msgs}, {"keep_alive", "5"}}, 400, "keep_alive"},
      {"/api/generate", {{"prompt", "x"}, {"options", {{"num_predict", 0}}}}, 400, "num_predict"},
      {"/api/generate",
       {{"prompt", "x"}, {"options", {{"seed", 18446744073709551615ull}}}},
       400,
       "options.seed must be in ["},
  };
  for (const Case& c : cases) {
    json body = c.body;
    if (!body.contains("model")) body["model"] = kTestModelName;
    expect_error(post_json(port, c.path, body), c.status, c.needle);
  }
  // Ollama: 400 "model is required" on generation and show requests without one.
  expect_error(post_json(port, "/api/chat", {{"messages", msgs}}), 400, "model is required");
  expect_error(post_json(port, "/api/generate", {{"prompt", "x"}}), 400, "model is required");
  expect_error(post_json(port, "/api/show", json::object()), 400, "model is required");
  expect_error(post_json(port, "/api/show", {{"model", kTestModelName}, {"bogus", 1}}), 400,
               "bogus");
  auto bad = http_request(port, "POST", "/api/chat", "{not json");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_TRUE(bad.json()["error"].is_string()) << bad.body;
  // Go durations, seconds (negative: forever) and images: null (like absent) are fine.
  for (const json& keep :
       {json("1h30m"), json("300ms"), json("-1m"), json("0"), json(-1), json(0), json(3600)}) {
    auto k = post_json(
        port, "/api/chat",
        {{"model", kTestModelName},
         {"messages", json::array({{{"role", "user"}, {"content", "Hi"}, {"images", nullptr}}})},
         {"keep_alive", keep},
         {"stream", false},
         {"options", {{"num_predict", 1}}}});
    EXPECT_EQ(k.status, 200) << keep << " -> " << k.body;
  }
  // keep_alive and an accepted option set are fine.
  auto ok = post_json(port, "/api/chat",
                      {{"model", kTestModelName},
                       {"messages", msgs},
                       {"keep_alive", "5m"},
                       {"stream", false},
                       {"options",
                        {{"num_predict", 2},
                         {"top_k", 20},
                         {"top_p", 0.9},
                         {"min_p", 0.05},
                         {"repeat_penalty", 1.1},
                         {"repeat_last_n", -1},
                         {"num_ctx", 128}}}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

}  // namespace
}  // namespace loom::test
