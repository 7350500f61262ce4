// The Hugging Face cache layout, as huggingface_hub writes it, so other tools share the files:
//   <cache>/models--ORG--NAME/blobs/<sha256 or git blob id>    file contents
//                             blobs/<id>.incomplete             a download in progress
//                             snapshots/<commit>/<path>         relative symlink to the blob
//                             refs/<revision>                   the commit the revision names
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom::hub {

class RepoCache {
 public:
  RepoCache(const std::string& cache_dir, const std::string& repo);

  const std::string& dir() const { return dir_; }  // <cache>/models--ORG--NAME
  std::string blob_path(const std::string& blob_id) const;
  std::string snapshot_dir(const std::string& commit) const;
  std::string snapshot_path(const std::string& commit, const std::string& file) const;

  // The commit refs/<revision> holds, if any (a 40-hex revision is its own commit).
  std::optional<std::string> read_ref(const std::string& revision) const;
  Status write_ref(const std::string& revision, const std::string& commit) const;

  // snapshots/<commit>/<file> → ../../blobs/<blob_id> (as many "../" as the file is deep).
  Status link_snapshot(const std::string& commit, const std::string& file,
                       const std::string& blob_id) const;

  // Files of a snapshot whose link resolves to a present blob, with their sizes and blob ids
  // (read from the link), for choosing a model without the network.
  struct CachedFile {
    std::string path;
    uint64_t size = 0;
    std::string blob_id;
  };
  std::vector<CachedFile> snapshot_files(const std::string& commit) const;

 private:
  std::string dir_;
};

// "models--ORG--NAME", huggingface_hub's folder name for a model repository.
std::string repo_folder_name(const std::string& repo);

bool is_commit_hash(const std::string& s);

}  // namespace loom::hub
