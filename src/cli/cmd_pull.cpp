// `loom pull REPO[:QUANT]`: download a model from the Hugging Face Hub into the standard cache
// ($HF_HUB_CACHE, else $HF_HOME/hub) and print the path to give -m. src/hub does the work.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/format_bytes.h"
#include "cli/commands.h"
#include "hub/progress.h"
#include "hub/pull.h"

namespace loom::cli {
namespace {

int cmd_pull(int argc, char** argv) {
  CLI::App app{"Download a model from the Hugging Face Hub into the local cache", "loom pull"};
  std::string spec_text;
  hub::PullOptions o;
  app.add_option("repo", spec_text,
                 "ORG/NAME[:QUANT]: the GGUF whose name holds QUANT (any case; default Q4_K_M, "
                 "then Q8_0, then the first), or :safetensors for the checkpoint")
      ->required();
  app.add_option("--revision", o.revision, "branch, tag or commit")->capture_default_str();
  app.add_flag("--refresh", o.refresh,
               "ask the Hub for the revision's latest commit even when the cache holds the files");
  app.add_flag("-q,--quiet", o.quiet, "no progress output");
  CLI11_PARSE(app, argc, argv);

  auto spec = hub::parse_repo_spec(spec_text);
  auto settings = hub::HubSettings::from_env();
  if (!spec.is_ok() || !settings.is_ok()) {
    std::fprintf(stderr, "loom pull: %s\n",
                 (!spec.is_ok() ? spec.status() : settings.status()).message().c_str());
    return 1;
  }
  auto r = hub::pull(*spec, *settings, o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "loom pull: %s\n", r.status().message().c_str());
    return 1;
  }
  if (!o.quiet) {
    if (r->from_cache)
      std::fprintf(stderr, "loom pull: %s is in the cache (commit %s)\n", spec_text.c_str(),
                   r->commit.c_str());
    else
      std::fprintf(stderr, "loom pull: %s at commit %s: %zu file(s), %s downloaded\n",
                   spec_text.c_str(), r->commit.c_str(), r->files.size(),
                   format_bytes(r->bytes_downloaded).c_str());
  }
  std::printf("%s\n", r->model_path.c_str());  // what -m takes
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("pull", "download a model from the Hugging Face Hub (REPO[:QUANT])",
                      cmd_pull);

}  // namespace loom::cli
