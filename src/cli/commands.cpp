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
  // -hf / -hfr (llama.cpp's spelling) → --hf-repo: CLI11 reads a single dash as one letter.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& a : args) {
    if (a == "-hf" || a == "-hfr")
      a = "--hf-repo";
    else if (a.rfind("-hf=", 0) == 0 || a.rfind("-hfr=", 0) == 0)
      a = "--hf-repo" + a.substr(a.find('='));
  }
  std::vector<char*> args_c;
  for (std::string& a : args) args_c.push_back(a.data());
  args_c.push_back(nullptr);
  return it->second.fn(static_cast<int>(args.size()), args_c.data());
}

}  // namespace loom::cli
