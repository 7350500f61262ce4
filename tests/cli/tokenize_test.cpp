// `loom tokenize` run as a subprocess on the tokenizer fixtures.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace {

struct CmdResult {
  int status;
  std::string out;
};

CmdResult run(const std::string& args) {
  std::string cmd = std::string(LOOM_BINARY) + " tokenize " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string data(const std::string& rel) { return std::string(LOOM_TEST_DATA) + "/" + rel; }

// The i-th case of a fixture (.inp cases end at "\n__ggml_vocab_test__\n") and its .out line.
std::pair<std::string, std::string> fixture_case(const std::string& base, int i) {
  std::ifstream f(base + ".inp", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string all = ss.str();
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  for (int k = 0; k < i; ++k) pos = all.find(sep, pos) + sep.size();
  std::string text = all.substr(pos, all.find(sep, pos) - pos);
  std::ifstream o(base + ".out");
  std::string line;
  for (int k = 0; k <= i; ++k) std::getline(o, line);
  // .out lines are " id id id"; the CLI prints "id id id".
  while (!line.empty() && line.front() == ' ') line.erase(0, 1);
  return {text, line};
}

std::string write_temp(const std::string& name, const std::string& content) {
  auto p = std::filesystem::temp_directory_path() / ("loom_tokenize_test_" + std::to_string(getpid()) + name);
  std::ofstream(p, std::ios::binary) << content;
  return p.string();
}

TEST(CliTokenize, GgufVocabFromFile) {
  for (const char* vocab : {"llama-spm", "qwen3"}) {
    for (int i : {0, 10, 23, 31}) {
      auto [text, expected] = fixture_case(data(std::string("vocab/ggml-vocab-") + vocab + ".gguf"), i);
      std::string path = write_temp("case.txt", text);
      CmdResult r = run("-m " + data(std::string("vocab/ggml-vocab-") + vocab + ".gguf") + " --file " + path);
      std::filesystem::remove(path);
      EXPECT_EQ(r.status, 0);
      EXPECT_EQ(r.out, expected + "\n") << vocab << " case " << i;
    }
  }
}

TEST(CliTokenize, HfDirectoryAndFlags) {
  auto [text, expected] = fixture_case(data("hf_tokenizers/qwen3/cases"), 11);
  ASSERT_EQ(text, "Hello world");
  CmdResult r = run("-m " + data("hf_tokenizers/qwen3") + " 'Hello world'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, expected + "\n");
  CmdResult special = run("-m " + data("hf_tokenizers/qwen3") + " --parse-special '<|im_start|>user'");
  EXPECT_EQ(special.status, 0);
  EXPECT_EQ(special.out, "151644 872\n");
  CmdResult plain = run("-m " + data("hf_tokenizers/qwen3") + " '<|im_start|>user'");
  EXPECT_EQ(plain.status, 0);
  EXPECT_NE(plain.out, special.out);
  CmdResult bos = run("-m " + data("vocab/ggml-vocab-llama-spm.gguf") + " --add-special 'Hello world'");
  EXPECT_EQ(bos.out.rfind("1 ", 0), 0u) << bos.out;
}

TEST(CliTokenize, BadPathsFail) {
  EXPECT_EQ(run("-m /nonexistent/model.gguf hello").status, 1);
  EXPECT_EQ(run("-m " + data("vocab") + " hello").status, 1);  // a directory without tokenizer.json
  EXPECT_EQ(run("-m " + data("vocab/ggml-vocab-qwen3.gguf") + " --file /nonexistent.txt").status, 1);
  EXPECT_EQ(run("-m " + data("vocab/ggml-vocab-qwen3.gguf")).status, 1);  // no text
}

}  // namespace
