#include "hub/cache.h"

#include <filesystem>
#include <fstream>
#include <system_error>

namespace fs = std::filesystem;

namespace loom::hub {

std::string repo_folder_name(const std::string& repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/')
      out += "--";
    else
      out += c;
  }
  return out;
}

bool is_commit_hash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

RepoCache::RepoCache(const std::string& cache_dir, const std::string& repo)
    : dir_(cache_dir + "/" + repo_folder_name(repo)) {}

std::string RepoCache::blob_path(const std::string& blob_id) const {
  return dir_ + "/blobs/" + blob_id;
}

std::string RepoCache::snapshot_dir(const std::string& commit) const {
  return dir_ + "/snapshots/" + commit;
}

std::string RepoCache::snapshot_path(const std::string& commit, const std::string& file) const {
  return snapshot_dir(commit) + "/" + file;
}

std::optional<std::string> RepoCache::read_ref(const std::string& revision) const {
  if (is_commit_hash(revision)) return revision;
  std::ifstream f(dir_ + "/refs/" + revision);
  std::string commit;
  if (!f || !std::getline(f, commit)) return std::nullopt;
  while (!commit.empty() &&
         (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
    commit.pop_back();
  if (!is_commit_hash(commit)) return std::nullopt;
  return commit;
}

Status RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (is_commit_hash(revision)) return Status::ok();
  std::error_code ec;
  const fs::path ref = fs::path(dir_) / "refs" / revision;
  fs::create_directories(ref.parent_path(), ec);
  const fs::path tmp = ref.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << commit;  // huggingface_hub writes the hash with no newline
    if (!f) return io_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, ref, ec);
  if (ec) return io_error("cannot write " + ref.string() + ": " + ec.message());
  return Status::ok();
}

Status RepoCache::link_snapshot(const std::string& commit, const std::string& file,
                                const std::string& blob_id) const {
  const fs::path link = fs::path(snapshot_path(commit, file));
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return io_error("cannot create " + link.parent_path().string() + ": " + ec.message());
  // snapshots/<commit>/a/b.gguf is two folders below snapshots/: ../../../blobs/<id>.
  std::string target = "../../";
  for (char c : file)
    if (c == '/') target += "../";
  target += "blobs/" + blob_id;
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec) return io_error("cannot link " + link.string() + ": " + ec.message());
  return Status::ok();
}

std::vector<RepoCache::CachedFile> RepoCache::snapshot_files(const std::string& commit) const {
  std::vector<CachedFile> out;
  const fs::path root(snapshot_dir(commit));
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_symlink(ec) && !it->is_regular_file(ec)) continue;
    if (it->is_directory(ec)) continue;
    CachedFile f;
    f.path = it->path().lexically_relative(root).generic_string();  // not through the link
    std::error_code ec2;
    const uintmax_t size = fs::file_size(it->path(), ec2);  // follows the link
    if (ec2) continue;                                      // dangling: the blob is gone
    f.size = size;
    if (it->is_symlink(ec2)) f.blob_id = fs::read_symlink(it->path(), ec2).filename().string();
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace loom::hub
