// Entry point of the `loom` command line; each subcommand lives in its own cmd_*.cpp.
#pragma once

namespace loom::cli {

int run_main(int argc, char** argv);

}  // namespace loom::cli
