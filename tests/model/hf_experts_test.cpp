// A Hugging Face MoE checkpoint holds one tensor per expert (model.layers.L.mlp.experts.E.*):
// loading binds each in place, a view of the mapped file, rather than stacking a layer's
// experts in memory first (which held every expert twice until the kernel-ready copies were
// made, and read the whole checkpoint before the first answer). Checked on transformers'
// qwen3_moe fixture: each expert's view holds that expert's bytes from the file, nothing is
// made at load, and a checkpoint with an expert missing or misshapen is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "model/bind.h"
#include "model/hf_shards.h"
#include "model/tensor_names.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

const std::string kFixture = std::string(LOOM_TEST_DATA) + "/hf_reference/qwen3_moe";

TEST(HfExperts, BoundInPlaceEachWithItsOwnBytes) {
  auto bound = bind_hf_dir(kFixture);
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  EXPECT_EQ(bound->weights.loader_made_bytes(), 0u);
  const test::SafetensorsContents file =
      test::read_safetensors_file(kFixture + "/model.safetensors");
  int checked = 0;
  for (size_t l = 0; l < bound->weights.layers.size(); ++l) {
    const LayerWeights& L = bound->weights.layers[l];
    ASSERT_EQ(L.gate_exp.size(), 4u);
    for (const auto& [list, proj] :
         {std::pair{&L.gate_exp, "gate_proj"}, std::pair{&L.up_exp, "up_proj"},
          std::pair{&L.down_exp, "down_proj"}}) {
      for (size_t e = 0; e < list->size(); ++e) {
        const std::string name = "model.layers." + std::to_string(l) + ".mlp.experts." +
                                 std::to_string(e) + "." + proj + ".weight";
        const auto& offsets = file.header.at(name).at("data_offsets");
        const uint64_t begin = offsets[0], end = offsets[1];
        const TensorView& v = (*list)[e];
        ASSERT_EQ(v.nbytes, end - begin) << name;
        EXPECT_EQ(std::memcmp(v.data, file.data.data() + begin, v.nbytes), 0) << name;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * 3 * 4);
}

// The fixture rewritten with `edit` applied to its tensors.
class HfExpertsBroken : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (fs::temp_directory_path() /
         ("loom_hf_experts_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
          "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name()))
            .string();
    fs::create_directories(dir_);
    fs::copy_file(kFixture + "/config.json", dir_ + "/config.json",
                  fs::copy_options::overwrite_existing);
    const test::SafetensorsContents file =
        test::read_safetensors_file(kFixture + "/model.safetensors");
    for (const auto& [name, info] : file.header.items()) {
      if (name == "__metadata__") continue;
      const uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
      tensors_[name] = {info["dtype"].get<std::string>(), info["shape"].get<std::vector<int64_t>>(),
                        std::vector<uint8_t>(file.data.begin() + static_cast<ptrdiff_t>(begin),
                                             file.data.begin() + static_cast<ptrdiff_t>(end))};
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  Status load() {
    test::write_safetensors(dir_ + "/model.safetensors", tensors_);
    return bind_hf_dir(dir_).status();
  }

  std::string dir_;
  std::map<std::string, test::CheckpointTensor> tensors_;
};

TEST_F(HfExpertsBroken, MissingExpertIsNamed) {
  tensors_.erase("model.layers.1.mlp.experts.3.up_proj.weight");
  const Status s = load();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("blk.1.ffn_up_exps.weight has 3 experts, expected 4"),
            std::string::npos)
      << s.message();
}

TEST_F(HfExpertsBroken, MisshapenExpertIsNamed) {
  test::CheckpointTensor& t = tensors_.at("model.layers.0.mlp.experts.2.down_proj.weight");
  t.shape = {t.shape[0] / 2, t.shape[1] * 2};  // same bytes, another shape
  const Status s = load();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("an expert of tensor blk.0.ffn_down_exps.weight has shape"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace loom
