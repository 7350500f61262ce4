// Speculative decoding as a user runs it: `{"method": "mtp"}` alone (what `loom inspect`
// suggests) proposes with the model's MTP layers; a draft model is checked against the
// target's vocabulary by token text, padded sizes allowed (llama.cpp's rule); `bench offline`
// reports configured speculation even when nothing was proposed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/run_loom.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// vLLM defaults num_speculative_tokens to the model's MTP layers (tiny-mla has one).
TEST(CliSpeculative, MtpWithoutTokenCountUsesTheModelsLayers) {
  const std::string base = "run -m synth:tiny-mla -p 'hello world' -n 16 --temp 0 -t 1";
  CmdResult plain = run_stdout(base);
  ASSERT_EQ(plain.code, 0) << plain.out;
  const std::string mtp_only = R"( --speculative-config '{"method": "mtp"}')";
  CmdResult mtp = run_stdout(base + mtp_only);
  ASSERT_EQ(mtp.code, 0) << run(base + mtp_only).out;
  EXPECT_EQ(mtp.out, plain.out);
  // It proposed, one token per proposal (k = the model's one MTP layer).
  CmdResult bench = run_stdout(
      "bench offline -m synth:tiny-mla --num-prompts 1 --input-len 8 --output-len 16 -t 1 "
      "--temperature 0" +
      mtp_only);
  ASSERT_EQ(bench.code, 0) << bench.out;
  long long drafts = -1, proposed = -1;
  const size_t at = bench.out.find("Speculative decoding: ");
  ASSERT_NE(at, std::string::npos) << bench.out;
  ASSERT_EQ(std::sscanf(bench.out.c_str() + at, "Speculative decoding: %lld proposals, %lld tokens",
                        &drafts, &proposed),
            2)
      << bench.out;
  EXPECT_GT(drafts, 0) << bench.out;
  EXPECT_EQ(proposed, drafts) << bench.out;
  // The hint `loom inspect` prints is a command that works.
  const fs::path dir = fs::path(::testing::TempDir()) / "loom_spec_cli_mtp";
  fs::create_directories(dir);
  const std::string file = (dir / "mla.gguf").string();
  ASSERT_EQ(run("synth --preset tiny-mla -o " + file).code, 0);
  CmdResult inspect = run("inspect " + file);
  ASSERT_EQ(inspect.code, 0) << inspect.out;
  EXPECT_NE(inspect.out.find(R"(--speculative-config '{"method": "mtp"}')"), std::string::npos)
      << inspect.out;
  fs::remove_all(dir);
}

class CliDraftVocabulary : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs this suite's tests at once, and each removes the directory.
    dir_ = fs::path(::testing::TempDir()) / ("loom_spec_cli_vocab_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  // A synth model of `preset` with the tokenizer of tests/data/vocab/`vocab`.
  static std::string synth(const std::string& preset, const std::string& vocab, int seed) {
    const std::string out = (dir_ / (preset + "-" + vocab)).string();
    CmdResult r = run("synth --preset " + preset + " --vocab " + LOOM_TEST_DATA + "/vocab/" +
                      vocab + " --seed " + std::to_string(seed) + " -o " + out);
    EXPECT_EQ(r.code, 0) << r.out;
    return out;
  }
  static fs::path dir_;
};
fs::path CliDraftVocabulary::dir_;

// Phi-3's vocabulary is Llama 2's 32000 tokens plus 64: a draft 64 tokens larger than its target
// (and a target 64 larger than its draft) runs, and greedy text is plain decoding's.
TEST_F(CliDraftVocabulary, PaddedSizesWithTheSameTokensRun) {
  const std::string llama = synth("tiny", "ggml-vocab-llama-spm.gguf", 1);
  const std::string phi3 = synth("tiny", "ggml-vocab-phi-3.gguf", 2);
  for (const auto& [target, draft] : {std::pair{llama, phi3}, std::pair{phi3, llama}}) {
    const std::string base = "run -m " + target + " -p 'the cat sat on' -n 16 --temp 0 -t 1";
    CmdResult plain = run_stdout(base);
    ASSERT_EQ(plain.code, 0) << plain.out;
    CmdResult spec = run_stdout(base + " --model-draft " + draft + " --draft-max 3");
    ASSERT_EQ(spec.code, 0) << spec.out;
    EXPECT_EQ(spec.out, plain.out);
  }
}

// DeepSeek-LLM's tokenizer padded to Qwen3's size: the sizes agree, the tokens do not. Either
// way round, a synth draft's tokenizer included.
TEST_F(CliDraftVocabulary, SameSizeOtherTokensAreRefused) {
  const std::string deepseek = synth("tiny-qwen3", "ggml-vocab-deepseek-llm.gguf", 3);
  CmdResult r = run("run -m synth:tiny-qwen3 -p hi -n 2 -t 1 --model-draft " + deepseek);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("the draft model's vocabulary differs from the target's at token 124: "
                       "the target's is \"À\", the draft's \"Â\""),
            std::string::npos)
      << r.out;
  r = run("run -m " + deepseek + " -p hi -n 2 -t 1 --model-draft synth:tiny-qwen3");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("at token 124: the target's is \"Â\", the draft's \"À\""), std::string::npos)
      << r.out;
  // Another synth model with the same (placeholder) vocabulary is a draft.
  r = run_stdout("run -m synth:tiny -p hi -n 4 -t 1 --temp 0 --model-draft synth:tiny-k");
  EXPECT_EQ(r.code, 0) << r.out;
}

// n-grams of 16 never occur in 8 + 8 random tokens: 0 proposals, acceptance n/a, in the text
// and (null) in the JSON.
TEST(CliSpeculative, BenchOfflineReportsSpeculationWithoutProposals) {
  const fs::path json = fs::path(::testing::TempDir()) / "loom_spec_cli_offline.json";
  CmdResult r = run_stdout(
      "bench offline -m synth:tiny --num-prompts 1 --input-len 8 --output-len 8 -t 1 "
      R"(--speculative-config '{"method": "ngram", "num_speculative_tokens": 2, )"
      R"("prompt_lookup_min": 16}' --output-json )" +
      json.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Speculative decoding: 0 proposals, 0 tokens proposed, 0 accepted "
                       "(acceptance rate n/a, mean acceptance length n/a)"),
            std::string::npos)
      << r.out;
  std::ifstream f(json);
  std::stringstream text;
  text << f.rdbuf();
  auto j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j["spec_num_drafts"], 0) << j.dump();
  EXPECT_TRUE(j["spec_acceptance_rate"].is_null()) << j.dump();
  fs::remove(json);
}

// Every proposer says at start-up that it is on and how: n-gram lookup as the draft model and
// MTP do (it logged nothing, so a user could not tell that --draft-max had taken effect).
TEST(CliSpeculative, NgramProposerIsLoggedAtStart) {
  CmdResult r = run("run -m synth:tiny -p hi -n 4 -t 1 --temp 0 --draft-max 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("engine: n-gram proposer (prompt lookup of 5 to 5 tokens), up to 3 "
                       "proposals per step"),
            std::string::npos)
      << r.out;
  r = run(R"(run -m synth:tiny -p hi -n 4 -t 1 --temp 0 --speculative-config '{"method": )"
          R"("ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1, )"
          R"("prompt_lookup_max": 3}')");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("engine: n-gram proposer (prompt lookup of 1 to 3 tokens), up to 2 "
                       "proposals per step"),
            std::string::npos)
      << r.out;
}

// A server that embeds or scores runs prompts only: a speculative flag is refused at start,
// naming it, whether the task was asked for or is the model's own (an embedding model). It was
// accepted silently (and the spec_decode metrics exported). `timeout`: a server that starts
// would serve until killed.
TEST(CliSpeculative, ServeRefusesSpeculationForPoolingTasks) {
  for (const std::string& args :
       {std::string("-m synth:tiny --task embed --draft-max 4"),
        std::string("-m synth:tiny-qwen3-embed --draft-max 4"),
        std::string(R"(-m synth:tiny-qwen3-rerank --speculative-config '{"method": "ngram", )"
                    R"("num_speculative_tokens": 2}')")}) {
    CmdResult r = run_shell("timeout 120 " + std::string(LOOM_BINARY) + " serve " + args +
                            " --port 0 -t 1 2>&1");
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("speculative decoding (--speculative-config, --draft-max, "
                         "--model-draft) applies to generation only"),
              std::string::npos)
        << args << "\n"
        << r.out;
    const char* task = args.find("rerank") != std::string::npos ? "rerank" : "embed";
    EXPECT_NE(r.out.find(std::string("this server's task is ") + task), std::string::npos) << r.out;
  }
}

// llama-server's -md (CLI11 would read it as -m d) names the draft model: greedy output is the
// plain run's, and the draft ran (the log says so).
TEST(CliSpeculative, ShortModelDraftFlag) {
  const std::string base = "run -m synth:tiny -p 'hello world' -n 12 --temp 0 -t 1";
  CmdResult plain = run_stdout(base);
  ASSERT_EQ(plain.code, 0) << plain.out;
  CmdResult md = run_stdout(base + " -md synth:tiny --draft-n 3 --draft-n-min 1");
  ASSERT_EQ(md.code, 0) << run(base + " -md synth:tiny").out;
  EXPECT_EQ(md.out, plain.out);
  CmdResult logged = run(base + " -md=synth:tiny");
  ASSERT_EQ(logged.code, 0) << logged.out;
  EXPECT_NE(logged.out.find("draft model synth:tiny"), std::string::npos) << logged.out;
}

// llama.cpp's current spellings end to end: --spec-draft-* for the draft model (greedy output
// is the plain run's), --spec-type ngram-simple with its sizes (the log says what runs), a
// p-min of 1 that leaves nothing to propose, and a type loom does not have refused by name.
TEST(CliSpeculative, LlamaCppSpecFlags) {
  const std::string base = "run -m synth:tiny -p 'hello world' -n 12 --temp 0 -t 1";
  CmdResult plain = run_stdout(base);
  ASSERT_EQ(plain.code, 0) << plain.out;
  const std::string draft =
      " --spec-draft-model synth:tiny --spec-draft-n-max 3 --spec-draft-n-min 1 "
      "--spec-draft-p-min 0.0001";
  CmdResult drafted = run(base + draft);
  ASSERT_EQ(drafted.code, 0) << drafted.out;
  EXPECT_NE(drafted.out.find("draft model synth:tiny"), std::string::npos) << drafted.out;
  EXPECT_EQ(run_stdout(base + draft).out, plain.out);

  const std::string ngram =
      " --spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m 3";
  CmdResult lookup = run(base + ngram);
  ASSERT_EQ(lookup.code, 0) << lookup.out;
  EXPECT_NE(lookup.out.find("engine: n-gram proposer (prompt lookup of 2 to 2 tokens), up to 3 "
                            "proposals per step"),
            std::string::npos)
      << lookup.out;
  EXPECT_EQ(run_stdout(base + ngram).out, plain.out);

  CmdResult unsure = run_stdout(
      "bench offline -m synth:tiny --spec-draft-model synth:tiny --spec-draft-p-min 1 "
      "--num-prompts 2 --input-len 8 --output-len 16 -t 1 --temperature 0");
  ASSERT_EQ(unsure.code, 0) << unsure.out;
  EXPECT_NE(unsure.out.find("Speculative decoding: 0 proposals"), std::string::npos) << unsure.out;

  CmdResult eagle = run(base + " --spec-type draft-eagle3");
  EXPECT_NE(eagle.code, 0) << eagle.out;
  EXPECT_NE(eagle.out.find("--spec-type draft-eagle3: llama.cpp's proposer of that name is not "
                           "in loom"),
            std::string::npos)
      << eagle.out;
}

// bench offline at temperature 1 with the target as its own draft: seeded requests (the
// default) verify point masses and keep few proposals; --unseeded ones verify the draft's
// own distribution (q = p here) and keep every proposal.
TEST(CliSpeculative, BenchOfflineUnseededVerifiesTheDraftsDistribution) {
  const std::string base =
      "bench offline -m synth:tiny --model-draft synth:tiny --num-prompts 4 --input-len 8 "
      "--output-len 32 -t 1 --output-json /dev/stdout";
  auto acceptance = [&](const std::string& extra) {
    CmdResult r = run_stdout(base + extra);
    EXPECT_EQ(r.code, 0) << r.out;
    // The JSON document (pretty-printed: it ends at the first closing brace on a line of its
    // own), then the text report.
    const size_t at = r.out.find('{'), end = r.out.find("\n}", at);
    if (at == std::string::npos || end == std::string::npos) return -1.0;
    const auto j = nlohmann::json::parse(r.out.substr(at, end + 2 - at), nullptr, false);
    if (j.is_discarded() || !j.contains("spec_acceptance_rate") ||
        !j["spec_acceptance_rate"].is_number())
      return -1.0;
    return j["spec_acceptance_rate"].get<double>();
  };
  const double seeded = acceptance(""), unseeded = acceptance(" --unseeded");
  // A random model's distribution at temperature 1 is nearly flat: its best token is rarely
  // the one sampled.
  EXPECT_GE(seeded, 0.0);
  EXPECT_LT(seeded, 0.5);
  EXPECT_EQ(unseeded, 1.0);
}

}  // namespace
}  // namespace loom
