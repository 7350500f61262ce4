// `loom template` run as a subprocess: renders a fixture byte for byte (no added newline),
// accepts both a bare context and a fixture case file, and exits 1 with the message on
// stderr when the template raises.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace {

struct CmdResult {
  int status;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CmdResult run(const std::string& args) {
  std::string err_path = testing::TempDir() + "/loom_template_stderr_" + std::to_string(getpid());
  std::string cmd = std::string(LOOM_BINARY) + " template " + args + " 2>" + err_path;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "", ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  std::string err = slurp(err_path);
  std::remove(err_path.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out, err};
}

std::string data(const std::string& rel) {
  return std::string(LOOM_TEST_DATA) + "/chat_templates/" + rel;
}

TEST(TemplateCli, RendersFixtureCaseFileExactly) {
  auto c = nlohmann::json::parse(slurp(data("Qwen-Qwen3-0.6B.tools.json")));
  CmdResult r = run("--template " + data("Qwen-Qwen3-0.6B.jinja") + " --context " +
                    data("Qwen-Qwen3-0.6B.tools.json"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, c["expected"].get<std::string>());
}

TEST(TemplateCli, RendersBareContextExactly) {
  auto c = nlohmann::ordered_json::parse(slurp(data("meta-llama-Llama-3.1-8B-Instruct.tools.json")));
  std::string ctx_path = testing::TempDir() + "/loom_template_ctx_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream f(ctx_path, std::ios::binary);
    f << c["context"].dump();
  }
  CmdResult r = run("-t " + data("meta-llama-Llama-3.1-8B-Instruct.jinja") + " -c " + ctx_path);
  std::remove(ctx_path.c_str());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, c["expected"].get<std::string>());
}

TEST(TemplateCli, TemplateErrorExitsOneWithMessage) {
  CmdResult r = run("--template " + data("google-gemma-2-2b-it.jinja") + " --context " +
                    data("google-gemma-2-2b-it.system_multi.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("System role not supported"), std::string::npos) << r.err;
}

TEST(TemplateCli, MissingFileAndBadJsonExitOne) {
  CmdResult r = run("--template /nonexistent.jinja --context " + data("google-gemma-2-2b-it.simple.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  r = run("--template " + data("google-gemma-2-2b-it.jinja") + " --context " + data("google-gemma-2-2b-it.jinja"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
}

}  // namespace
