// `loom pull` against a fake Hub on loopback (tests/hub/fake_hub.js): the cache layout
// huggingface_hub writes, resume after a dropped connection or an interrupted run, sha256
// refusal, gated repositories, cache reuse with no request, split GGUFs, safetensors.
#include "hub/pull.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/node_packages.h"
#include "format/format_test_util.h"
#include "format/gguf.h"
#include "hub/cache.h"
#include "hub/fake_hub.h"

namespace loom::hub {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCommit = "4f9a1c2b3d4e5f60718293a4b5c6d7e8f9012345";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_node()) GTEST_SKIP() << "node is not installed: no fake Hub";
    settings_.cache_dir = dir_.file("hf/hub");
  }

  // A file of random bytes under the test folder, for the hub to serve.
  std::string make_file(const std::string& name, size_t size) {
    std::mt19937_64 rng(std::hash<std::string>{}(name));
    const std::string path = dir_.file(name);
    test::write_file(path, test::random_bytes(rng, size));
    return path;
  }

  void start(const json& repos) {
    hub_ = std::make_unique<test::FakeHub>(json{{"repos", repos}}, dir_.path());
    ASSERT_TRUE(hub_->ok()) << "the fake hub did not start";
    settings_.endpoint = hub_->endpoint();
  }

  Result<PullResult> pull_spec(const std::string& text, PullOptions o = {}) {
    o.quiet = true;
    auto spec = parse_repo_spec(text);
    if (!spec.is_ok()) return spec.status();
    return pull(*spec, settings_, o);
  }

  test::TempDir dir_;
  HubSettings settings_;
  std::unique_ptr<test::FakeHub> hub_;
};

TEST_F(PullTest, StoresFilesInTheHuggingFaceCacheLayout) {
  const std::string q4 = make_file("q4.bin", 150000), q8 = make_file("q8.bin", 90000);
  const std::string cfg = make_file("config.bin", 300);
  start({{"acme/tiny-GGUF",
          {{"commit", kCommit},
           {"files",
            {{{"path", "tiny-Q8_0.gguf"}, {"source", q8}, {"lfs", true}},
             {{"path", "tiny-Q4_K_M.gguf"}, {"source", q4}, {"lfs", true}},
             {{"path", "mmproj-tiny-Q4_K_M.gguf"}, {"source", q8}, {"lfs", true}},
             {{"path", "config.json"}, {"source", cfg}}}}}}});
  auto r = pull_spec("acme/tiny-GGUF");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::string repo_dir = settings_.cache_dir + "/models--acme--tiny-GGUF";
  EXPECT_EQ(read_all(repo_dir + "/refs/main"), kCommit);
  const std::string link = repo_dir + "/snapshots/" + kCommit + "/tiny-Q4_K_M.gguf";
  EXPECT_EQ(r->model_path, link);
  EXPECT_EQ(r->commit, kCommit);
  ASSERT_TRUE(fs::is_symlink(link));
  // A relative link to blobs/<sha256 of the content> (sha256sum's answer for q4.bin).
  int rc = 0;
  std::string sum = test::run_command("sha256sum '" + q4 + "' | cut -c1-64", &rc);
  sum.resize(64);
  EXPECT_EQ(fs::read_symlink(link).string(), "../../blobs/" + sum);
  EXPECT_EQ(read_all(link), read_all(q4));
  EXPECT_FALSE(fs::exists(repo_dir + "/snapshots/" + kCommit + "/tiny-Q8_0.gguf"));
  EXPECT_FALSE(fs::exists(repo_dir + "/blobs/" + sum + ".incomplete"));
  EXPECT_EQ(r->bytes_downloaded, 150000u);

  // A second quant of the same commit shares the snapshot folder.
  auto r8 = pull_spec("acme/tiny-GGUF:q8_0");
  ASSERT_TRUE(r8.is_ok()) << r8.status().message();
  EXPECT_EQ(read_all(r8->model_path), read_all(q8));
  EXPECT_TRUE(fs::exists(link));
}

TEST_F(PullTest, ResumesAfterAConnectionDropsMidFile) {
  const std::string src = make_file("m.bin", 400000);
  start(
      {{"acme/m",
        {{"commit", kCommit},
         {"files",
          {{{"path", "m-Q8_0.gguf"}, {"source", src}, {"lfs", true}, {"drop_after", 123457}}}}}}});
  auto r = pull_spec("acme/m:Q8_0");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(read_all(r->model_path), read_all(src));
  // The retry asked for the rest only.
  bool resumed = false;
  for (const auto& q : hub_->file_requests()) resumed |= q["range"] == "bytes=123457-";
  EXPECT_TRUE(resumed) << "no Range request from the dropped offset";
  EXPECT_EQ(r->bytes_downloaded, 400000u);
}

TEST_F(PullTest, ResumesThePartialFileOfAnInterruptedRun) {
  const std::string src = make_file("m.bin", 200000);
  start({{"acme/m",
          {{"commit", kCommit},
           {"files", {{{"path", "m-Q8_0.gguf"}, {"source", src}, {"lfs", true}}}}}}});
  int rc = 0;
  std::string sum = test::run_command("sha256sum '" + src + "' | cut -c1-64", &rc);
  sum.resize(64);
  const std::string blobs = settings_.cache_dir + "/models--acme--m/blobs/";
  fs::create_directories(blobs);
  const std::string bytes = read_all(src);
  test::write_file(blobs + sum + ".incomplete", bytes.substr(0, 77777));
  auto r = pull_spec("acme/m");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(read_all(r->model_path), bytes);
  const auto reqs = hub_->file_requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.front()["range"], "bytes=77777-");
  EXPECT_EQ(r->bytes_downloaded, 200000u - 77777u);
}

TEST_F(PullTest, AWrongChecksumIsRefusedAndRemoved) {
  const std::string src = make_file("m.bin", 50000);
  start({{"acme/bad",
          {{"commit", kCommit},
           {"files",
            {{{"path", "m-Q8_0.gguf"}, {"source", src}, {"lfs", true}, {"corrupt", true}}}}}}});
  auto r = pull_spec("acme/bad");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("sha256 mismatch"), std::string::npos)
      << r.status().message();
  const std::string repo_dir = settings_.cache_dir + "/models--acme--bad";
  size_t blobs = 0;
  for (const auto& e : fs::directory_iterator(repo_dir + "/blobs")) {
    (void)e;
    ++blobs;
  }
  EXPECT_EQ(blobs, 0u) << "neither the blob nor its .incomplete may stay";
  EXPECT_FALSE(fs::exists(repo_dir + "/snapshots/" + std::string(kCommit) + "/m-Q8_0.gguf"));
}

TEST_F(PullTest, GatedRepositoryNeedsHfToken) {
  const std::string src = make_file("m.bin", 4000);
  start({{"acme/gated",
          {{"commit", kCommit},
           {"token", "hf_secret"},
           {"files", {{{"path", "m-Q8_0.gguf"}, {"source", src}, {"lfs", true}}}}}}});
  auto r = pull_spec("acme/gated");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("HF_TOKEN"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("401"), std::string::npos) << r.status().message();
  settings_.token = "hf_wrong";
  r = pull_spec("acme/gated");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("refused HF_TOKEN"), std::string::npos);
  settings_.token = "hf_secret";
  r = pull_spec("acme/gated");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(read_all(r->model_path), read_all(src));
  for (const auto& q : hub_->requests())
    if (q["url"].get<std::string>().rfind("/cdn/", 0) == 0) {
      EXPECT_TRUE(q["auth"].is_null()) << "the token must not follow a redirect to another host";
    }
}

TEST_F(PullTest, SecondPullIsServedFromTheCacheWithNoRequest) {
  const std::string src = make_file("m.bin", 30000);
  start({{"acme/m",
          {{"commit", kCommit},
           {"files", {{{"path", "m-Q4_K_M.gguf"}, {"source", src}, {"lfs", true}}}}}}});
  auto first = pull_spec("acme/m");
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_FALSE(first->from_cache);
  const size_t n = hub_->requests().size();
  auto second = pull_spec("acme/m:Q4_K_M");
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->model_path, first->model_path);
  EXPECT_EQ(hub_->requests().size(), n) << "the second pull asked the hub";
  // Offline: the cache answers; what it lacks is an error, with no request either.
  settings_.offline = true;
  EXPECT_TRUE(pull_spec("acme/m").is_ok());
  auto missing = pull_spec("acme/m:Q8_0");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("HF_HUB_OFFLINE"), std::string::npos);
  EXPECT_EQ(hub_->requests().size(), n);
  // --refresh asks the Hub for the revision again but downloads nothing it has.
  settings_.offline = false;
  PullOptions o;
  o.refresh = true;
  auto refreshed = pull_spec("acme/m", o);
  ASSERT_TRUE(refreshed.is_ok()) << refreshed.status().message();
  EXPECT_EQ(hub_->file_requests().size(), 2u) << "only the first pull's resolve + CDN requests";
}

TEST_F(PullTest, SplitGgufPartsAllArriveAndOpenAsOneModel) {
  std::mt19937_64 rng(7);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<std::vector<uint8_t>> data;
  for (int i = 0; i < 5; ++i) data.push_back(test::random_bytes(rng, 4 * 64));
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(
        w.add_tensor("t" + std::to_string(i), Dtype::kF32, {64}, data[i].data(), 256).is_ok());
  ASSERT_TRUE(w.write(dir_.file("whole.gguf")).is_ok());
  auto whole = GgufFile::open(dir_.file("whole.gguf"));
  ASSERT_TRUE(whole.is_ok());
  auto parts = write_gguf_split(*whole, 3, dir_.file("split"));
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  json files = json::array();
  for (int i = 2; i >= 0; --i)  // listed out of order
    files.push_back({{"path", "Q8_0/big-Q8_0-0000" + std::to_string(i + 1) + "-of-00003.gguf"},
                     {"source", (*parts)[i]},
                     {"lfs", true}});
  files.push_back({{"path", "big-Q4_0.gguf"}, {"source", dir_.file("whole.gguf")}, {"lfs", true}});
  start({{"acme/big", {{"commit", kCommit}, {"files", files}}}});
  auto r = pull_spec("acme/big:Q8_0");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->files.size(), 3u);
  EXPECT_NE(r->model_path.find("Q8_0/big-Q8_0-00001-of-00003.gguf"), std::string::npos);
  // Two folders deep: the link climbs three levels.
  EXPECT_EQ(fs::read_symlink(r->model_path).string().rfind("../../../blobs/", 0), 0u);
  auto opened = GgufFile::open(r->model_path);
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  ASSERT_EQ(opened->tensors().size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(
        std::memcmp(opened->find_tensor("t" + std::to_string(i))->view.data, data[i].data(), 256),
        0);
}

TEST_F(PullTest, SafetensorsCheckpointBecomesASnapshotFolder) {
  const std::string w = make_file("w.bin", 5000), cfg = make_file("cfg.bin", 100),
                    tok = make_file("tok.bin", 200), readme = make_file("readme.bin", 50);
  start({{"acme/st",
          {{"commit", kCommit},
           {"files",
            {{{"path", "model.safetensors"}, {"source", w}, {"lfs", true}},
             {{"path", "config.json"}, {"source", cfg}},
             {{"path", "tokenizer.json"}, {"source", tok}},
             {{"path", "README.md"}, {"source", readme}}}}}}});
  auto r = pull_spec("acme/st");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::string snap = settings_.cache_dir + "/models--acme--st/snapshots/" + kCommit;
  EXPECT_EQ(r->model_path, snap);
  EXPECT_EQ(read_all(snap + "/model.safetensors"), read_all(w));
  EXPECT_EQ(read_all(snap + "/config.json"), read_all(cfg));
  EXPECT_EQ(read_all(snap + "/tokenizer.json"), read_all(tok));
  EXPECT_FALSE(fs::exists(snap + "/README.md"));
  // A non-LFS file's blob is named by its git blob id (what `git hash-object` prints).
  int rc = 0;
  std::string oid = test::run_command("git hash-object '" + cfg + "'", &rc);
  oid.resize(40);
  EXPECT_EQ(fs::read_symlink(snap + "/config.json").string(), "../../blobs/" + oid);
}

TEST_F(PullTest, UnknownRepositoryAndRevisionAreClearErrors) {
  const std::string src = make_file("m.bin", 100);
  start({{"acme/m",
          {{"commit", kCommit},
           {"files", {{{"path", "m-Q8_0.gguf"}, {"source", src}, {"lfs", true}}}}}}});
  auto r = pull_spec("acme/nothing");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("404"), std::string::npos) << r.status().message();
  PullOptions o;
  o.revision = "v9";
  r = pull_spec("acme/m", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("v9"), std::string::npos) << r.status().message();
  r = pull_spec("acme/m:Q2_K");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("m-Q8_0.gguf"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace loom::hub
