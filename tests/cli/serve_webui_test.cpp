// `loom serve` as a user starts it: the chat page at / by default, 404 with --no-webui (the
// flag reaches the server). Both answer before the model has loaded.
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
int status_of_root(const char* extra) {
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
  int status = 0;
  for (int i = 0; i < 400 && status == 0; ++i) {
    status = test::http_request(port, "GET", "/").status;
    if (status == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGTERM);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return status;
}

TEST(CliServe, WebPageUnlessNoWebui) {
  EXPECT_EQ(status_of_root(""), 200);
  EXPECT_EQ(status_of_root("--no-webui"), 404);
}

}  // namespace
}  // namespace loom
