// The official npm clients against a real loom server: `openai` (tests/server/openai_client.js,
// openai_tools_client.js, openai_responses_client.js), `@anthropic-ai/sdk`
// (anthropic_client.js) and `ollama` (ollama_client.js). Each test installs its package into
// the build directory once and runs the script with node. Skips only when node or npm is not
// installed.
#include <gtest/gtest.h>

#include <tuple>

#include "common/node_packages.h"
#include "server_fixture.h"

namespace loom::test {
namespace {

// Runs tests/server/<script> PORT MODEL KEY [extra] against a fresh server; expects `marker`.
void run_client_script(const std::string& modules, const char* script_name, const char* marker,
                       const std::string& extra_args = "") {
  server::ServerOptions so;
  so.api_key = "node-key";
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/server/" + script_name;
  int rc = 0;
  std::string out =
      run_command("NODE_PATH='" + modules + "' node '" + script + "' " + std::to_string(s->port()) +
                      " " + kTestModelName + " node-key " + extra_args,
                  &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(marker), std::string::npos) << out;
  s->stop();
}

std::string openai_modules(std::string* skip) {
  return npm_modules("node_openai", "openai@6", "openai/package.json", skip);
}

TEST(ServerNodeClient, OfficialOpenAiPackage) {
  std::string skip;
  const std::string modules = openai_modules(&skip);
  if (modules.empty()) GTEST_SKIP() << skip;
  run_client_script(modules, "openai_client.js", "OPENAI_CLIENT_OK");
}

// Structured outputs and tools through the SDK (response_format, tool_choice, streamed calls).
TEST(ServerNodeClient, OfficialOpenAiPackageToolsAndSchemas) {
  std::string skip;
  const std::string modules = openai_modules(&skip);
  if (modules.empty()) GTEST_SKIP() << skip;
  run_client_script(modules, "openai_tools_client.js", "OPENAI_TOOLS_CLIENT_OK");
}

// The Responses API through the SDK: responses.create (text, a tool round trip with
// function_call_output and previous_response_id, json_schema), responses.stream's events in the
// documented order, retrieve / delete.
TEST(ServerNodeClient, OfficialOpenAiPackageResponses) {
  std::string skip;
  const std::string modules = openai_modules(&skip);
  if (modules.empty()) GTEST_SKIP() << skip;
  run_client_script(modules, "openai_responses_client.js", "OPENAI_RESPONSES_CLIENT_OK");
}

// Tools with tool_choice any, a streamed final message, a tool_result turn, a typed error.
TEST(ServerNodeClient, OfficialAnthropicPackage) {
  std::string skip;
  const std::string modules =
      npm_modules("node_anthropic", "@anthropic-ai/sdk@1", "@anthropic-ai/sdk/package.json", &skip);
  if (modules.empty()) GTEST_SKIP() << skip;
  run_client_script(modules, "anthropic_client.js", "ANTHROPIC_CLIENT_OK",
                    std::to_string(kTestMaxModelLen));
}

// Ollama's API through the `ollama` package: listing, generate and chat streamed and not,
// context, a schema format, an error.
TEST(ServerNodeClient, OfficialOllamaPackage) {
  std::string skip;
  const std::string modules =
      npm_modules("node_ollama", "ollama@0.6", "ollama/package.json", &skip);
  if (modules.empty()) GTEST_SKIP() << skip;
  run_client_script(modules, "ollama_client.js", "OLLAMA_CLIENT_OK");
}

// Embeddings through both packages against one embedding server (pooling_type last in its
// metadata): openai's embeddings.create as floats and base64, ollama's embed.
TEST(ServerNodeClient, OfficialPackagesEmbeddings) {
  std::string skip;
  const std::string openai = openai_modules(&skip);
  if (openai.empty()) GTEST_SKIP() << skip;
  const std::string ollama = npm_modules("node_ollama", "ollama@0.6", "ollama/package.json", &skip);
  if (ollama.empty()) GTEST_SKIP() << skip;
  server::ServerOptions so;
  so.api_key = "node-key";
  auto s = start_test_server(so, true, "synth:tiny-qwen3-embed");
  ASSERT_TRUE(s);
  for (auto [modules, script, marker] :
       {std::tuple{openai, "openai_embeddings_client.js", "OPENAI_EMBEDDINGS_CLIENT_OK"},
        std::tuple{ollama, "ollama_embed_client.js", "OLLAMA_EMBED_CLIENT_OK"}}) {
    int rc = 0;
    const std::string out = run_command(
        "NODE_PATH='" + modules + "' node '" + std::string(LOOM_SOURCE_DIR) + "/tests/server/" +
            script + "' " + std::to_string(s->port()) + " " + kTestModelName + " node-key",
        &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find(marker), std::string::npos) << out;
  }
  s->stop();
}

}  // namespace
}  // namespace loom::test
