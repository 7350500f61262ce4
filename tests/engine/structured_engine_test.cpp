// Constrained generation inside the engine, with a random-weight model behind Qwen3's real
// 151,669-token byte-level BPE vocabulary (synth preset tiny-qwen3): whatever the weights
// prefer, every finished output is a sentence of its grammar; EOS comes only where the grammar
// can end; and the grammar does not break batch invariance or preemption (tokens are identical
// alone, together with other constrained and free requests, and under heavy preemption).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "structured_engine_fixture.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::run_all;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 1, "maximum": 999},
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "kind": {"enum": ["a", "b", "c"]},
    "ok": {"type": "boolean"},
    "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 4}
  },
  "required": ["id", "name", "kind", "ok"],
  "additionalProperties": false
})";

// Independent check of kSchema (nlohmann parses; the rules are written out here).
void expect_valid(const std::string& text) {
  nlohmann::json d;
  ASSERT_NO_THROW(d = nlohmann::json::parse(text)) << text;
  ASSERT_TRUE(d.is_object()) << text;
  for (auto it = d.begin(); it != d.end(); ++it)
    EXPECT_TRUE(it.key() == "id" || it.key() == "name" || it.key() == "kind" || it.key() == "ok" ||
                it.key() == "scores")
        << text;
  ASSERT_TRUE(d["id"].is_number_integer()) << text;
  EXPECT_TRUE(d["id"].get<int>() >= 1 && d["id"].get<int>() <= 999) << text;
  ASSERT_TRUE(d["name"].is_string()) << text;
  size_t cps = 0;
  for (unsigned char c : d["name"].get<std::string>()) cps += (c & 0xC0) != 0x80;
  EXPECT_TRUE(cps >= 1 && cps <= 12) << text;
  EXPECT_TRUE(d["kind"] == "a" || d["kind"] == "b" || d["kind"] == "c") << text;
  EXPECT_TRUE(d["ok"].is_boolean()) << text;
  if (d.contains("scores")) {
    ASSERT_TRUE(d["scores"].is_array()) << text;
    EXPECT_LE(d["scores"].size(), 4u) << text;
    for (const auto& s : d["scores"])
      EXPECT_TRUE(s.is_number_integer() && s.get<int>() >= 0 && s.get<int>() <= 9) << text;
  }
}

TEST_F(StructuredEngineTest, OutputsFollowTheirGrammarsAndStayBatchInvariant) {
  auto e = make_engine(config(), bytes_);
  ASSERT_TRUE(e);
  auto gbnf = structured::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto schema = compile(*e, *gbnf);
  const std::string re = "[0-9]{3}-[a-z]{2,5}( [A-Z]{1,6})?";
  auto re_gbnf = structured::regex_to_gbnf(re);
  ASSERT_TRUE(re_gbnf.is_ok()) << re_gbnf.status().message();
  auto regex = compile(*e, *re_gbnf);

  // 16 requests: constrained by the schema, by the regex, and free, all in one batch.
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 16; ++i) {
    auto g = i % 3 == 0 ? schema : i % 3 == 1 ? regex : nullptr;
    rs.push_back(request("r" + std::to_string(i), 100 + i, g, g ? 300 : 12));
    if (!g) rs.back().params.ignore_eos = true;
  }
  for (const auto& r : rs) ASSERT_TRUE(e->add_request(r).is_ok());
  auto together = run_all(*e);
  EXPECT_EQ(e->check_kv_drained(), "");
  for (int i = 0; i < 16; ++i) {
    const Collected& c = together.at(rs[i].request_id);
    if (i % 3 == 2) continue;
    // Random weights cannot end a document early: a finished output is complete and valid.
    ASSERT_EQ(c.finish.at(0), FinishReason::kStop) << c.text.at(0);
    if (i % 3 == 0)
      expect_valid(c.text.at(0));
    else
      EXPECT_TRUE(std::regex_match(c.text.at(0), std::regex(re))) << c.text.at(0);
  }
  // Alone, and with a tiny KV cache that forces preemption: the same tokens.
  for (int i : {0, 1, 3}) {
    auto alone = make_engine(config(), bytes_);
    ASSERT_TRUE(alone->add_request(rs[i]).is_ok());
    auto a = run_all(*alone);
    EXPECT_EQ(a.at(rs[i].request_id).tokens.at(0), together.at(rs[i].request_id).tokens.at(0)) << i;
  }
  auto tight = make_engine(config(64, 0.0002), bytes_);
  for (const auto& r : rs) ASSERT_TRUE(tight->add_request(r).is_ok());
  auto pre = run_all(*tight);
  EXPECT_GT(tight->metrics().num_preemptions, 0);
  for (const auto& r : rs)
    EXPECT_EQ(pre.at(r.request_id).tokens.at(0), together.at(r.request_id).tokens.at(0))
        << r.request_id;
  EXPECT_EQ(tight->check_kv_drained(), "");
  // With speculation (n-gram lookups, and the model as its own draft): each verified row is
  // sampled under the mask of the grammar advanced by the rows kept before it, so the tokens
  // are again the same.
  for (bool draft : {false, true}) {
    EngineConfig c = config();
    c.speculative.method =
        draft ? SpeculativeConfig::Method::kDraftModel : SpeculativeConfig::Method::kNgram;
    c.speculative.num_speculative_tokens = 4;
    if (draft)
      c.speculative.model = "synth:tiny-qwen3";
    else
      c.speculative.prompt_lookup_min = 1;
    auto spec = make_engine(c, bytes_);
    ASSERT_TRUE(spec);
    for (const auto& r : rs) ASSERT_TRUE(spec->add_request(r).is_ok());
    auto out = run_all(*spec);
    // Sampled at temperature 1 from a random model's nearly flat distribution, the draft's
    // greedy proposals are rarely kept; the n-gram ones (JSON repeats itself) are.
    EXPECT_GT(spec->metrics().spec_num_drafts, 0) << draft;
    if (!draft) {
      EXPECT_GT(spec->metrics().spec_num_accepted_tokens, 0);
    }
    for (const auto& r : rs)
      EXPECT_EQ(out.at(r.request_id).tokens.at(0), together.at(r.request_id).tokens.at(0))
          << r.request_id << (draft ? " (draft model)" : " (n-gram)");
    EXPECT_EQ(spec->check_kv_drained(), "");
  }
}

// Unseeded sampling requests with a draft model: proposals drawn from the draft's own
// distribution, which knows nothing of the grammar, verified by the rejection rule against the
// target's masked distribution (a masked proposal has p = 0: never kept, and the replacement
// comes from the masked p). Every output is a sentence of its grammar, and some proposals
// (JSON's punctuation) are kept.
TEST_F(StructuredEngineTest, UnseededDraftProposalsStayInsideTheGrammar) {
  EngineConfig c = config();
  c.speculative.method = SpeculativeConfig::Method::kDraftModel;
  c.speculative.num_speculative_tokens = 4;
  c.speculative.model = "synth:tiny-qwen3";
  c.speculative.always_propose = true;
  auto e = make_engine(c, bytes_);
  ASSERT_TRUE(e);
  auto gbnf = structured::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto schema = compile(*e, *gbnf);
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 8; ++i) {
    rs.push_back(request("u" + std::to_string(i), 300 + i, schema, 300));
    rs.back().params.seed.reset();
  }
  for (const auto& r : rs) ASSERT_TRUE(e->add_request(r).is_ok());
  auto out = run_all(*e);
  EXPECT_EQ(e->check_kv_drained(), "");
  for (const auto& r : rs) {
    const Collected& got = out.at(r.request_id);
    ASSERT_EQ(got.finish.at(0), FinishReason::kStop) << got.text.at(0);
    expect_valid(got.text.at(0));
  }
  EXPECT_GT(e->metrics().spec_num_drafts, 8);
  EXPECT_GT(e->metrics().spec_num_accepted_tokens, 0);
}

TEST_F(StructuredEngineTest, LengthIsTheOnlyWayToEndIncomplete) {
  auto e = make_engine(config(), bytes_);
  auto gbnf = structured::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
  ASSERT_TRUE(gbnf.is_ok());
  auto g = compile(*e, *gbnf);
  // Too few tokens for a whole document: "length", and the text is a prefix a grammar walk
  // can still complete (checked by the matcher of an independent fresh state).
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(e->add_request(request("s" + std::to_string(i), 7 + i, g, 6)).is_ok());
  auto out = run_all(*e);
  for (const auto& [id, c] : out) {
    EXPECT_EQ(c.finish.at(0), FinishReason::kLength) << c.text.at(0);
    structured::GrammarMatcher m(g);
    for (int32_t t : c.tokens.at(0)) EXPECT_TRUE(m.accept_token(t)) << id;
    EXPECT_FALSE(m.can_end()) << c.text.at(0);
  }
}

}  // namespace
}  // namespace loom
