// `loom pull REPO[:QUANT]`: resolve a revision of a Hugging Face repository, choose the files
// for the quant tag, download what the cache lacks (resuming partial files, verifying sizes and
// the Hub's sha256), and link them into the snapshot folder. A revision already resolved in the
// cache whose snapshot holds the chosen files is served with no network request at all.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "hub/hub_settings.h"

namespace loom::hub {

struct PullOptions {
  std::string revision = "main";
  bool refresh = false;  // ask the Hub for the revision even when the cache could answer
  bool quiet = false;    // no progress output
  int max_attempts = 5;  // per file, for dropped connections (each resumes where it stopped)
};

struct PullResult {
  std::string model_path;  // for -m: the (first part of the) GGUF, or the checkpoint folder
  std::string commit;
  std::vector<std::string> files;  // snapshot paths of every chosen file
  bool from_cache = false;         // no request was made
  uint64_t bytes_downloaded = 0;
};

Result<PullResult> pull(const RepoSpec& spec, const HubSettings& settings,
                        const PullOptions& options);

// -hf's one-call form: settings from the environment, progress on stderr.
Result<std::string> pull_for_model_flag(const std::string& repo_spec);

}  // namespace loom::hub
