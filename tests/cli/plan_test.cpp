// `loom plan` and `loom serve --dry-run`: the memory plan as a user reads it, as JSON that
// agrees with the table, and the refusal (exit 1, the option to change) when it cannot fit.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/run_loom.h"

namespace loom {
namespace {

TEST(LoomPlan, JsonHasEveryLineAndTheTotalAddsUp) {
  CmdResult r = run("plan -m synth:tiny --max-num-seqs 4 --max-model-len 256 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["arch"], "llama");
  const uint64_t per_token = j["kv_cache"]["bytes_per_token"];
  // tiny: 2 layers x (K + V) x 2 KV heads x 16 dims x 2 bytes (f16).
  EXPECT_EQ(per_token, 2u * 2 * 2 * 16 * 2);
  EXPECT_EQ(j["kv_cache"]["tokens"], 4 * 256);
  EXPECT_EQ(j["kv_cache"]["bytes"].get<uint64_t>(), per_token * 4 * 256);
  const uint64_t sum =
      j["weights"]["kernel_copy_bytes"].get<uint64_t>() +
      j["weights"]["mapped_bytes"].get<uint64_t>() + j["kv_cache"]["bytes"].get<uint64_t>() +
      j["recurrent_state_bytes"].get<uint64_t>() + j["scratch_bytes"].get<uint64_t>();
  EXPECT_EQ(j["total_bytes"].get<uint64_t>(), sum);
  EXPECT_GT(j["machine"]["available_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j["fits"].get<bool>());
}

// A synth spec is planned from its layout (no weights generated): the plan is the one of the
// file synth writes, for a dense, a MoE and a hybrid preset with their types (and the
// generated file's weights would take minutes for the 30B preset, which plans at once).
TEST(LoomPlan, SynthSpecPlansAsItsWrittenFile) {
  const std::string dir = ::testing::TempDir();
  for (const std::string spec : {"tiny-moe:q4_k", "tiny:q8_0", "tiny-qwen35:f16"}) {
    const std::string file = dir + "/loom_plan_" + spec.substr(0, spec.find(':')) + ".gguf";
    const std::string preset = spec.substr(0, spec.find(':')),
                      type = spec.substr(spec.find(':') + 1);
    ASSERT_EQ(run("synth --preset " + preset + " --type " + type + " -o " + file).code, 0) << spec;
    const std::string opts = " --max-num-seqs 4 --max-model-len 256 --json";
    CmdResult from_file = run_stdout("plan -m " + file + opts);
    CmdResult from_spec = run_stdout("plan -m synth:" + spec + opts);
    ASSERT_EQ(from_file.code, 0) << from_file.out;
    ASSERT_EQ(from_spec.code, 0) << from_spec.out;
    nlohmann::json a = nlohmann::json::parse(from_file.out),
                   b = nlohmann::json::parse(from_spec.out);
    for (nlohmann::json* j : {&a, &b}) {
      j->erase("model");    // the path or the spec
      j->erase("machine");  // what is free now
      j->erase("fits");
    }
    EXPECT_EQ(a.dump(1), b.dump(1)) << spec;
    EXPECT_GT(a["weights"]["stored_bytes"].get<uint64_t>(), 0u);
    std::remove(file.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  CmdResult big = run_stdout("plan -m synth:qwen3moe-30b:q4_k --kv-cache-memory 1 --json");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(big.out.find('{'), std::string::npos) << big.out;
  const nlohmann::json j = nlohmann::json::parse(big.out.substr(big.out.find('{')));
  EXPECT_GT(j["weights"]["stored_bytes"].get<uint64_t>(), 16ull << 30);  // 16.04 GiB at Q4_K
  EXPECT_LT(seconds, 20.0);  // generating its weights: minutes
}

TEST(LoomPlan, KvCacheDtypeHalvesOrDoublesThePerTokenBytes) {
  CmdResult f16 = run("plan -m synth:tiny --json");
  CmdResult f32 = run("plan -m synth:tiny --kv-cache-dtype f32 --json");
  ASSERT_EQ(f16.code, 0) << f16.out;
  ASSERT_EQ(f32.code, 0) << f32.out;
  auto per_token = [](const std::string& out) {
    return nlohmann::json::parse(out.substr(out.find('{')))["kv_cache"]["bytes_per_token"]
        .get<uint64_t>();
  };
  EXPECT_EQ(per_token(f32.out), 2 * per_token(f16.out));
  EXPECT_NE(run("plan -m synth:tiny --kv-cache-dtype fp8").code, 0);
}

TEST(LoomPlan, TableNamesEachLine) {
  CmdResult r = run("plan -m synth:tiny");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* line :
       {"weights in the file", "kernel-ready weights", "KV cache per token", "KV cache",
        "recurrent states", "scratch", "total", "machine available", "fits: yes"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
}

TEST(LoomPlan, ServeDryRunRefusesWhatCannotFitAndNamesTheOption) {
  // 3,000 GiB of KV cache fits no machine this test runs on.
  CmdResult r = run("serve -m synth:tiny --kv-cache-memory 3000 --dry-run");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("fits: no"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Set --kv-cache-memory "), std::string::npos) << r.out;
  // And serving it is refused before anything is allocated, with the same advice.
  CmdResult s = run("serve -m synth:tiny --port 0 --kv-cache-memory 3000");
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("--kv-cache-memory"), std::string::npos) << s.out;
  EXPECT_EQ(run("serve -m synth:tiny --dry-run").code, 0);
}

}  // namespace
}  // namespace loom
