// loom: one binary for every subcommand (run, serve, bench, eval, synth, convert, quantize,
// inspect, tokenize, template).
#include "cli/commands.h"

int main(int argc, char** argv) { return loom::cli::run_main(argc, argv); }
