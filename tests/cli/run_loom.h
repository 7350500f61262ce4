// Runs the built `loom` binary as a user would (LOOM_BINARY, set by CMake) and captures its
// exit code and output, for the command-line tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace loom {

struct CmdResult {
  int code;
  std::string out;  // what the command printed (stdout, and stderr where it says 2>&1)
};

// Runs a shell command line and captures its exit code and output.
inline CmdResult run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  CmdResult r{-1, ""};
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// `args` is appended to the binary's path and run through the shell; stdout and stderr.
inline CmdResult run(const std::string& args) {
  return run_shell(std::string(LOOM_BINARY) + " " + args + " 2>&1");
}

// The same with stdout alone (stderr, where loom logs, is dropped): what `loom run` prints.
inline CmdResult run_stdout(const std::string& args) {
  return run_shell(std::string(LOOM_BINARY) + " " + args + " 2>/dev/null");
}

}  // namespace loom
