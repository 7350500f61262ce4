// Chat families over HTTP on synth's tiny-qwen3 model (random weights, Qwen3's real vocabulary)
// serving Gemma's real chat template (tests/data/chat_templates): the template's own
// raise_exception (system role, roles that do not alternate) is a 400 naming the reason, and a
// turn terminator that is not the file's EOS (<|endoftext|> here, as Gemma's <end_of_turn> or
// Phi-3's <|end|>) ends the answer with finish_reason "stop" and none of its text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

constexpr int32_t kEndOfText = 151643, kImStart = 151644;

std::string gemma_template() {
  std::ifstream f(std::string(LOOM_TEST_DATA) + "/chat_templates/google-gemma-2-2b-it.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class ChatFamilyServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = start_tiny_qwen3_server(gemma_template(), 256).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }

  static json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

  static inline server::Server* server_ = nullptr;
};

TEST_F(ChatFamilyServer, GemmaTemplateExceptionsAre400s) {
  struct Case {
    json messages;
    std::string reason;
  };
  const Case cases[] = {
      {json::array({{{"role", "system"}, {"content", "Be terse."}}, user("Hi")}),
       "System role not supported"},
      {json::array({user("Hi"), user("Hello?")}),
       "Conversation roles must alternate user/assistant/user/assistant/..."},
  };
  for (const Case& c : cases) {
    auto r =
        post_json(port(), "/v1/chat/completions", {{"messages", c.messages}, {"max_tokens", 2}});
    ASSERT_EQ(r.status, 400) << r.body;
    const json err = r.json()["error"];
    EXPECT_EQ(err["message"], "chat template error: " + c.reason) << r.body;
    EXPECT_EQ(err["param"], "messages") << r.body;
  }
  // The server goes on serving: the same template renders a valid conversation.
  auto ok = post_json(
      port(), "/v1/chat/completions",
      {{"messages",
        json::array({user("Hi"), {{"role", "assistant"}, {"content", "Hello."}}, user("Bye")})},
       {"max_tokens", 2}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

TEST_F(ChatFamilyServer, TurnTerminatorEndsTheAnswerWithStop) {
  auto forced = [&](const std::string& path, int32_t token) {
    json body = {
        {"max_tokens", 5}, {"temperature", 0}, {"logit_bias", {{std::to_string(token), 100}}}};
    if (path == "/v1/chat/completions")
      body["messages"] = json::array({user("Hi")});
    else
      body["prompt"] = "Hi";
    auto r = post_json(port(), path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  };
  json chat = forced("/v1/chat/completions", kEndOfText);
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop") << chat;
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "") << chat;
  EXPECT_TRUE(chat["choices"][0]["stop_reason"].is_null()) << chat;
  EXPECT_EQ(chat["usage"]["completion_tokens"], 1) << chat;

  json cmpl = forced("/v1/completions", kEndOfText);
  EXPECT_EQ(cmpl["choices"][0]["finish_reason"], "stop") << cmpl;
  EXPECT_EQ(cmpl["choices"][0]["text"], "") << cmpl;

  // <|im_start|> is special but ends nothing: the answer runs to max_tokens.
  json start = forced("/v1/completions", kImStart);
  EXPECT_EQ(start["choices"][0]["finish_reason"], "length") << start;
  EXPECT_EQ(start["usage"]["completion_tokens"], 5) << start;
  EXPECT_EQ(wait_engine_idle(*server_), "");
}

}  // namespace
}  // namespace loom::test
