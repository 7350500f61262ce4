// One loom server per test binary, started lazily in-process on an ephemeral port with the
// synth:tiny model (random weights, placeholder byte vocabulary) and the test chat template
// below, and stopped by a gtest Environment at the end.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "loom/engine.h"
#include "server/server.h"

namespace loom::test {

// A ChatML-like template that marks a prompt that declares tools (a template that never reads
// `tools` makes a request with tools a 400) and also exercises chat_template_kwargs:
// `enable_thinking=false` appends "/no_think" to user turns, and `mode` selects hostile behaviours
// that the interpreter's limits must stop (unbounded recursion, huge output, a very long loop).
inline constexpr const char* kTestChatTemplate =
    "{%- if mode is defined and mode == 'recurse' -%}"
    "{%- macro f(x) -%}{{ f(x) }}{%- endmacro -%}{{ f(1) }}"
    "{%- elif mode is defined and mode == 'huge' -%}"
    "{%- for i in range(100000) -%}{%- for j in range(1000) -%}0123456789abcdef{%- endfor -%}{%- "
    "endfor -%}"
    "{%- elif mode is defined and mode == 'spin' -%}"
    "{%- for i in range(100000) -%}{%- for j in range(100000) -%}{%- endfor -%}{%- endfor -%}"
    "{%- else -%}"
    "{%- if tools -%}<|tools|>{%- endif -%}"
    "{%- for m in messages -%}"
    "<|{{ m['role'] }}|>{{ m['content'] }}"
    "{%- if m['role'] == 'user' and enable_thinking is defined and not enable_thinking %} "
    "/no_think{% endif %}"
    "{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
    "{%- endif -%}";

// A DeepSeek-R1-style template whose generation prompt opens <think>: what the test model
// writes is reasoning (until it happens to write </think>).
inline constexpr const char* kTestReasoningChatTemplate =
    "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|><think>\n{%- endif -%}";

inline constexpr int32_t kTestMaxModelLen = 256;
inline constexpr const char* kTestModelName = "tiny-test";

inline std::unique_ptr<server::Server> start_test_server(server::ServerOptions so, bool load = true,
                                                         const std::string& model = "synth:tiny") {
  so.port = 0;
  if (so.served_model_name.empty()) so.served_model_name = kTestModelName;
  so.model_path = model;
  if (so.chat_template.empty()) so.chat_template = kTestChatTemplate;
  so.io_threads = 2;
  auto s = server::Server::start(so);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  if (!s.is_ok()) return nullptr;
  if (load) {
    EngineConfig ec;
    ec.max_model_len = kTestMaxModelLen;
    ec.max_num_seqs = 64;
    ec.n_threads = 1;
    Status st = (*s)->load(model, ec);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  return std::move(s).value();
}

// A server with `chat_template` on `model` (a synth preset whose vocabulary has the template's
// markers as single tokens), loaded with one thread and 4 sequences of up to max_model_len;
// null, with the failure reported, when it does not start or load.
inline std::unique_ptr<server::Server> start_template_server(std::string chat_template,
                                                             int32_t max_model_len,
                                                             const std::string& model) {
  server::ServerOptions so;
  so.chat_template = std::move(chat_template);
  EXPECT_FALSE(so.chat_template.empty());
  auto s = start_test_server(so, /*load=*/false, model);
  if (!s) return nullptr;
  EngineConfig ec;
  ec.max_model_len = max_model_len;
  ec.max_num_seqs = 4;
  ec.n_threads = 1;
  Status st = s->load(model, ec);
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st.is_ok()) return nullptr;
  return s;
}

// The same on synth:tiny-qwen3 (the Qwen3 vocabulary).
inline std::unique_ptr<server::Server> start_tiny_qwen3_server(std::string chat_template,
                                                               int32_t max_model_len) {
  return start_template_server(std::move(chat_template), max_model_len, "synth:tiny-qwen3");
}

class SharedServerEnv : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(mu());
    server().reset();
  }
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::unique_ptr<server::Server>& server() {
    static std::unique_ptr<server::Server> s;
    return s;
  }
};

inline ::testing::Environment* const kSharedServerEnv =
    ::testing::AddGlobalTestEnvironment(new SharedServerEnv);

inline server::Server& shared_server() {
  std::lock_guard<std::mutex> lock(SharedServerEnv::mu());
  auto& s = SharedServerEnv::server();
  if (!s) s = start_test_server({});
  return *s;
}

inline uint16_t shared_port() {
  return shared_server().port();
}

// Waits until the engine has nothing running or waiting and every KV block is free; returns
// "" or what is still held.
inline std::string wait_engine_idle(server::Server& s,
                                    std::chrono::seconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    EngineMetrics m = s.engine()->metrics();
    if (m.num_running == 0 && m.num_waiting == 0 && m.kv_cache_usage == 0.0) {
      last = s.engine()->engine().check_kv_drained();
      if (last.empty()) return "";
    } else {
      last = "running " + std::to_string(m.num_running) + ", waiting " +
             std::to_string(m.num_waiting) + ", kv usage " + std::to_string(m.kv_cache_usage);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return last;
}

// `n` whole code points from the middle of `text` (a stop string that is valid UTF-8).
inline std::string utf8_middle(const std::string& text, size_t n) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  if (starts.size() < n) return text;
  size_t first = (starts.size() - n) / 2;
  size_t end = first + n < starts.size() ? starts[first + n] : text.size();
  return text.substr(starts[first], end - starts[first]);
}

// A /metrics sample value (first line starting with `name{` or `name `), or -1.
inline double metric_value(const std::string& page, const std::string& name_with_labels_prefix) {
  size_t pos = 0;
  while ((pos = page.find(name_with_labels_prefix, pos)) != std::string::npos) {
    if (pos == 0 || page[pos - 1] == '\n') {
      size_t eol = page.find('\n', pos);
      std::string line = page.substr(pos, eol - pos);
      size_t sp = line.rfind(' ');
      return std::stod(line.substr(sp + 1));
    }
    pos += 1;
  }
  return -1;
}

}  // namespace loom::test
