// Non-streaming routes over real HTTP: /health, /v1/models, /tokenize, /detokenize,
// /v1/completions (string, batch and token prompts, echo, logprobs, n, stop strings, usage),
// /v1/chat/completions (templates, kwargs, hostile templates), /metrics, auth, loading state.
#include <gtest/gtest.h>

#include <set>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

json completion(const json& body) {
  auto r = post_json(shared_port(), "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

std::vector<int32_t> tokenize(const std::string& text, bool add_special = true) {
  auto r = post_json(shared_port(), "/tokenize",
                     {{"prompt", text}, {"add_special_tokens", add_special}});
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json()["tokens"].get<std::vector<int32_t>>();
}

TEST(ServerRoutes, HealthAndModels) {
  auto h = http_request(shared_port(), "GET", "/health");
  EXPECT_EQ(h.status, 200);
  auto m = http_request(shared_port(), "GET", "/v1/models");
  ASSERT_EQ(m.status, 200) << m.body;
  json j = m.json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], kTestModelName);
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["root"], "synth:tiny");
  EXPECT_EQ(j["data"][0]["max_model_len"], kTestMaxModelLen);
}

TEST(ServerRoutes, TokenizeDetokenizeRoundTrip) {
  const std::string text = "Hello, loom server! ünïcödé";
  auto r = post_json(shared_port(), "/tokenize", {{"model", kTestModelName}, {"prompt", text}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  auto tokens = j["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(j["count"].get<size_t>(), tokens.size());
  EXPECT_EQ(j["max_model_len"], kTestMaxModelLen);
  ASSERT_FALSE(tokens.empty());
  // Without special tokens the ids decode back to the text exactly.
  auto plain = tokenize(text, false);
  auto d = post_json(shared_port(), "/detokenize", {{"model", kTestModelName}, {"tokens", plain}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.json()["prompt"], text);
  // messages go through the chat template.
  auto c = post_json(shared_port(), "/tokenize",
                     {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_EQ(c.status, 200) << c.body;
  auto chat_tokens = c.json()["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(chat_tokens, tokenize("<|user|>hi\n<|assistant|>", false));
}

size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

TEST(ServerRoutes, CompletionShapeAndUsage) {
  const std::string prompt = "The quick brown fox";
  json j = completion({{"model", kTestModelName},
                       {"prompt", prompt},
                       {"max_tokens", 12},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"logprobs", 3}});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], kTestModelName);
  EXPECT_TRUE(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  EXPECT_TRUE(j["created"].is_number_integer());
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_TRUE(c["text"].is_string());
  // usage counts are the real token counts: prompt via /tokenize, completion via logprobs.
  EXPECT_EQ(j["usage"]["prompt_tokens"].get<size_t>(), tokenize(prompt).size());
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 12);
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"]["cached_tokens"].is_number_integer());
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u);
  ASSERT_EQ(lp["token_logprobs"].size(), 12u);
  ASSERT_EQ(lp["top_logprobs"].size(), 12u);
  std::string joined;
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    // 3 top tokens + the sampled one, fewer when their texts coincide (a dict by text).
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 4u);
    // Offsets count characters (Python's len in OpenAI's and vLLM's servers), not bytes.
    EXPECT_EQ(lp["text_offset"][i].get<size_t>(), utf8_chars(joined)) << i;
    joined += lp["tokens"][i].get<std::string>();
  }
  // The tokens join into the text, word-start spaces included (a token decoded alone as the
  // start of a text would lose its SentencePiece space); a character split across tokens shows
  // as U+FFFD in each.
  if (joined.find("\xEF\xBF\xBD") == std::string::npos) {
    EXPECT_EQ(joined, c["text"]);
  }
  // Greedy: the sampled token is the most likely one.
  for (size_t i = 0; i < 12; ++i) {
    double best = -1e9;
    for (auto& [k, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), best, 1e-5)
        << i << " " << lp["top_logprobs"][i].dump(-1, ' ', true, json::error_handler_t::replace)
        << " tok " << lp["tokens"][i].dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

TEST(ServerRoutes, GreedyIsDeterministicAndEchoPrependsPrompt) {
  json body = {{"prompt", "abc"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
  json a = completion(body);
  json b = completion(body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  body["echo"] = true;
  json e = completion(body);
  EXPECT_EQ(e["choices"][0]["text"].get<std::string>(),
            "abc" + a["choices"][0]["text"].get<std::string>());
  // With logprobs (vLLM's): the prompt's tokens first, the first with null logprobs, then the
  // generated ones, whose offsets are into the echoed text: after the prompt's characters
  // ("h\u00e9 ok" is 5 of them in 6 bytes).
  body["prompt"] = "h\u00e9 ok";
  body["logprobs"] = 1;
  json l = completion(body);
  const json& lp = l["choices"][0]["logprobs"];
  const size_t n_prompt = tokenize("h\u00e9 ok").size();
  ASSERT_GE(n_prompt, 2u);
  ASSERT_EQ(lp["tokens"].size(), n_prompt + 8) << l.dump();
  ASSERT_EQ(lp["token_logprobs"].size(), n_prompt + 8);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0].get<size_t>(), 0u);
  for (size_t i = 1; i < n_prompt + 8; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0) << i;
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u) << i;
  }
  EXPECT_EQ(lp["text_offset"][n_prompt].get<size_t>(), 5u);
  // The prompt's scores do not depend on what follows: a shorter generation gives the same.
  body["max_tokens"] = 1;
  json l1 = completion(body);
  for (size_t i = 1; i < n_prompt; ++i)
    EXPECT_EQ(l1["choices"][0]["logprobs"]["token_logprobs"][i], lp["token_logprobs"][i]) << i;
}

// vLLM's prompt_logprobs field: per prompt token (null for the first) a dict keyed by token id
// holding the prompt token ({logprob, rank, decoded_token}) and the top k; the same values as
// echo's token_logprobs. Chat puts it at the top level. Not with stream (vLLM neither).
TEST(ServerRoutes, PromptLogprobsField) {
  const std::string prompt = "the quick brown fox";
  const std::vector<int32_t> ids = tokenize(prompt);
  json body = {{"prompt", prompt},   {"max_tokens", 2},      {"temperature", 0},
               {"ignore_eos", true}, {"prompt_logprobs", 2}, {"n", 2}};
  json j = completion(body);
  ASSERT_EQ(j["choices"].size(), 2u);
  const json& pl = j["choices"][1]["prompt_logprobs"];
  ASSERT_EQ(pl.size(), ids.size()) << j.dump();
  EXPECT_TRUE(pl[0].is_null());
  EXPECT_EQ(j["choices"][0]["prompt_logprobs"], pl);
  json echo = completion({{"prompt", prompt},
                          {"max_tokens", 2},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"echo", true},
                          {"logprobs", 1}});
  const json& echoed = echo["choices"][0]["logprobs"]["token_logprobs"];
  for (size_t i = 1; i < ids.size(); ++i) {
    const std::string key = std::to_string(ids[i]);
    ASSERT_TRUE(pl[i].contains(key)) << i << " " << pl[i].dump();
    EXPECT_GE(pl[i].size(), 2u);  // the top 2, the prompt token among them or beside them
    EXPECT_LE(pl[i].size(), 3u);
    EXPECT_EQ(pl[i][key]["logprob"], echoed[i]) << i;
    EXPECT_GE(pl[i][key]["rank"].get<int>(), 1);
    EXPECT_TRUE(pl[i][key]["decoded_token"].is_string());
  }
  // Chat: at the top level, one entry per prompt token of the rendered conversation.
  auto c = post_json(shared_port(), "/v1/chat/completions",
                     {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                      {"max_tokens", 1},
                      {"prompt_logprobs", 0}});
  ASSERT_EQ(c.status, 200) << c.body;
  ASSERT_EQ(c.json()["prompt_logprobs"].size(), c.json()["usage"]["prompt_tokens"].get<size_t>());
  EXPECT_FALSE(c.json()["choices"][0].contains("prompt_logprobs"));
  body["stream"] = true;
  auto s = post_json(shared_port(), "/v1/completions", body);
  EXPECT_EQ(s.status, 400);
  EXPECT_EQ(s.json()["error"]["param"], "prompt_logprobs") << s.body;
}

TEST(ServerRoutes, TokenPromptsBatchPromptsAndN) {
  auto ids = tokenize("once upon");
  json one =
      completion({{"prompt", ids}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}});
  json str = completion(
      {{"prompt", "once upon"}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(one["choices"][0]["text"], str["choices"][0]["text"]);

  json batch = completion({{"prompt", {"first prompt", "second"}},
                           {"max_tokens", 4},
                           {"n", 3},
                           {"temperature", 1.0},
                           {"seed", 7},
                           {"ignore_eos", true}});
  ASSERT_EQ(batch["choices"].size(), 6u);
  std::set<int> idx;
  for (const json& c : batch["choices"]) {
    idx.insert(c["index"].get<int>());
    EXPECT_EQ(c["finish_reason"], "length");
  }
  EXPECT_EQ(idx.size(), 6u);
  EXPECT_EQ(batch["usage"]["completion_tokens"], 24);
  EXPECT_EQ(batch["usage"]["prompt_tokens"].get<size_t>(),
            tokenize("first prompt").size() + tokenize("second").size());

  json lists = completion(
      {{"prompt", {ids, ids}}, {"max_tokens", 3}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(lists["choices"].size(), 2u);
  EXPECT_EQ(lists["choices"][0]["text"], lists["choices"][1]["text"]);
}

TEST(ServerRoutes, StopStringCutsTextAndReportsReason) {
  json base = {
      {"prompt", "stop test"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  json full = completion(base);
  const std::string text = full["choices"][0]["text"];
  ASSERT_GE(text.size(), 12u);
  // A stop string taken from the middle of the greedy output.
  const std::string stop = utf8_middle(text, 3);
  const std::string expect = text.substr(0, text.find(stop));
  json body = base;
  body["stop"] = stop;
  json cut = completion(body);
  EXPECT_EQ(cut["choices"][0]["text"], expect);
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(cut["choices"][0]["stop_reason"], stop);
  // stop_token_ids: stop on the greedy run's 3rd token.
  body = base;
  body["logprobs"] = 0;
  json lp = completion(body);
  auto first = tokenize(lp["choices"][0]["logprobs"]["tokens"][2].get<std::string>(), false);
  if (first.size() == 1) {
    body = base;
    body["stop_token_ids"] = {first[0]};
    json st = completion(body);
    EXPECT_EQ(st["choices"][0]["finish_reason"], "stop");
    EXPECT_LE(st["usage"]["completion_tokens"].get<int>(), 3);
  }
}

TEST(ServerRoutes, ChatCompletionShape) {
  auto r = post_json(shared_port(), "/v1/chat/completions",
                     {{"model", kTestModelName},
                      {"messages",
                       {{{"role", "system"}, {"content", "be brief"}},
                        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}}},
                      {"max_completion_tokens", 6},
                      {"temperature", 0},
                      {"ignore_eos", true},
                      {"logprobs", true},
                      {"top_logprobs", 2},
                      {"user", "u1"},
                      {"metadata", {{"k", "v"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_TRUE(c["message"]["content"].is_string());
  EXPECT_EQ(c["finish_reason"], "length");
  ASSERT_EQ(c["logprobs"]["content"].size(), 6u);
  EXPECT_EQ(c["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_TRUE(c["logprobs"]["content"][0]["bytes"].is_array());
  // The prompt is the template's render, tokenized without extra specials.
  auto t = post_json(
      shared_port(), "/tokenize",
      {{"prompt", "<|system|>be brief\n<|user|>hi\n<|assistant|>"}, {"add_special_tokens", false}});
  EXPECT_EQ(j["usage"]["prompt_tokens"], t.json()["count"]);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
}

TEST(ServerRoutes, ChatTemplateKwargsPassThrough) {
  json msgs = {{{"role", "user"}, {"content", "q"}}};
  auto a = post_json(shared_port(), "/tokenize",
                     {{"messages", msgs}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_EQ(a.status, 200);
  auto b =
      post_json(shared_port(), "/tokenize",
                {{"prompt", "<|user|>q /no_think\n<|assistant|>"}, {"add_special_tokens", false}});
  EXPECT_EQ(a.json()["tokens"], b.json()["tokens"]);
  auto r = post_json(shared_port(), "/v1/chat/completions",
                     {{"messages", msgs},
                      {"max_tokens", 2},
                      {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], b.json()["count"]);
}

TEST(ServerRoutes, HostileTemplatesFailFastAndServerKeepsServing) {
  for (const char* mode : {"recurse", "huge", "spin"}) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = post_json(shared_port(), "/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                        {"max_tokens", 2},
                        {"chat_template_kwargs", {{"mode", mode}}}});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 400) << mode << ": " << r.body;
    EXPECT_TRUE(r.json()["error"]["message"].get<std::string>().find("template") !=
                std::string::npos)
        << r.body;
    EXPECT_LT(s, 30.0) << mode;
    EXPECT_EQ(http_request(shared_port(), "GET", "/health").status, 200);
  }
}

TEST(ServerRoutes, MetricsPage) {
  completion({{"prompt", "metrics"}, {"max_tokens", 3}, {"ignore_eos", true}});
  auto r = http_request(shared_port(), "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  const std::string& p = r.body;
  const std::string l = std::string("{model_name=\"") + kTestModelName + "\"}";
  for (const char* name :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc", "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
        "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count"}) {
    EXPECT_GE(metric_value(p, std::string(name) + l), 0.0) << name;
  }
  EXPECT_GE(metric_value(p, "vllm:generation_tokens_total" + l), 3.0);
  EXPECT_GE(metric_value(p, "vllm:e2e_request_latency_seconds_count" + l), 1.0);
  EXPECT_GE(metric_value(p, "vllm:request_success_total{finished_reason=\"length\""), 1.0);
  EXPECT_NE(p.find("vllm:time_to_first_token_seconds_bucket{le=\"+Inf\""), std::string::npos);
  EXPECT_NE(p.find("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\""),
            std::string::npos);
  EXPECT_NE(p.find("# TYPE vllm:e2e_request_latency_seconds histogram"), std::string::npos);
}

TEST(ServerRoutes, ApiKeyLoadingStateAndUnknownModel) {
  server::ServerOptions so;
  so.api_key = "sekrit";
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  // Loading: /health is 503 until the engine is set.
  EXPECT_EQ(http_request(s->port(), "GET", "/health").status, 503);
  EngineConfig ec;
  ec.max_model_len = 128;
  ec.max_num_seqs = 4;
  ec.n_threads = 1;
  ASSERT_TRUE(s->load("synth:tiny", ec).is_ok());
  EXPECT_EQ(http_request(s->port(), "GET", "/health").status, 200);
  json body = {{"prompt", "x"}, {"max_tokens", 2}};
  auto no_key = post_json(s->port(), "/v1/completions", body);
  EXPECT_EQ(no_key.status, 401);
  EXPECT_TRUE(no_key.json()["error"]["message"].is_string());
  EXPECT_EQ(
      post_json(s->port(), "/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status,
      401);
  EXPECT_EQ(
      post_json(s->port(), "/v1/completions", body, {{"Authorization", "Bearer sekrit"}}).status,
      200);
  EXPECT_EQ(post_json(s->port(), "/v1/messages",
                      {{"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}},
                      {{"x-api-key", "sekrit"}})
                .status,
            200);
  auto unknown = post_json(s->port(), "/v1/completions", {{"model", "gpt-9"}, {"prompt", "x"}},
                           {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.json()["error"]["code"], "model_not_found");
  s->stop();
}

// The Authorization scheme is case-insensitive (RFC 7235 2.1). While loading, a request with
// the right key gets 503 and one without gets 401, so no model is needed.
TEST(ServerRoutes, BearerSchemeAnyCase) {
  server::ServerOptions so;
  so.api_key = "sekrit";
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  auto status = [&](const std::string& authorization) {
    return http_request(s->port(), "GET", "/v1/models", "", {{"Authorization", authorization}})
        .status;
  };
  for (const char* ok : {"Bearer sekrit", "bearer sekrit", "BEARER sekrit", "bEaReR  sekrit"})
    EXPECT_EQ(status(ok), 503) << ok;
  for (const char* bad : {"Bearer wrong", "bearer Sekrit", "Basic sekrit", "Bearersekrit", "bearer",
                          "Bearer ", "sekrit"})
    EXPECT_EQ(status(bad), 401) << bad;
  s->stop();
}

// HEAD on every GET route answers as GET, with GET's Content-Length and no body (the Ollama
// CLI checks the server with HEAD /).
TEST(ServerRoutes, HeadAnswersAsGet) {
  const uint16_t port = shared_port();
  for (const char* path : {"/", "/health", "/version", "/v1/models", "/v1/models/tiny-test",
                           "/api/tags", "/api/version", "/api/ps", "/webui/app.js"}) {
    HttpResult get = http_request(port, "GET", path);
    ASSERT_EQ(get.status, 200) << path;
    ASSERT_FALSE(get.body.empty()) << path;
    HttpResult head = http_request(port, "HEAD", path);
    EXPECT_EQ(head.status, 200) << path;
    EXPECT_EQ(head.headers["content-length"], std::to_string(get.body.size())) << path;
    EXPECT_EQ(head.headers["content-type"], get.headers["content-type"]) << path;
    EXPECT_EQ(head.body, "") << path;
  }
  // HEAD of a missing response: GET's 404, without its body.
  HttpResult missing = http_request(port, "HEAD", "/v1/responses/resp_nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "");
  // A POST route: 405, naming the methods it takes.
  HttpResult post_only = http_request(port, "HEAD", "/v1/completions");
  EXPECT_EQ(post_only.status, 405);
  EXPECT_EQ(post_only.headers["allow"], "POST");
  EXPECT_EQ(post_only.body, "");
}

TEST(ServerRoutes, ModelById) {
  const uint16_t port = shared_port();
  HttpResult list = http_request(port, "GET", "/v1/models");
  ASSERT_EQ(list.status, 200);
  HttpResult one = http_request(port, "GET", std::string("/v1/models/") + kTestModelName);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.json(), list.json()["data"][0]);
  // Percent-encoded ids (a served name like "org/model" is sent as "org%2Fmodel").
  EXPECT_EQ(http_request(port, "GET", "/v1/models/tiny%2dtest").status, 200);
  HttpResult other = http_request(port, "GET", "/v1/models/gpt-9");
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.json()["error"]["code"], "model_not_found") << other.body;
  EXPECT_NE(other.json()["error"]["message"].get<std::string>().find("gpt-9"), std::string::npos);
  EXPECT_EQ(http_request(port, "DELETE", std::string("/v1/models/") + kTestModelName).status, 405);
}

// A model with sliding-window layers: /metrics reports each KV layer group and counts the blocks
// released as a sequence outgrows its window (tiny-swa: windows of 8 tokens, blocks of 4).
TEST(ServerRoutes, MetricsCountSlidingWindowGroups) {
  auto s = start_test_server({}, /*load=*/false);
  ASSERT_TRUE(s);
  EngineConfig ec;
  ec.max_model_len = 128;
  ec.max_num_seqs = 2;
  ec.block_size = 4;
  ec.n_threads = 1;
  ASSERT_TRUE(s->load("synth:tiny-swa", ec).is_ok());
  std::vector<int> prompt(40, 7);
  auto r = post_json(s->port(), "/v1/completions",
                     {{"prompt", prompt}, {"max_tokens", 8}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string p = http_request(s->port(), "GET", "/metrics").body;
  const std::string full = "loom:kv_cache_group_blocks{group=\"full_attention\",";
  const std::string window = "loom:kv_cache_group_blocks{group=\"sliding_window_8\",";
  EXPECT_EQ(metric_value(p, full + "state=\"used\""), 0.0) << p;
  EXPECT_EQ(metric_value(p, full + "state=\"free\""), 2 * 128 / 4) << p;
  EXPECT_EQ(metric_value(p, window + "state=\"used\""), 0.0) << p;
  EXPECT_GT(metric_value(p, window + "state=\"free\""), 0.0) << p;
  // The last step started at position 46: blocks [0, (46 - 7) / 4) were behind its window.
  EXPECT_EQ(
      metric_value(p, "loom:kv_cache_window_released_blocks_total{group=\"sliding_window_8\""),
      (46 - 7) / 4)
      << p;
  EXPECT_NE(p.find("# TYPE loom:kv_cache_window_released_blocks_total counter"), std::string::npos);
  s->stop();
}

// Speculative decoding: /metrics carries vLLM's spec_decode counters under vLLM's names,
// consistent with each other (accepted <= proposed <= k per proposal; per-position counts add
// up to the accepted total and never grow with the position), and the completion is the one
// plain decoding gives.
TEST(ServerRoutes, MetricsCountSpeculativeDecoding) {
  std::vector<int> prompt;
  for (int rep = 0; rep < 4; ++rep)
    for (int t : {11, 12, 13, 14, 15}) prompt.push_back(t);
  std::vector<json> texts;
  for (bool spec : {false, true}) {
    auto s = start_test_server({}, /*load=*/false);
    ASSERT_TRUE(s);
    EngineConfig ec;
    ec.max_model_len = 256;
    ec.max_num_seqs = 2;
    ec.n_threads = 1;
    if (spec) {
      ec.speculative.method = SpeculativeConfig::Method::kNgram;
      ec.speculative.num_speculative_tokens = 3;
      ec.speculative.prompt_lookup_min = 1;
      ec.speculative.prompt_lookup_max = 2;
    }
    ASSERT_TRUE(s->load("synth:tiny", ec).is_ok());
    auto r = post_json(
        s->port(), "/v1/completions",
        {{"prompt", prompt}, {"max_tokens", 64}, {"ignore_eos", true}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
    texts.push_back(r.json()["choices"][0]["text"]);
    const std::string p = http_request(s->port(), "GET", "/metrics").body;
    const bool has = p.find("vllm:spec_decode_num_drafts_total") != std::string::npos;
    EXPECT_EQ(has, spec) << p;
    if (spec) {
      const double drafts = metric_value(p, "vllm:spec_decode_num_drafts_total{");
      const double proposed = metric_value(p, "vllm:spec_decode_num_draft_tokens_total{");
      const double accepted = metric_value(p, "vllm:spec_decode_num_accepted_tokens_total{");
      EXPECT_GT(drafts, 0) << p;
      EXPECT_LE(accepted, proposed);
      EXPECT_LE(proposed, 3 * drafts);
      double sum = 0, prev = 1e18;
      for (int pos = 0; pos < 3; ++pos) {
        const double n =
            metric_value(p, "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"" +
                                std::to_string(pos) + "\"");
        EXPECT_LE(n, prev) << pos;
        prev = n;
        sum += n;
      }
      EXPECT_EQ(sum, accepted) << p;
      // A counter's name ends in _total, as prometheus_client names vLLM's (bench serve skips
      // the others).
      EXPECT_NE(p.find("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"),
                std::string::npos)
          << p;
      EXPECT_EQ(p.find("vllm:spec_decode_num_accepted_tokens_per_pos{"), std::string::npos) << p;
    }
    s->stop();
  }
  EXPECT_EQ(texts[0], texts[1]);
}

// One info line per finished request (loom serve; --disable-log-requests turns it off): id,
// route, status, prompt and output tokens, TTFT, total time, finish reason.
TEST(ServerRoutes, LogsOneLinePerFinishedRequest) {
  for (bool log : {true, false}) {
    server::ServerOptions so;
    so.log_requests = log;
    auto s = start_test_server(so, /*load=*/false);
    ASSERT_TRUE(s);
    EngineConfig ec;
    ec.max_model_len = 128;
    ec.max_num_seqs = 2;
    ec.n_threads = 1;
    ASSERT_TRUE(s->load("synth:tiny", ec).is_ok());
    ::testing::internal::CaptureStderr();
    auto r = post_json(
        s->port(), "/v1/completions",
        {{"prompt", std::vector<int>{5, 6, 7, 8}}, {"max_tokens", 3}, {"ignore_eos", true}});
    EXPECT_EQ(post_json(s->port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", -1}}).status,
              400);
    s->stop();  // joins the dispatcher: its line is written
    const std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string id = r.json()["id"].get<std::string>();
    const std::string line =
        "request " + id + " /v1/completions: 200, prompt 4 tokens, output 3 tokens, ttft ";
    EXPECT_EQ(err.find(line) != std::string::npos, log) << err;
    if (log) {
      EXPECT_NE(err.find("finish length"), std::string::npos) << err;
    }
    // A rejected request: one line with its route and status.
    EXPECT_EQ(err.find("request POST /v1/completions: 400") != std::string::npos, log) << err;
  }
}

}  // namespace
}  // namespace loom::test
