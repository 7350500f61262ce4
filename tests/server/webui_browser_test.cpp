// The web chat page in a real headless browser: Debian's Chromium driven by
// tests/server/webui_browser.js through playwright-core (installed into the build directory
// once, as the npm client tests do). The script sends a message and watches tokens stream,
// stops a generation (and checks the server aborted it), sends a turn with settings and checks
// the context figure against the final usage chunk, checks reasoning folded, reloads and
// finds its conversations, checks markdown, highlighting and sanitising, and saves a
// screenshot (build/webui.png; docs/webui.png is a copy). Skips when node, npm or chromium is
// missing.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/node_packages.h"
#include "server_fixture.h"

namespace loom::test {
namespace {

// Replies are reasoning when the system prompt is "Think first." (the prompt then opens
// <think>, which makes the template a DeepSeek-R1-style reasoning one).
constexpr const char* kThinkWhenAskedTemplate =
    "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if messages[0]['content'] == 'Think first.' -%}<think>\n{%- endif -%}"
    "{%- endif -%}";

std::string find_chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(p)) return p;
  return "";
}

TEST(ServerWebUiBrowser, ChatStreamStopReloadInChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  std::string skip;
  const std::string modules =
      npm_modules("node_playwright", "playwright-core@1.57", "playwright-core/package.json", &skip);
  if (modules.empty()) GTEST_SKIP() << skip;

  // tiny-qwen3: a fast random model with a real vocabulary (readable-looking tokens) and a
  // 4096-token context, so that a reply without max_tokens runs long enough to be stopped.
  server::ServerOptions so;
  so.port = 0;
  so.served_model_name = "webui-test";
  so.model_path = "synth:tiny-qwen3";
  so.chat_template = kThinkWhenAskedTemplate;
  so.io_threads = 2;
  auto started = server::Server::start(so);
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  std::unique_ptr<server::Server> s = std::move(started).value();
  EngineConfig ec;
  ec.max_model_len = 4096;
  ec.max_num_seqs = 4;
  ec.n_threads = 1;
  Status st = s->load("synth:tiny-qwen3", ec);
  ASSERT_TRUE(st.is_ok()) << st.message();

  const std::string screenshot =
      (std::filesystem::path(LOOM_BINARY).parent_path() / "webui.png").string();
  std::filesystem::remove(screenshot);
  const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/server/webui_browser.js";
  int rc = 0;
  const std::string out =
      run_command("NODE_PATH='" + modules + "' timeout 60 node '" + script + "' " +
                      std::to_string(s->port()) + " '" + chromium + "' '" + screenshot + "'",
                  &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("WEBUI_BROWSER_OK"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(screenshot) && std::filesystem::file_size(screenshot) > 10000)
      << "no screenshot at " << screenshot;
  // The stopped request is gone from the engine and its KV blocks are free.
  EXPECT_EQ(wait_engine_idle(*s), "");
  s->stop();
}

}  // namespace
}  // namespace loom::test
