#include "hub/pull.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/format_bytes.h"
#include "hub/cache.h"
#include "hub/http.h"
#include "hub/progress.h"
#include "hub/repo_files.h"
#include "hub/sha256.h"

namespace fs = std::filesystem;

namespace loom::hub {
namespace {

// Percent-encodes everything but unreserved characters (and '/' where `keep_slash`).
std::string url_encode(const std::string& s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The Hub's answer to an API call, as an error a user can act on.
Status http_error(const std::string& what, long status, const HubSettings& s,
                  const std::string& repo) {
  if (status == 401 || status == 403) {
    if (s.token.empty())
      return invalid_argument(repo + " needs authentication (HTTP " + std::to_string(status) +
                              "; a gated or private repository): accept its terms on the Hub "
                              "and set HF_TOKEN to an access token");
    return invalid_argument("the Hub refused HF_TOKEN for " + repo + " (HTTP " +
                            std::to_string(status) +
                            "): check the token and that its account may access the repository");
  }
  if (status == 404)
    return not_found(what + ": not found on " + s.endpoint + " (HTTP 404): check the name");
  return io_error(what + ": HTTP " + std::to_string(status) + " from " + s.endpoint);
}

struct Resolved {
  std::string commit;
  std::vector<RepoFile> files;
};

Result<Resolved> resolve_online(const RepoSpec& spec, const HubSettings& s, const PullOptions& o,
                                const HttpOptions& http) {
  const std::string api = s.endpoint + "/api/models/" + spec.repo;
  LOOM_ASSIGN_OR_RETURN(HttpResponse rev,
                        http_get(api + "/revision/" + url_encode(o.revision, false), http));
  if (rev.status != 200)
    return http_error(spec.repo + " revision '" + o.revision + "'", rev.status, s, spec.repo);
  nlohmann::json j = nlohmann::json::parse(rev.body, nullptr, false);
  Resolved r;
  if (j.is_object() && j.contains("sha") && j["sha"].is_string()) r.commit = j["sha"];
  if (!is_commit_hash(r.commit))
    return invalid_file("the Hub's answer for " + spec.repo + " revision '" + o.revision +
                        "' holds no commit hash");
  std::string url = api + "/tree/" + r.commit + "?recursive=true";
  for (int page = 0; !url.empty(); ++page) {
    if (page == 1000) return io_error(spec.repo + ": the file listing does not end");
    LOOM_ASSIGN_OR_RETURN(HttpResponse tree, http_get(url, http));
    if (tree.status != 200)
      return http_error(spec.repo + " file listing", tree.status, s, spec.repo);
    LOOM_ASSIGN_OR_RETURN(std::vector<RepoFile> files, parse_tree_listing(tree.body));
    r.files.insert(r.files.end(), files.begin(), files.end());
    url = tree.next_url;  // long listings come in pages
  }
  return r;
}

// The snapshot of `commit` holds every file of the selection (links to present blobs).
Result<Selection> select_cached(const RepoCache& cache, const std::string& commit,
                                const RepoSpec& spec) {
  std::vector<RepoFile> files;
  for (const RepoCache::CachedFile& c : cache.snapshot_files(commit))
    files.push_back(RepoFile{c.path, c.size, c.blob_id, ""});
  if (files.empty()) return not_found(spec.repo + ": nothing cached for commit " + commit);
  return select_files(files, spec.tag, spec.repo);
}

bool blob_ready(const std::string& path, uint64_t size) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::file_size(path, ec) == size && !ec;
}

// Downloads one file into blobs/<id> through blobs/<id>.incomplete.
Status fetch_blob(const RepoSpec& spec, const HubSettings& s, const PullOptions& o,
                  const HttpOptions& http, const std::string& commit, const RepoFile& f,
                  const std::string& blob, uint64_t* downloaded) {
  const std::string partial = blob + ".incomplete";
  std::error_code ec;
  fs::create_directories(fs::path(blob).parent_path(), ec);
  if (ec) return io_error("cannot create " + fs::path(blob).parent_path().string());
  if (fs::exists(partial, ec) && fs::file_size(partial, ec) > f.size) fs::remove(partial, ec);
  const std::string url =
      s.endpoint + "/" + spec.repo + "/resolve/" + commit + "/" + url_encode(f.path, true);
  DownloadProgress progress = DownloadProgress::for_stderr(o.quiet);
  uint64_t have = fs::exists(partial, ec) ? fs::file_size(partial, ec) : 0;
  progress.start(f.path, f.size, have);
  const uint64_t at_start = have;
  std::string last_error;
  bool complete = have == f.size && f.size > 0;
  for (int attempt = 0; !complete && attempt < std::max(o.max_attempts, 1); ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(attempt, 5)));
      if (!o.quiet)
        std::fprintf(stderr, "\nloom pull: %s: %s; resuming (attempt %d of %d)\n", f.path.c_str(),
                     last_error.c_str(), attempt + 1, o.max_attempts);
    }
    LOOM_ASSIGN_OR_RETURN(DownloadResult d,
                          http_download(url, http, partial, f.size,
                                        [&](uint64_t now, uint64_t) { progress.update(now); }));
    if (d.status >= 400) {
      progress.finish(false);
      return http_error(spec.repo + "/" + f.path, d.status, s, spec.repo);
    }
    have = fs::exists(partial, ec) ? fs::file_size(partial, ec) : 0;
    complete = d.complete;
    last_error = d.error.empty() ? "connection closed" : d.error;
  }
  progress.finish(complete);
  if (!complete)
    return io_error("downloading " + spec.repo + "/" + f.path + " failed after " +
                    std::to_string(o.max_attempts) + " attempts (" + last_error +
                    "); run the command again to resume from " + format_bytes(have));
  *downloaded += have >= at_start ? have - at_start : have;
  if (have != f.size) {
    fs::remove(partial, ec);
    return invalid_file(spec.repo + "/" + f.path + ": downloaded " + std::to_string(have) +
                        " bytes but the Hub lists " + std::to_string(f.size) +
                        "; the file was removed");
  }
  if (!f.sha256.empty()) {
    LOOM_ASSIGN_OR_RETURN(std::string digest, sha256_file(partial));
    if (digest != f.sha256) {
      fs::remove(partial, ec);
      return invalid_file(spec.repo + "/" + f.path + ": sha256 mismatch (the Hub lists " +
                          f.sha256 + ", the download has " + digest +
                          "); the file was refused and removed");
    }
  }
  fs::rename(partial, blob, ec);
  if (ec) return io_error("cannot move " + partial + " to " + blob + ": " + ec.message());
  return Status::ok();
}

}  // namespace

Result<PullResult> pull(const RepoSpec& spec, const HubSettings& s, const PullOptions& o) {
  if (!is_safe_relative_path(o.revision))
    return invalid_argument("revision '" + o.revision + "' is not a branch, tag or commit name");
  RepoCache cache(s.cache_dir, spec.repo);
  PullResult result;
  auto finish = [&](const std::string& commit, const Selection& sel) {
    result.commit = commit;
    result.model_path =
        sel.safetensors ? cache.snapshot_dir(commit) : cache.snapshot_path(commit, sel.primary);
    for (const RepoFile& f : sel.files) result.files.push_back(cache.snapshot_path(commit, f.path));
  };

  // The cache first: a revision resolved before, whose snapshot holds the files.
  if (!o.refresh || s.offline) {
    if (auto commit = cache.read_ref(o.revision)) {
      auto sel = select_cached(cache, *commit, spec);
      if (sel.is_ok()) {
        result.from_cache = true;
        finish(*commit, *sel);
        return result;
      }
      if (s.offline)
        return not_found(sel.status().message() + " (HF_HUB_OFFLINE is set: the cache only)");
    }
    if (s.offline)
      return not_found(spec.repo + " revision '" + o.revision + "' is not in the cache " +
                       cache.dir() + " (HF_HUB_OFFLINE is set: the cache only)");
  }

  HttpOptions http;
  http.bearer_token = s.token;
  LOOM_ASSIGN_OR_RETURN(Resolved r, resolve_online(spec, s, o, http));
  LOOM_ASSIGN_OR_RETURN(Selection sel, select_files(r.files, spec.tag, spec.repo));
  LOOM_RETURN_IF_ERROR(cache.write_ref(o.revision, r.commit));
  for (const RepoFile& f : sel.files) {
    const std::string blob = cache.blob_path(f.blob_id);
    if (!blob_ready(blob, f.size))
      LOOM_RETURN_IF_ERROR(
          fetch_blob(spec, s, o, http, r.commit, f, blob, &result.bytes_downloaded));
    LOOM_RETURN_IF_ERROR(cache.link_snapshot(r.commit, f.path, f.blob_id));
  }
  finish(r.commit, sel);
  return result;
}

Result<std::string> pull_for_model_flag(const std::string& repo_spec) {
  LOOM_ASSIGN_OR_RETURN(RepoSpec spec, parse_repo_spec(repo_spec));
  LOOM_ASSIGN_OR_RETURN(HubSettings settings, HubSettings::from_env());
  LOOM_ASSIGN_OR_RETURN(PullResult r, pull(spec, settings, PullOptions{}));
  if (!r.from_cache)
    std::fprintf(stderr, "loom: pulled %s into %s\n", repo_spec.c_str(), r.model_path.c_str());
  return r.model_path;
}

}  // namespace loom::hub
