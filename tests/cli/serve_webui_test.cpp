// `loom serve` as a user starts it: the chat page at / by default, a plain-text liveness line
// with --no-webui (the flag reaches the server). Both answer before the model has loaded.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/http_test_client.h"

namespace loom {
namespace {

// A port that was free a moment ago.
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Starts `loom serve -m synth:tiny --port P [extra]`, returns GET / (status 0: no answer in 20 s).
test::HttpResult root_of(const char* extra) {
  const uint16_t port = free_port();
  const std::string port_s = std::to_string(port);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<const char*> argv = {LOOM_BINARY, "serve",        "-m",        "synth:tiny",
                                     "--port",    port_s.c_str(), "--threads", "1"};
    if (*extra) argv.push_back(extra);
    argv.push_back(nullptr);
    ::execv(LOOM_BINARY, const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  test::HttpResult root;
  for (int i = 0; i < 400 && root.status == 0; ++i) {
    root = test::http_request(port, "GET", "/");
    if (root.status == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGTERM);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return root;
}

TEST(CliServe, WebPageUnlessNoWebui) {
  const test::HttpResult page = root_of("");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<html"), std::string::npos) << page.body.substr(0, 200);
  const test::HttpResult plain = root_of("--no-webui");
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(plain.body, "loom is running");
}

}  // namespace
}  // namespace loom
