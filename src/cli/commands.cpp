#include "cli/commands.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/version.h"
#include "kernels/cpu/isa.h"

namespace loom::cli {
namespace {

struct Entry {
  const char* help;
  CommandFn fn;
};

std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}

void print_usage() {
  std::fprintf(stderr, "usage: loom <command> [options]\n\ncommands:\n");
  for (const auto& [name, e] : registry())
    std::fprintf(stderr, "  %-10s %s\n", name.c_str(), e.help);
  std::fprintf(
      stderr,
      "\n'loom <command> --help' shows a command's options; 'loom --version' the version.\n");
}

}  // namespace

CommandRegistration::CommandRegistration(const char* name, const char* help, CommandFn fn) {
  registry()[name] = Entry{help, fn};
}

int run_main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 1 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "version") == 0) {
    const BuildInfo& b = build_info();
    std::printf("loom %s (commit %s, %s, %s build, kernels: %s)\n", b.version.c_str(),
                b.commit.c_str(), b.compiler.c_str(), b.build_type.c_str(),
                kernels::kernels_name().c_str());
    return 0;
  }
  auto it = registry().find(argv[1]);
  if (it == registry().end()) {
    std::fprintf(stderr, "loom: unknown command '%s'\n\n", argv[1]);
    print_usage();
    return 1;
  }
  // llama.cpp's multi-letter single-dash names, -hf / -hfr → --hf-repo and -md → --model-draft:
  // CLI11 reads a single dash as one letter (-md would be -m d).
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& a : args) {
    for (const auto& [from, to] : {std::pair{"-hf", "--hf-repo"}, std::pair{"-hfr", "--hf-repo"},
                                   std::pair{"-md", "--model-draft"}}) {
      const std::string prefix = std::string(from) + "=";
      if (a == from)
        a = to;
      else if (a.rfind(prefix, 0) == 0)
        a = to + a.substr(prefix.size() - 1);
    }
  }
  std::vector<char*> args_c;
  for (std::string& a : args) args_c.push_back(a.data());
  args_c.push_back(nullptr);
  return it->second.fn(static_cast<int>(args.size()), args_c.data());
}

}  // namespace loom::cli
