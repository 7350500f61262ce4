#include "bench/bench_registry.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

namespace loom::bench {
namespace {

struct Entry {
  const char* help;
  BenchFn fn;
};

std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}

void print_usage() {
  std::fprintf(stderr, "usage: loom bench <benchmark> [options]\n\nbenchmarks:\n");
  for (const auto& [name, e] : registry())
    std::fprintf(stderr, "  %-10s %s\n", name.c_str(), e.help);
  std::fprintf(stderr, "\n'loom bench <benchmark> --help' shows its options.\n");
}

}  // namespace

BenchRegistration::BenchRegistration(const char* name, const char* help, BenchFn fn) {
  registry()[name] = Entry{help, fn};
}

int run_bench(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 1 : 0;
  }
  auto it = registry().find(argv[1]);
  if (it == registry().end()) {
    std::fprintf(stderr, "loom bench: unknown benchmark '%s'\n\n", argv[1]);
    print_usage();
    return 1;
  }
  return it->second.fn(argc - 1, argv + 1);
}

}  // namespace loom::bench
