// `loom plan` and `loom serve --dry-run`: the memory plan as a user reads it, as JSON that
// agrees with the table, and the refusal (exit 1, the option to change) when it cannot fit.
#include <gtest/gtest.h>

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
