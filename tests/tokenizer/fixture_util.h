// Reads the llama.cpp-style tokenizer fixtures: .inp holds cases each followed by
// "\n__ggml_vocab_test__\n"; .out holds one line of space-separated ids per case.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace loom::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> read_cases(const std::string& path) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string all = read_file(path);
  std::vector<std::string> cases;
  size_t pos = 0;
  for (;;) {
    size_t p = all.find(sep, pos);
    if (p == std::string::npos) break;
    cases.push_back(all.substr(pos, p - pos));
    pos = p + sep.size();
  }
  return cases;
}

inline std::vector<std::vector<int32_t>> read_ids(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int64_t x;
    while (ls >> x) ids.push_back(static_cast<int32_t>(x));
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace loom::testing
