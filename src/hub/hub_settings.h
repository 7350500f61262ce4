// Where `loom pull` talks to and where it stores files: the Hugging Face Hub endpoint, token
// and cache folder, read from the same environment variables huggingface_hub reads, so the
// files loom downloads are shared with every other tool that uses that cache.
#pragma once

#include <string>

#include "base/status.h"

namespace loom::hub {

struct HubSettings {
  std::string endpoint;   // HF_ENDPOINT, default https://huggingface.co (no trailing slash)
  std::string token;      // HF_TOKEN: sent as `Authorization: Bearer` ("" = none)
  std::string cache_dir;  // HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  bool offline = false;   // HF_HUB_OFFLINE=1: the cache only, no network at all

  static Result<HubSettings> from_env();
};

// A repository reference as the command line writes it: `ORG/NAME[:QUANT]`.
struct RepoSpec {
  std::string repo;  // ORG/NAME
  std::string tag;   // quant tag ("" = the default choice)
};

// Refuses names that could leave the cache folder or that the Hub would not accept.
Result<RepoSpec> parse_repo_spec(const std::string& text);

}  // namespace loom::hub
