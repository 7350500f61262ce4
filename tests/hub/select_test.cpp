// Choosing files for a quant tag (llama.cpp's -hf rules), repository names and listings.
#include <gtest/gtest.h>

#include "hub/hub_settings.h"
#include "hub/repo_files.h"

namespace loom::hub {
namespace {

std::vector<RepoFile> files(const std::vector<std::string>& paths) {
  std::vector<RepoFile> out;
  for (const auto& p : paths) out.push_back(RepoFile{p, 1, std::string(64, 'a'), ""});
  return out;
}

std::vector<std::string> chosen(const Result<Selection>& s) {
  std::vector<std::string> out;
  if (s.is_ok())
    for (const auto& f : s->files) out.push_back(f.path);
  return out;
}

TEST(HubSelect, TagMatchesFileNamesIgnoringCase) {
  const auto repo = files({"README.md", "Qwen3-0.6B-Q4_K_M.gguf", "Qwen3-0.6B-q8_0.gguf",
                           "Qwen3-0.6B-BF16.gguf", "mmproj-Qwen3-Q8_0.gguf"});
  EXPECT_EQ(chosen(select_files(repo, "Q8_0", "o/r")),
            std::vector<std::string>{"Qwen3-0.6B-q8_0.gguf"});
  EXPECT_EQ(chosen(select_files(repo, "bf16", "o/r")),
            std::vector<std::string>{"Qwen3-0.6B-BF16.gguf"});
  // No tag: Q4_K_M first.
  auto s = select_files(repo, "", "o/r");
  EXPECT_EQ(chosen(s), std::vector<std::string>{"Qwen3-0.6B-Q4_K_M.gguf"});
  EXPECT_EQ(s->primary, "Qwen3-0.6B-Q4_K_M.gguf");
  // The tag must end where the name's quant ends: Q4_K is not Q4_K_M.
  auto none = select_files(repo, "Q4_K", "o/r");
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("Qwen3-0.6B-BF16.gguf"), std::string::npos)
      << "the error lists the GGUF files: " << none.status().message();
}

TEST(HubSelect, DefaultFallsBackToQ8ThenTheFirstModel) {
  EXPECT_EQ(chosen(select_files(files({"m-f16.gguf", "m-Q8_0.gguf"}), "", "o/r")),
            std::vector<std::string>{"m-Q8_0.gguf"});
  EXPECT_EQ(chosen(select_files(files({"mmproj-f16.gguf", "m-IQ2_XS.gguf"}), "", "o/r")),
            std::vector<std::string>{"m-IQ2_XS.gguf"});
}

TEST(HubSelect, SplitGgufTakesEveryPartInOrder) {
  const auto repo = files({"Q8_0/m-Q8_0-00002-of-00003.gguf", "Q8_0/m-Q8_0-00001-of-00003.gguf",
                           "Q8_0/m-Q8_0-00003-of-00003.gguf", "m-Q4_0.gguf"});
  auto s = select_files(repo, "q8_0", "o/r");
  EXPECT_EQ(chosen(s), (std::vector<std::string>{"Q8_0/m-Q8_0-00001-of-00003.gguf",
                                                 "Q8_0/m-Q8_0-00002-of-00003.gguf",
                                                 "Q8_0/m-Q8_0-00003-of-00003.gguf"}));
  EXPECT_EQ(s->primary, "Q8_0/m-Q8_0-00001-of-00003.gguf");
  auto missing = select_files(files({"m-Q8_0-00001-of-00002.gguf"}), "Q8_0", "o/r");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("part 2"), std::string::npos);
  auto info = gguf_split_info("a/b-00012-of-00040.gguf");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->prefix, "a/b");
  EXPECT_EQ(info->index, 12);
  EXPECT_EQ(info->count, 40);
}

TEST(HubSelect, SafetensorsCheckpointWithConfigAndTokenizer) {
  const auto repo = files({"README.md", ".gitattributes", "config.json", "tokenizer.json",
                           "tokenizer_config.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                           "original/consolidated.pth", "generation_config.json"});
  auto s = select_files(repo, "", "o/r");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->safetensors);
  EXPECT_EQ(chosen(s), (std::vector<std::string>{
                           "config.json", "tokenizer.json", "tokenizer_config.json",
                           "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model.safetensors.index.json", "generation_config.json"}));
  // :safetensors asks for the checkpoint even beside GGUF files.
  auto both = files({"m-Q4_K_M.gguf", "config.json", "model.safetensors"});
  EXPECT_TRUE(select_files(both, "safetensors", "o/r")->safetensors);
  EXPECT_FALSE(select_files(both, "", "o/r")->safetensors);
  EXPECT_FALSE(select_files(files({"README.md"}), "", "o/r").is_ok());
}

TEST(HubSelect, ListingPathsAndIdsAreChecked) {
  auto ok = parse_tree_listing(
      R"([{"type":"directory","path":"sub","oid":"x","size":0},
          {"type":"file","path":"sub/a.gguf","size":10,"oid":"0123456789abcdef0123456789abcdef01234567",
           "lfs":{"oid":"ec15b04fd8e7b2ef88e05552ea250c59a95811e8e2bd3ca171c471b711af806e","size":10}},
          {"type":"file","path":"config.json","size":3,"oid":"c0c1bfafb32310f0585d0c510ff440ab0259a5c1"}])");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].blob_id, "ec15b04fd8e7b2ef88e05552ea250c59a95811e8e2bd3ca171c471b711af806e");
  EXPECT_EQ((*ok)[0].sha256, (*ok)[0].blob_id);
  EXPECT_EQ((*ok)[1].blob_id, "c0c1bfafb32310f0585d0c510ff440ab0259a5c1");
  EXPECT_TRUE((*ok)[1].sha256.empty());
  for (const char* bad : {"../x", "/etc/passwd", "a/../../b", "a//b", "a\\\\b"}) {
    const std::string listing = std::string(R"([{"type":"file","path":")") + bad +
                                R"(","size":1,"oid":"c0c1bfafb32310f0585d0c510ff440ab0259a5c1"}])";
    EXPECT_FALSE(parse_tree_listing(listing).is_ok()) << bad;
  }
  EXPECT_FALSE(
      parse_tree_listing(R"([{"type":"file","path":"a","size":1,"oid":"../../x"}])").is_ok());
  EXPECT_FALSE(parse_tree_listing(R"({"error":"x"})").is_ok());
}

TEST(HubSelect, RepoSpecs) {
  auto s = parse_repo_spec("Qwen/Qwen3-0.6B-GGUF:q8_0");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->repo, "Qwen/Qwen3-0.6B-GGUF");
  EXPECT_EQ(s->tag, "q8_0");
  EXPECT_EQ(parse_repo_spec("org/name")->tag, "");
  for (const char* bad : {"name", "org/", "/name", "../x", "org/..", "a/b/c",
                          "org/name:", "org/name:a:b", "org/na me", "org/name:Q4/../x"})
    EXPECT_FALSE(parse_repo_spec(bad).is_ok()) << bad;
}

}  // namespace
}  // namespace loom::hub
