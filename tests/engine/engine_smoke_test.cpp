#include "test_engine_util.h"

namespace loom {
namespace {

TEST(EngineSmoke, GeneratesMaxTokens) {
  EngineConfig c;
  c.max_num_seqs = 4;
  c.n_threads = 1;
  auto e = testing::make_engine(c, testing::test_model_bytes({}));
  ASSERT_TRUE(e);
  GenerateRequest r;
  r.request_id = "a";
  r.prompt = testing::random_prompt(20, 1, e->model().config().n_vocab);
  r.params.max_tokens = 5;
  r.params.ignore_eos = true;
  ASSERT_TRUE(e->add_request(r).is_ok());
  auto out = testing::run_all(*e);
  EXPECT_EQ(out["a"].tokens[0].size(), 5u);
  EXPECT_EQ(out["a"].finish[0], FinishReason::kLength);
  EXPECT_EQ(e->check_kv_drained(), "");
}

}  // namespace
}  // namespace loom
