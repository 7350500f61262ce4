// The `loom` command line. Each subcommand lives in its own cmd_*.cpp and registers itself
// with LOOM_REGISTER_COMMAND; run_main dispatches on argv[1].
#pragma once

namespace loom::cli {

// argv[0] is the subcommand name (e.g. "run"); parse the rest with CLI11.
using CommandFn = int (*)(int argc, char** argv);

struct CommandRegistration {
  CommandRegistration(const char* name, const char* help, CommandFn fn);
};

int run_main(int argc, char** argv);

}  // namespace loom::cli

#define LOOM_REGISTER_COMMAND(name, help, fn) \
  static ::loom::cli::CommandRegistration LOOM_CMD_REG_##fn(name, help, fn)
