// /v1/embeddings, /api/embed and /v1/rerank over real HTTP: the task detected from the model's
// pooling metadata (synth tiny-qwen3-embed: pooling_type last; tiny-qwen3-rerank: rank with a
// classifier head) or set with --task; the response shapes; base64 and dimensions; rerank
// scores equal to sigmoid(yes - no) of a generate-mode forward on the same prompt, their
// order and top_n; and every bad input a 400 naming its field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "loom/tokenizer.h"
#include "model/model.h"
#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

std::unique_ptr<server::Server> start(const std::string& model, const std::string& task = "") {
  server::ServerOptions so;
  so.task = task;
  return start_test_server(so, true, model);
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

std::vector<float> decode_base64_floats(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> bytes;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : s) {
    const int v = val(c);
    if (v < 0) break;  // '='
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<uint8_t>(buf >> bits));
    }
  }
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t u = bytes[4 * i] | (bytes[4 * i + 1] << 8) | (bytes[4 * i + 2] << 16) |
                       (static_cast<uint32_t>(bytes[4 * i + 3]) << 24);
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

// Every bad input a 400 naming its field (Ollama: in its message).
void check_bad_embedding_input(server::Server& s) {
  const uint16_t port = s.port();
  struct Case {
    const char* path;
    json body;
    const char* param;
  };
  const Case cases[] = {
      {"/v1/embeddings", {{"input", "x"}, {"truncate_prompt_tokens", 4}}, "truncate_prompt_tokens"},
      {"/v1/embeddings", {{"input", "x"}, {"encoding_format", "int8"}}, "encoding_format"},
      {"/v1/embeddings", {{"input", "x"}, {"dimensions", 0}}, "dimensions"},
      {"/v1/embeddings", {{"input", "x"}, {"dimensions", 65}}, "dimensions"},
      {"/v1/embeddings", {{"input", "x"}, {"dimensions", "8"}}, "dimensions"},
      {"/v1/embeddings", {{"model", kTestModelName}}, "input"},
      {"/v1/embeddings", {{"input", 5}}, "input"},
      {"/v1/embeddings", {{"input", json::array()}}, "input"},
      {"/v1/embeddings", {{"input", ""}}, "input"},
      {"/v1/embeddings", {{"input", json::array({"a", 3})}}, "input"},
      {"/v1/embeddings", {{"input", json::array({1, 2, 999999})}}, "input"},
      {"/v1/embeddings", {{"input", json::array({json::array({1}), json::array()})}}, "input"},
      {"/v1/embeddings", {{"input", "x"}, {"user", 3}}, "user"},
      {"/api/embed", {{"model", kTestModelName}, {"input", "x"}, {"stream", false}}, "stream"},
      {"/api/embed",
       {{"model", kTestModelName}, {"input", "x"}, {"options", {{"temperature", 0}}}},
       "options"},
      {"/api/embed", {{"model", kTestModelName}, {"input", json::array({1, 2})}}, "input"},
      {"/api/embed", {{"model", kTestModelName}, {"input", "x"}, {"truncate", "yes"}}, "truncate"},
      {"/api/embed",
       {{"model", kTestModelName}, {"input", "x"}, {"keep_alive", json::array()}},
       "keep_alive"},
      {"/api/embed",
       {{"model", kTestModelName}, {"input", "x"}, {"keep_alive", "forever"}},
       "keep_alive"},
      {"/api/embed",
       {{"model", kTestModelName}, {"input", "x"}, {"dimensions", 1000}},
       "dimensions"},
      // Ollama requires the model on every embed request.
      {"/api/embed", {{"input", "x"}}, "model is required"},
      {"/api/embeddings", {{"prompt", "x"}}, "model is required"},
      {"/api/embeddings", {{"model", kTestModelName}, {"input", "x"}}, "input"},
      {"/api/embeddings", {{"model", kTestModelName}, {"prompt", 3}}, "prompt"},
  };
  for (const Case& c : cases) {
    auto r = post_json(port, c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.path << " " << c.body.dump() << " -> " << r.body;
    const json j = r.json();
    if (std::string(c.path).rfind("/api/", 0) == 0) {
      ASSERT_TRUE(j.contains("error") && j["error"].is_string()) << r.body;
      EXPECT_NE(j["error"].get<std::string>().find(c.param), std::string::npos)
          << c.body.dump() << " -> " << r.body;
    } else {
      EXPECT_EQ(j["error"]["param"], c.param) << c.body.dump() << " -> " << r.body;
    }
  }
  EXPECT_EQ(post_json(port, "/v1/embeddings", {{"input", "x"}, {"model", "other"}}).status, 404);
  EXPECT_EQ(post_json(port, "/v1/embeddings", {{"input", "x"}}).status, 200);
}

TEST(ServerEmbeddings, OpenAiAndOllamaShapesFromPoolingMetadata) {
  auto s = start("synth:tiny-qwen3-embed");
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  auto r = post_json(
      port, "/v1/embeddings",
      {{"input", json::array({"The sky is blue.", "Grass is green."})}, {"model", kTestModelName}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], kTestModelName);
  ASSERT_EQ(j["data"].size(), 2u);
  std::vector<std::vector<float>> v;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(j["data"][i]["object"], "embedding");
    EXPECT_EQ(j["data"][i]["index"], i);
    v.push_back(j["data"][i]["embedding"].get<std::vector<float>>());
    EXPECT_EQ(v.back().size(), 64u);
    EXPECT_NEAR(norm(v.back()), 1.0, 1e-5);
  }
  EXPECT_NE(v[0], v[1]);
  const auto tok = post_json(port, "/tokenize", {{"prompt", "The sky is blue."}}).json();
  const std::vector<int> ids = tok["tokens"].get<std::vector<int>>();
  const int64_t n0 = static_cast<int64_t>(ids.size());
  const int64_t n1 = static_cast<int64_t>(
      post_json(port, "/tokenize", {{"prompt", "Grass is green."}}).json()["tokens"].size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], n0 + n1);
  EXPECT_EQ(j["usage"]["total_tokens"], n0 + n1);

  // The same text as token ids, alone and as a list of lists: the same vector.
  auto by_ids = post_json(port, "/v1/embeddings", {{"input", ids}}).json();
  EXPECT_EQ(by_ids["data"][0]["embedding"].get<std::vector<float>>(), v[0]);
  auto by_lists = post_json(port, "/v1/embeddings", {{"input", json::array({ids, ids})}}).json();
  EXPECT_EQ(by_lists["data"][1]["embedding"].get<std::vector<float>>(), v[0]);

  // base64: little-endian float32 of the same values.
  auto b64 = post_json(port, "/v1/embeddings",
                       {{"input", "The sky is blue."}, {"encoding_format", "base64"}})
                 .json();
  ASSERT_TRUE(b64["data"][0]["embedding"].is_string()) << b64.dump();
  EXPECT_EQ(decode_base64_floats(b64["data"][0]["embedding"].get<std::string>()), v[0]);

  // dimensions: the first 16 values, renormalised.
  auto d16 = post_json(port, "/v1/embeddings", {{"input", "The sky is blue."}, {"dimensions", 16}})
                 .json()["data"][0]["embedding"]
                 .get<std::vector<float>>();
  ASSERT_EQ(d16.size(), 16u);
  EXPECT_NEAR(norm(d16), 1.0, 1e-5);
  const double head = norm(std::vector<float>(v[0].begin(), v[0].begin() + 16));
  for (int k = 0; k < 16; ++k) EXPECT_NEAR(d16[k], v[0][k] / head, 1e-6);

  // Ollama's /api/embed: the same vectors.
  auto o = post_json(port, "/api/embed",
                     {{"model", kTestModelName},
                      {"input", json::array({"The sky is blue.", "Grass is green."})},
                      {"keep_alive", "5m"},
                      {"truncate", true}});
  ASSERT_EQ(o.status, 200) << o.body;
  const json oj = o.json();
  EXPECT_EQ(oj["model"], kTestModelName);
  ASSERT_EQ(oj["embeddings"].size(), 2u);
  EXPECT_EQ(oj["embeddings"][0].get<std::vector<float>>(), v[0]);
  EXPECT_EQ(oj["embeddings"][1].get<std::vector<float>>(), v[1]);
  EXPECT_EQ(oj["prompt_eval_count"], n0 + n1);
  EXPECT_GT(oj["total_duration"].get<int64_t>(), 0);
  EXPECT_TRUE(oj.contains("load_duration"));

  // Ollama truncates to the context by default; OpenAI refuses.
  const std::vector<int> long_ids(300, 5);
  EXPECT_EQ(post_json(port, "/v1/embeddings", {{"input", long_ids}}).status, 400);
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += " sky";
  EXPECT_EQ(post_json(port, "/api/embed", {{"model", kTestModelName}, {"input", long_text}}).status,
            200);
  EXPECT_EQ(post_json(port, "/api/embed",
                      {{"model", kTestModelName}, {"input", long_text}, {"truncate", false}})
                .status,
            400);

  // Ollama answers an empty input with no embeddings (a load request), as it does.
  for (const json& empty : {json(""), json::array()}) {
    auto e = post_json(port, "/api/embed", {{"model", kTestModelName}, {"input", empty}});
    ASSERT_EQ(e.status, 200) << e.body;
    EXPECT_EQ(e.json()["embeddings"], json::array()) << e.body;
  }
  // The legacy /api/embeddings: one prompt, the raw (unnormalised) pooled vector, in the
  // direction /api/embed's normalised one points.
  auto legacy = post_json(port, "/api/embeddings",
                          {{"model", kTestModelName}, {"prompt", "The sky is blue."}});
  ASSERT_EQ(legacy.status, 200) << legacy.body;
  const std::vector<float> raw = legacy.json()["embedding"].get<std::vector<float>>();
  ASSERT_EQ(raw.size(), v[0].size());
  const double raw_norm = norm(raw);
  for (size_t k = 0; k < raw.size(); ++k) EXPECT_NEAR(raw[k] / raw_norm, v[0][k], 1e-5);
  auto legacy_empty =
      post_json(port, "/api/embeddings", {{"model", kTestModelName}, {"prompt", ""}});
  ASSERT_EQ(legacy_empty.status, 200) << legacy_empty.body;
  EXPECT_EQ(legacy_empty.json(), json({{"embedding", json::array()}}));

  // An embedding server generates nothing, and reranks nothing.
  auto chat = post_json(port, "/v1/chat/completions",
                        {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}});
  EXPECT_EQ(chat.status, 400);
  EXPECT_NE(chat.body.find("--task generate"), std::string::npos) << chat.body;
  auto rr = post_json(port, "/v1/rerank", {{"query", "q"}, {"documents", {"a"}}});
  EXPECT_EQ(rr.status, 400);
  EXPECT_NE(rr.body.find("--task rerank"), std::string::npos) << rr.body;
  check_bad_embedding_input(*s);
  EXPECT_EQ(wait_engine_idle(*s), "");
  s->stop();
}

// A generative model: the embedding routes say how to get embeddings instead of guessing.
TEST(ServerEmbeddings, GenerativeModelAnswersWithTheTaskFlag) {
  const uint16_t port = shared_port();
  auto r = post_json(port, "/v1/embeddings", {{"input", "hello"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("--task embed"), std::string::npos) << r.body;
  auto o = post_json(port, "/api/embed", {{"model", kTestModelName}, {"input", "hello"}});
  EXPECT_EQ(o.status, 400);
  EXPECT_TRUE(o.json()["error"].is_string()) << o.body;
  EXPECT_NE(o.body.find("--task embed"), std::string::npos) << o.body;
  // Rerank needs a reranker, which --task embed would not give.
  auto rr = post_json(port, "/v1/rerank", {{"query", "q"}, {"documents", {"a"}}});
  EXPECT_EQ(rr.status, 400);
  EXPECT_NE(rr.body.find("--task rerank"), std::string::npos) << rr.body;
  EXPECT_EQ(rr.body.find("--task embed"), std::string::npos) << rr.body;
}

// The score of each document, computed independently: the reranker's prompt formatted here,
// one generate-mode forward on it, sigmoid(logit("yes") - logit("no")) at its last position.
std::vector<double> scores_from_generate(const std::string& model, const std::string& query,
                                         const std::vector<std::string>& docs) {
  EngineConfig ec;
  ec.n_threads = 1;
  ec.max_model_len = kTestMaxModelLen;
  auto e = Engine::load(model, ec);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  Engine& engine = **e;
  const Tokenizer& tok = *engine.tokenizer();
  std::string tmpl = engine.model().config().rerank_template;
  if (tmpl.empty())  // the Qwen3-Reranker model card's prompt
    tmpl =
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
        "Query and the Instruct provided. Note that the answer can only be \"yes\" or "
        "\"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a web search query, retrieve "
        "relevant passages that answer the query\n<Query>: {query}\n<Document>: "
        "{document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  engine.keep_logits(true);
  const int32_t yes = *tok.find_token("yes"), no = *tok.find_token("no");
  std::vector<double> out;
  for (const std::string& d : docs) {
    std::string text = tmpl;
    text.replace(text.find("{query}"), 7, query);
    text.replace(text.find("{document}"), 10, d);
    GenerateRequest g;
    g.request_id = "g";
    g.prompt = tok.encode(text, false, true);
    g.params.max_tokens = 1;
    EXPECT_TRUE(engine.add_request(g).is_ok());
    std::vector<float> row;
    while (engine.has_unfinished()) {
      EXPECT_TRUE(engine.step().is_ok());
      if (!engine.last_logits().empty()) row = engine.last_logits()[0].second;
    }
    out.push_back(1.0 / (1.0 + std::exp(static_cast<double>(row[no]) - row[yes])));
  }
  return out;
}

void check_rerank(const std::string& model, const std::string& task, double tol) {
  auto s = start(model, task);
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  const std::string query = "What colour is the sky?";
  const std::vector<std::string> docs = {"The sky is blue.", "Bananas are yellow.",
                                         "At night the sky is black.", "Grass is green.",
                                         "Rain falls from clouds."};
  const std::vector<double> want = scores_from_generate(model, query, docs);
  json documents = json::array();
  for (size_t i = 0; i < docs.size(); ++i)
    documents.push_back(i % 2 ? json{{"text", docs[i]}} : json(docs[i]));
  auto r = post_json(port, "/v1/rerank",
                     {{"model", kTestModelName}, {"query", query}, {"documents", documents}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  ASSERT_EQ(j["results"].size(), docs.size());
  EXPECT_GT(j["usage"]["total_tokens"].get<int64_t>(), 0);
  double prev = 2;
  std::vector<size_t> order;
  for (const json& res : j["results"]) {
    const size_t i = res["index"].get<size_t>();
    const double score = res["relevance_score"].get<double>();
    EXPECT_NEAR(score, want[i], tol) << model << " document " << i;
    EXPECT_LE(score, prev);
    prev = score;
    EXPECT_EQ(res["document"]["text"], docs[i]);
    order.push_back(i);
  }
  // top_n, no documents, and the aliases: the same order.
  for (const char* path : {"/v1/rerank", "/rerank", "/v2/rerank"}) {
    auto t = post_json(
        port, path,
        {{"query", query}, {"documents", docs}, {"top_n", 2}, {"return_documents", false}});
    ASSERT_EQ(t.status, 200) << t.body;
    const json tj = t.json();
    ASSERT_EQ(tj["results"].size(), 2u) << path;
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(tj["results"][k]["index"].get<size_t>(), order[k]) << path;
      EXPECT_FALSE(tj["results"][k].contains("document"));
    }
  }
  // Bad input.
  struct Case {
    json body;
    const char* param;
  };
  const Case cases[] = {
      {{{"query", query}}, "documents"},
      {{{"documents", docs}}, "query"},
      {{{"query", 3}, {"documents", docs}}, "query"},
      {{{"query", query}, {"documents", json::array()}}, "documents"},
      {{{"query", query}, {"documents", json::array({1})}}, "documents"},
      {{{"query", query}, {"documents", json::array({{{"txt", "a"}}})}}, "documents"},
      {{{"query", query}, {"documents", docs}, {"top_n", 0}}, "top_n"},
      {{{"query", query}, {"documents", docs}, {"return_documents", 1}}, "return_documents"},
      {{{"query", query}, {"documents", docs}, {"rank_fields", {"a"}}}, "rank_fields"},
  };
  for (const Case& c : cases) {
    auto b = post_json(port, "/v1/rerank", c.body);
    EXPECT_EQ(b.status, 400) << c.body.dump() << " -> " << b.body;
    EXPECT_EQ(b.json()["error"]["param"], c.param) << c.body.dump() << " -> " << b.body;
  }
  EXPECT_EQ(post_json(port, "/v1/embeddings", {{"input", "x"}}).status, 400);
  EXPECT_EQ(wait_engine_idle(*s), "");
  s->stop();
}

// A reranker as llama.cpp converts a Qwen3-Reranker (pooling_type rank, cls.output).
TEST(ServerRerank, ClassifierHeadScoresAreTheYesNoSigmoid) {
  check_rerank("synth:tiny-qwen3-rerank", "", 1e-5);
}

// A Qwen3-Reranker as its Hugging Face checkpoint is: a causal LM scored with its LM head's
// "yes" and "no" logits (--task rerank).
TEST(ServerRerank, LmHeadYesNoLogitsWithTaskRerank) {
  check_rerank("synth:tiny-qwen3", "rerank", 1e-9);
}

}  // namespace
}  // namespace loom::test
