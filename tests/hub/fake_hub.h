// Runs tests/hub/fake_hub.js (a fake Hugging Face Hub on loopback) for the duration of a test,
// and reads its request log: the tests count what loom asked for.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace loom::test {

class FakeHub {
 public:
  // `config`: the JSON fake_hub.js reads (see its header); files written under `dir`.
  FakeHub(const nlohmann::json& config, const std::string& dir)
      : config_path_(dir + "/hub_config.json"), log_path_(dir + "/hub_log.jsonl") {
    std::ofstream(config_path_) << config.dump();
    std::ofstream(log_path_, std::ios::trunc).flush();
    const std::string port_path = dir + "/hub_port";
    std::filesystem::remove(port_path);
    const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/hub/fake_hub.js";
    const std::string cmd = "exec node '" + script + "' '" + config_path_ + "' '" + log_path_ +
                            "' > '" + port_path + "'";
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
      pid_ = -1;
      return;
    }
    for (int i = 0; i < 300 && port_ == 0; ++i) {  // node starts in well under 30 s
      std::ifstream in(port_path);
      std::string word;
      if (in >> word >> port_ && word == "PORT") break;
      port_ = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~FakeHub() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  bool ok() const { return port_ != 0; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Every request so far: {method, url, range, auth}.
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_path_);
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  // Requests for file contents (resolve or CDN), as opposed to the API.
  std::vector<nlohmann::json> file_requests() const {
    std::vector<nlohmann::json> out;
    for (const auto& r : requests())
      if (r["url"].get<std::string>().rfind("/api/", 0) != 0) out.push_back(r);
    return out;
  }

 private:
  std::string config_path_, log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Skips the calling test when node is missing (the suite's other node tests do the same).
inline bool have_node() {
  return std::system("command -v node > /dev/null 2>&1") == 0;
}

}  // namespace loom::test
