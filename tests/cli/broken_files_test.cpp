// Broken model files and contexts as a user meets them on the command line: the message names
// what is wrong (the tokenizer's own error, the missing key and the flag to pass), and the
// command exits 1 instead of crashing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_loom.h"
#include "format/gguf.h"
#include "tools/synth.h"

namespace loom {
namespace {

// synth:tiny written to a temporary file with `edit` applied to its metadata (`drop`: keys
// left out).
class BrokenTiny {
 public:
  template <class Edit>
  BrokenTiny(const std::string& name, Edit edit, const std::string& drop = "") {
    path_ = (std::filesystem::temp_directory_path() /
             ("loom_broken_" + std::to_string(getpid()) + "_" + name + ".gguf"))
                .string();
    SynthOptions so;
    so.preset = "tiny";
    auto bytes = synth_model_bytes(so);
    EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
    auto f = GgufFile::parse_bytes(*bytes);
    EXPECT_TRUE(f.is_ok()) << f.status().message();
    GgufWriter w;
    for (const auto& [key, value] : f->metadata())
      if (key != drop) w.set(key, value);
    for (const GgufTensorInfo& t : f->tensors()) {
      std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
      EXPECT_TRUE(w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes).is_ok());
    }
    edit(w);
    EXPECT_TRUE(w.write(path_).is_ok());
  }
  ~BrokenTiny() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(BrokenFiles, RunReportsTheTokenizersOwnError) {
  // It blamed "the model has no tokenizer" before.
  BrokenTiny m("bos", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 1u << 31); });
  CmdResult r = run("run -m " + m.path() + " -n 1 -p hi");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer.ggml.bos_token_id = 2147483648 is outside the vocabulary"),
            std::string::npos)
      << r.out;
  // The model itself still runs on token ids.
  r = run("eval -m " + m.path() + " --tokens 1,2");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(BrokenFiles, MissingContextLengthAsksForMaxModelLen) {
  // It said the KV cache budget held no block, or "over the model's context length 0".
  BrokenTiny m(
      "ctx", [](GgufWriter&) {}, "llama.context_length");
  CmdResult r = run("plan -m " + m.path());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("llama.context_length"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pass --max-model-len"), std::string::npos) << r.out;
  r = run("plan -m " + m.path() + " --max-model-len 100");
  EXPECT_EQ(r.code, 0) << r.out;
  BrokenTiny zero("ctx0", [](GgufWriter& w) { w.set_u32("llama.context_length", 0); });
  r = run("plan -m " + zero.path() + " --max-model-len 100");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("GGUF metadata key llama.context_length = 0 is out of range"),
            std::string::npos)
      << r.out;
}

TEST(BrokenFiles, DeeplyNestedTemplateContextIsRefused) {
  // A stack overflow (SIGSEGV) at 30,000 levels before.
  const std::string dir =
      std::filesystem::temp_directory_path().string() + "/loom_broken_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/t.jinja") << "{{ x | length }}";
  std::ofstream(dir + "/c.json") << "{\"x\": " << std::string(30000, '[') << std::string(30000, ']')
                                 << "}";
  CmdResult r = run("template -t " + dir + "/t.jinja -c " + dir + "/c.json");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("deeper than 128 levels"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace loom
