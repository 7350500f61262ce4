// `loom bench <sub>`: each benchmark (offline, serve, model, ...) is a sub-handler registered
// by name. src/cli/cmd_bench.cpp only dispatches. Register a new one from a file in src/cli/
// (that library is linked whole, so its static registrations always run), e.g. in
// src/cli/cmd_bench_serve.cpp:
//   LOOM_REGISTER_BENCH("serve", "load-test an OpenAI endpoint", bench::serve_main);
#pragma once

namespace loom::bench {

// argv[0] is the sub-benchmark's name; parse the rest with CLI11.
using BenchFn = int (*)(int argc, char** argv);

struct BenchRegistration {
  BenchRegistration(const char* name, const char* help, BenchFn fn);
};

// Dispatches argv[1] (argv[0] is "bench") to its handler; prints the list on --help or error.
int run_bench(int argc, char** argv);

}  // namespace loom::bench

#define LOOM_BENCH_CONCAT_INNER(a, b) a##b
#define LOOM_BENCH_CONCAT(a, b) LOOM_BENCH_CONCAT_INNER(a, b)
#define LOOM_REGISTER_BENCH(name, help, fn) \
  static ::loom::bench::BenchRegistration LOOM_BENCH_CONCAT(loom_bench_reg_, __LINE__)(name, help, fn)
