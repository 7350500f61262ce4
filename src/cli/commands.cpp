#include "cli/commands.h"

#include <cstdio>

namespace loom::cli {

int run_main(int argc, char** argv) {
  std::fprintf(stderr, "loom: no subcommands yet\n");
  return 1;
}

}  // namespace loom::cli
