// A repository's file listing (the Hub's tree API) and the choice of what to download for a
// quant tag: one GGUF (all parts of a split one), or a safetensors checkpoint with its config
// and tokenizer. The GGUF choice follows llama.cpp's `-hf`: the tag matches file names
// case-insensitively when followed by '.' or '-'; with no tag, Q4_K_M, then Q8_0, then the
// first model file. mmproj / imatrix / draft files are never the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom::hub {

struct RepoFile {
  std::string path;  // relative to the repository root, '/'-separated
  uint64_t size = 0;
  std::string blob_id;  // cache blob name: the LFS sha256, else the git blob id (the ETag)
  std::string sha256;   // "" when the Hub lists none (not an LFS file)
};

// Parses the JSON of GET /api/models/{repo}/tree/{rev}?recursive=true. Folders are skipped;
// a path that could leave the snapshot folder, or a malformed id, is an error.
Result<std::vector<RepoFile>> parse_tree_listing(const std::string& json);

// True for a path that stays inside the folder it is joined to.
bool is_safe_relative_path(const std::string& path);

// `name-00001-of-00003.gguf` → {1, 3}; a single file → {1, 1}; not a GGUF → nullopt.
struct SplitInfo {
  std::string prefix;  // the name without the split suffix and ".gguf"
  int index = 1, count = 1;
};
std::optional<SplitInfo> gguf_split_info(const std::string& path);

struct Selection {
  std::vector<RepoFile> files;  // to download, the model's first file first
  std::string primary;          // what -m gets: the (first) GGUF, or "" for a checkpoint folder
  bool safetensors = false;
};

// The files for `tag` ("" = default; "safetensors" asks for the checkpoint). `repo` names the
// repository in errors, which list the GGUF files there are.
Result<Selection> select_files(const std::vector<RepoFile>& files, const std::string& tag,
                               const std::string& repo);

}  // namespace loom::hub
