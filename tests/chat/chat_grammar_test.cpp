// build_chat_grammar: the grammar (run by the grammar engine over raw bytes) accepts each
// family's canonical call text, which the output parser turns back into the call, and rejects
// calls to undeclared functions and arguments that break the schema.
#include <gtest/gtest.h>

#include "chat/output_format.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::chat {
namespace {

using Json = nlohmann::ordered_json;
using Mode = ChatGrammarRequest::ToolMode;

Json tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"tz": {"type": "string"}, "offset": {"type": "integer"}},
      "required": ["tz"], "additionalProperties": false}}}
  ])");
}

std::shared_ptr<const structured::TokenVocab> byte_vocab() {
  static auto v = [] {
    std::vector<std::string> bytes;
    std::vector<bool> special;
    for (int i = 0; i < 256; ++i) {
      bytes.push_back(std::string(1, static_cast<char>(i)));
      special.push_back(false);
    }
    bytes.push_back("</s>");
    special.push_back(true);
    return structured::TokenVocab::from_tokens(bytes, special, {256});
  }();
  return v;
}

// Whether `text` is a complete sentence of the grammar.
bool accepts(const std::string& gbnf, const std::string& text) {
  auto g = structured::parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
  if (!g.is_ok()) return false;
  auto cg = structured::CompiledGrammar::create(*g, byte_vocab());
  EXPECT_TRUE(cg.is_ok()) << cg.status().message();
  if (!cg.is_ok()) return false;
  structured::GrammarMatcher m(*cg);
  return m.accept_bytes(text) && m.can_end();
}

std::string grammar(ToolCallFormat f, Mode mode, bool parallel = true, const std::string& fn = "",
                    ReasoningFormat r = ReasoningFormat::kNone, bool starts_in_reasoning = false) {
  ChatGrammarRequest req;
  req.format = {f, r};
  req.tool_mode = mode;
  req.tools = tools();
  req.parallel_tool_calls = parallel;
  req.function_name = fn;
  req.starts_in_reasoning = starts_in_reasoning;
  auto g = build_chat_grammar(req);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : "";
}

struct Family {
  ToolCallFormat format;
  // call(name, args) in the canonical markup; wrap(calls) around a turn's calls.
  std::string (*call)(const std::string&, const std::string&);
  std::string (*wrap)(const std::vector<std::string>&);
};

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

const Family kFamilies[] = {
    {ToolCallFormat::kHermes,
     [](const std::string& n, const std::string& a) {
       return "<tool_call>\n{\"name\": \"" + n + "\", \"arguments\": " + a + "}\n</tool_call>";
     },
     [](const std::vector<std::string>& c) { return join(c, "\n"); }},
    {ToolCallFormat::kLlama3Json,
     [](const std::string& n, const std::string& a) {
       return "{\"name\": \"" + n + "\", \"parameters\": " + a + "}";
     },
     [](const std::vector<std::string>& c) { return join(c, "; "); }},
    {ToolCallFormat::kMistral,
     [](const std::string& n, const std::string& a) {
       return "{\"name\": \"" + n + "\", \"arguments\": " + a + "}";
     },
     [](const std::vector<std::string>& c) { return "[TOOL_CALLS][" + join(c, ", ") + "]"; }},
    {ToolCallFormat::kDeepSeekV3,
     [](const std::string& n, const std::string& a) {
       return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n" + a +
              "\n```<｜tool▁call▁end｜>";
     },
     [](const std::vector<std::string>& c) {
       return "<｜tool▁calls▁begin｜>" + join(c, "\n") + "<｜tool▁calls▁end｜>";
     }},
};

TEST(ChatGrammar, JsonFamiliesRequiredNamedParallel) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(tool_call_format_name(f.format));
    const std::string weather = f.call("get_weather", R"({"city": "Paris", "unit": "c"})");
    const std::string time = f.call("get_time", R"({"tz":"UTC","offset":2})");
    const std::string g = grammar(f.format, Mode::kRequired);
    EXPECT_TRUE(accepts(g, f.wrap({weather})));
    EXPECT_TRUE(accepts(g, f.wrap({weather, time})));
    EXPECT_FALSE(accepts(g, f.wrap({f.call("launch_missiles", "{}")})));
    EXPECT_FALSE(accepts(g, f.wrap({f.call("get_weather", R"({"city": 5})")})));
    EXPECT_FALSE(accepts(g, f.wrap({f.call("get_weather", R"({"unit": "c"})")})));
    EXPECT_FALSE(accepts(g, f.wrap({f.call("get_weather", R"({"city": "Paris", "unit": "k"})")})));
    EXPECT_FALSE(accepts(g, "Sure! " + f.wrap({weather})));
    EXPECT_FALSE(accepts(g, ""));

    const std::string single = grammar(f.format, Mode::kRequired, /*parallel=*/false);
    EXPECT_TRUE(accepts(single, f.wrap({weather})));
    EXPECT_FALSE(accepts(single, f.wrap({weather, time})));

    const std::string named = grammar(f.format, Mode::kNamed, true, "get_time");
    EXPECT_TRUE(accepts(named, f.wrap({time})));
    EXPECT_FALSE(accepts(named, f.wrap({weather})));

    // The parser reads the grammar's text back as the calls.
    ChatOutputParser p({f.format, ReasoningFormat::kNone}, true, false);
    p.push(f.wrap({weather, time}));
    p.finish();
    ASSERT_EQ(p.tool_calls().size(), 2u);
    EXPECT_EQ(p.tool_calls()[0].name, "get_weather");
    EXPECT_EQ(p.tool_calls()[0].arguments, R"({"city":"Paris","unit":"c"})");
    EXPECT_EQ(p.tool_calls()[1].arguments, R"({"tz":"UTC","offset":2})");
  }
}

TEST(ChatGrammar, AutoModeFreeTextAroundCalls) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(tool_call_format_name(f.format));
    const std::string g = grammar(f.format, Mode::kAuto);
    const std::string weather = f.wrap({f.call("get_weather", R"({"city": "Oslo"})")});
    EXPECT_TRUE(accepts(g, "The capital of France is Paris."));
    EXPECT_TRUE(accepts(g, ""));
    EXPECT_TRUE(accepts(g, weather));
    EXPECT_FALSE(accepts(g, f.wrap({f.call("rm_rf", "{}")})));
    if (f.format != ToolCallFormat::kLlama3Json) {
      EXPECT_TRUE(accepts(g, "Let me check.\n" + weather + "\nDone."));
      EXPECT_FALSE(accepts(g, "Let me check.\n" + f.wrap({f.call("rm_rf", "{}")})));
    } else {
      EXPECT_FALSE(accepts(g, "{\"answer\": 42}"));  // a JSON answer would read as a call
    }
  }
}

// parallel_tool_calls: false holds under "auto" too: one call in the turn, whether its calls
// come in one group or in groups between free text.
TEST(ChatGrammar, AutoModeWithoutParallelCallsTakesOneCall) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(tool_call_format_name(f.format));
    const std::string weather = f.call("get_weather", R"({"city": "Oslo"})");
    const std::string time = f.call("get_time", R"({"tz": "UTC"})");
    const std::string parallel = grammar(f.format, Mode::kAuto, /*parallel=*/true);
    const std::string single = grammar(f.format, Mode::kAuto, /*parallel=*/false);
    EXPECT_TRUE(accepts(parallel, f.wrap({weather, time})));
    EXPECT_TRUE(accepts(single, f.wrap({weather})));
    EXPECT_TRUE(accepts(single, "No call needed."));
    EXPECT_FALSE(accepts(single, f.wrap({weather, time})));
    if (f.format != ToolCallFormat::kLlama3Json) {
      const std::string two_groups = "First " + f.wrap({weather}) + " then " + f.wrap({time});
      EXPECT_TRUE(accepts(parallel, two_groups));
      EXPECT_FALSE(accepts(single, two_groups));
      EXPECT_TRUE(accepts(single, "Let me check. " + f.wrap({weather}) + " Done."));
    }
  }
}

TEST(ChatGrammar, Qwen3Coder) {
  const std::string call =
      "<tool_call>\n<function=get_time>\n<parameter=tz>\nEurope/Paris\n</parameter>\n"
      "<parameter=offset>\n-3\n</parameter>\n</function>\n</tool_call>";
  std::string g = grammar(ToolCallFormat::kQwen3Coder, Mode::kRequired);
  EXPECT_TRUE(accepts(g, call));
  EXPECT_TRUE(accepts(g, call + "\n" + call));
  EXPECT_FALSE(accepts(g,
                       "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n"
                       "<parameter=offset>\nsoon\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n<function=shell>\n</function>\n</tool_call>"));
  EXPECT_TRUE(accepts(g,
                      "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n"
                      "</parameter>\n<parameter=unit>\nf\n</parameter>\n</function>\n"
                      "</tool_call>"));
  g = grammar(ToolCallFormat::kQwen3Coder, Mode::kAuto);
  EXPECT_TRUE(accepts(g, "Checking.\n" + call));

  ChatOutputParser p({ToolCallFormat::kQwen3Coder, ReasoningFormat::kNone}, true, false);
  p.set_tools(tools());
  p.push(call);
  p.finish();
  ASSERT_EQ(p.tool_calls().size(), 1u);
  EXPECT_EQ(p.tool_calls()[0].arguments, R"({"tz":"Europe/Paris","offset":-3})");
}

TEST(ChatGrammar, ReasoningPrefix) {
  const std::string call =
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
  std::string g = grammar(ToolCallFormat::kHermes, Mode::kRequired, true, "",
                          ReasoningFormat::kDeepSeekR1, /*starts_in_reasoning=*/true);
  EXPECT_TRUE(accepts(g, "The user wants the time.\n</think>\n\n" + call));
  EXPECT_FALSE(accepts(g, call));  // the reasoning must be closed first
  g = grammar(ToolCallFormat::kHermes, Mode::kRequired, true, "", ReasoningFormat::kQwen3);
  EXPECT_TRUE(accepts(g, call));
  EXPECT_TRUE(accepts(g, "<think>\nTime.\n</think>\n\n" + call));
  EXPECT_FALSE(accepts(g, "<think>\nTime.\n</think>\n\nHello"));
}

TEST(ChatGrammar, AnswerGrammarAfterReasoning) {
  ChatGrammarRequest req;
  req.format = {ToolCallFormat::kHermes, ReasoningFormat::kDeepSeekR1};
  req.starts_in_reasoning = true;
  req.answer_gbnf = "root ::= yes | no\nyes ::= \"yes\"\nno ::= \"no\" [!]{0,2}\n";
  auto g = build_chat_grammar(req);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_TRUE(accepts(*g, "Is it? root ::= maybe.</think>\nno!!"));
  EXPECT_FALSE(accepts(*g, "hmm</think>\nmaybe"));
  EXPECT_FALSE(accepts(*g, "yes"));
}

TEST(ChatGrammar, NothingToConstrainAndErrors) {
  ChatGrammarRequest req;
  req.format = {ToolCallFormat::kHermes, ReasoningFormat::kQwen3};
  auto g = build_chat_grammar(req);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(*g, "");

  req.tool_mode = Mode::kNamed;
  req.tools = tools();
  req.function_name = "delete_everything";
  g = build_chat_grammar(req);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("delete_everything"), std::string::npos);

  req.tool_mode = Mode::kRequired;
  req.format.tools = ToolCallFormat::kNone;
  EXPECT_FALSE(build_chat_grammar(req).is_ok());

  req.format.tools = ToolCallFormat::kHermes;
  req.tools = Json::parse(R"([{"type": "function", "function": {"name": "odd", "parameters":
      {"type": "object", "properties": {"x": {"type": "string", "dependentSchemas": {}}}}}}])");
  g = build_chat_grammar(req);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("odd"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("dependentSchemas"), std::string::npos)
      << g.status().message();
}

// harmony (gpt-oss) with tool_choice auto and a constrained answer: after an optional
// analysis message, either the final message with the answer or a call; nothing else.
TEST(ChatGrammar, HarmonyAutoToolsWithAnAnswerGrammar) {
  ChatGrammarRequest req;
  req.format = {ToolCallFormat::kHarmony, ReasoningFormat::kHarmony};
  req.tool_mode = Mode::kAuto;
  req.tools = tools();
  req.answer_gbnf = "root ::= \"yes\" | \"no\"";
  auto g = build_chat_grammar(req);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const std::string call =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\": \"Paris\"}";
  const std::string analysis = "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant";
  EXPECT_TRUE(accepts(*g, "<|channel|>final<|message|>yes"));
  EXPECT_TRUE(accepts(*g, analysis + "<|channel|>final<|message|>no"));
  EXPECT_TRUE(accepts(*g, call));
  EXPECT_TRUE(accepts(*g, analysis + call));
  EXPECT_FALSE(accepts(*g, "<|channel|>final<|message|>maybe"));
  EXPECT_FALSE(accepts(*g,
                       "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                       "<|message|>{\"town\": \"Paris\"}"));
  EXPECT_FALSE(accepts(*g, "yes"));
}

}  // namespace
}  // namespace loom::chat
