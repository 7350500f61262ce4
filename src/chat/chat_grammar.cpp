// build_chat_grammar: the GBNF for a constrained chat output. Layout of the grammar:
//
//   root      ::= reasoning answer
//   reasoning ::= (starts_in_reasoning)  text-without-"</think>" "</think>" ws
//              |  (allow_reasoning)      ( "<think>" text-without-"</think>" "</think>" ws )?
//   answer    ::= the answer grammar | calls (required / named) | text with calls (auto)
//
// Calls are written in the family's canonical markup, exactly as its chat template renders
// them (the model was trained on that text; the parser accepts it and more), with each
// call's arguments constrained by its tool's `parameters` schema through add_json_schema.
#include <algorithm>
#include <string>
#include <vector>

#include "chat/markup.h"
#include "chat/output_format.h"
#include "structured/frontends.h"

namespace loom::chat {

using structured::GbnfBuilder;
using Json = nlohmann::ordered_json;
using namespace markup;

namespace {

struct Tool {
  std::string name;
  Json parameters;
};

std::string lit(std::string_view s) {
  return GbnfBuilder::literal(s);
}

// Arguments JSON: one space allowed where json.dumps puts one (what the templates render and
// the models imitate); compact output stays valid.
structured::JsonGrammarOptions json_options() {
  structured::JsonGrammarOptions o;
  o.max_whitespace = 1;
  return o;
}

Result<std::vector<Tool>> read_tools(const Json& tools) {
  std::vector<Tool> out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return invalid_argument("'tools' must be an array");
  for (const auto& t : tools) {
    const Json* fn = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      return invalid_argument("each tool needs a function with a string 'name'");
    Tool tool{(*fn)["name"].get<std::string>(), Json()};
    if (fn->contains("parameters") && !(*fn)["parameters"].is_null()) {
      tool.parameters = (*fn)["parameters"];
    } else {
      tool.parameters = Json{{"type", "object"}, {"properties", Json::object()}};
    }
    if (!tool.parameters.is_object())
      return invalid_argument("tool '" + tool.name +
                              "': 'parameters' must be a JSON Schema object");
    out.push_back(std::move(tool));
  }
  return out;
}

Result<std::string> add_arguments(GbnfBuilder& b, const Tool& t) {
  auto r = structured::add_json_schema(b, t.parameters, json_options(), "args-" + t.name);
  if (!r.is_ok()) {
    return Status(r.status().code(),
                  "tool '" + t.name + "': invalid parameters schema: " + r.status().message());
  }
  return r;
}

// ---- qwen3_coder: one <parameter=...> element per property ----

bool is_string_schema(const Json& s) {
  if (!s.is_object()) return false;
  auto type = s.find("type");
  if (type == s.end())
    return !s.contains("enum") && !s.contains("const") && !s.contains("anyOf") &&
           !s.contains("oneOf") && !s.contains("properties") && !s.contains("items");
  if (type->is_string()) return *type == "string";
  return false;
}

Result<std::string> add_xml_parameters(GbnfBuilder& b, const Tool& t) {
  const Json& p = t.parameters;
  const std::string base = "params-" + t.name;
  if (p.contains("type") && p["type"] != "object")
    return invalid_argument("tool '" + t.name + "': parameters must be an object schema");
  Json props = p.value("properties", Json::object());
  if (!props.is_object())
    return invalid_argument("tool '" + t.name +
                            "': invalid parameters schema: 'properties' must be an object");
  std::vector<std::string> required;
  if (p.contains("required") && p["required"].is_array()) {
    for (const auto& r : p["required"]) {
      if (r.is_string()) required.push_back(r.get<std::string>());
    }
  }
  // Properties in schema order; required ones must appear, optional ones may.
  std::string seq;
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string& name = it.key();
    const Json& s = it.value();
    std::string value;
    if (is_string_schema(s) && !s.contains("enum") && !s.contains("pattern") &&
        !s.contains("format") && !s.contains("minLength") && !s.contains("maxLength")) {
      // Raw text (not a JSON string): anything that does not end the value.
      LOOM_ASSIGN_OR_RETURN(
          value, structured::add_text_without(b, {kParameterClose, kParameterOpen, kFunctionClose},
                                              base + "-text"));
    } else if (s.is_object() && s.value("type", Json()) == "string") {
      // A constrained string: its JSON form without the quotes is not expressible through
      // the JSON front-end, so enumerations are spelled out and other constraints refused.
      if (!s.contains("enum") || !s["enum"].is_array())
        return unsupported("tool '" + t.name + "': parameter '" + name +
                           "': string constraints other than enum are not supported for "
                           "qwen3_coder calls");
      std::string alts;
      for (const auto& e : s["enum"]) {
        if (!e.is_string()) continue;
        alts += (alts.empty() ? "" : " | ") + lit(e.get<std::string>());
      }
      if (alts.empty())
        return invalid_argument("tool '" + t.name + "': parameter '" + name + "': empty enum");
      value = b.add_rule(base + "-enum", alts);
    } else {
      auto r = structured::add_json_schema(b, s, json_options(), base + "-value");
      if (!r.is_ok()) {
        return Status(r.status().code(), "tool '" + t.name + "': invalid parameters schema: " +
                                             r.status().message() + " (parameter '" + name + "')");
      }
      value = *r;
    }
    std::string elem = lit(std::string(kParameterOpen) + name + ">\n") + " " + value + " " +
                       lit(std::string("\n") + kParameterClose + "\n");
    bool req = std::find(required.begin(), required.end(), name) != required.end();
    seq += (seq.empty() ? "" : " ") + (req ? elem : "( " + elem + " )?");
  }
  return b.add_rule(base, seq.empty() ? "\"\"" : seq);
}

// ---- one call in each family's markup ----

Result<std::string> add_call(GbnfBuilder& b, ToolCallFormat f, const Tool& t) {
  const std::string name_json = Json(t.name).dump();  // "name" with JSON escapes
  if (f == ToolCallFormat::kQwen3Coder) {
    LOOM_ASSIGN_OR_RETURN(std::string params, add_xml_parameters(b, t));
    return b.add_rule("call-" + t.name,
                      lit(std::string(kToolCallOpen) + "\n" + kFunctionOpen + t.name + ">\n") +
                          " " + params + " " +
                          lit(std::string(kFunctionClose) + "\n" + kToolCallClose));
  }
  LOOM_ASSIGN_OR_RETURN(std::string args, add_arguments(b, t));
  std::string body;
  switch (f) {
    case ToolCallFormat::kHermes:
      body = lit(std::string(kToolCallOpen) + "\n{\"name\": " + name_json + ", \"arguments\": ") +
             " " + args + " " + lit(std::string("}\n") + kToolCallClose);
      break;
    case ToolCallFormat::kLlama3Json:
      body = lit("{\"name\": " + name_json + ", \"parameters\": ") + " " + args + " " + lit("}");
      break;
    case ToolCallFormat::kMistral:  // an item of the [TOOL_CALLS] array
      body = lit("{\"name\": " + name_json + ", \"arguments\": ") + " " + args + " " + lit("}");
      break;
    case ToolCallFormat::kDeepSeekV3:
      body = lit(std::string(kDeepSeekCallBegin) + "function" + kDeepSeekSep + t.name +
                 "\n```json\n") +
             " " + args + " " + lit(std::string("\n```") + kDeepSeekCallEnd);
      break;
    default:
      return internal_error("no call markup");
  }
  return b.add_rule("call-" + t.name, body);
}

// One or more (or exactly one) calls, wrapped as the family wraps a turn's calls.
std::string add_calls(GbnfBuilder& b, ToolCallFormat f, const std::string& one, bool several) {
  std::string sep;
  switch (f) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
    case ToolCallFormat::kDeepSeekV3:
      sep = "\n";
      break;
    case ToolCallFormat::kLlama3Json:
      sep = "; ";
      break;
    case ToolCallFormat::kMistral:
      sep = ", ";
      break;
    default:
      break;
  }
  std::string list = several ? one + " ( " + lit(sep) + " " + one + " )*" : one;
  switch (f) {
    case ToolCallFormat::kMistral:
      return b.add_rule("calls",
                        lit(std::string(kMistralToolCalls) + "[") + " " + list + " " + lit("]"));
    case ToolCallFormat::kDeepSeekV3:
      return b.add_rule("calls",
                        lit(kDeepSeekCallsBegin) + " " + list + " " + lit(kDeepSeekCallsEnd));
    default:
      return b.add_rule("calls", list);
  }
}

// The marker that opens a call region in free text (auto mode).
std::string call_trigger(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
      return kToolCallOpen;
    case ToolCallFormat::kMistral:
      return kMistralToolCalls;
    case ToolCallFormat::kDeepSeekV3:
      return kDeepSeekCallsBegin;
    default:
      return "";
  }
}

// Renames every rule of a GBNF text with `prefix` (so the answer grammar can share a file
// with ours): identifiers outside literals, classes and comments are rule names.
std::string prefix_rules(std::string_view g, const std::string& prefix) {
  std::string out;
  auto is_name = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  };
  for (size_t i = 0; i < g.size();) {
    char c = g[i];
    if (c == '"' || c == '[') {
      char close = c == '"' ? '"' : ']';
      size_t j = i + 1;
      while (j < g.size() && g[j] != close) j += g[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, g.size());
      out.append(g.substr(i, j - i));
      i = j;
    } else if (c == '#') {
      size_t j = g.find('\n', i);
      if (j == std::string_view::npos) j = g.size();
      out.append(g.substr(i, j - i));
      i = j;
    } else if (is_name(c) && !(c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < g.size() && is_name(g[j])) ++j;
      out += prefix;
      out.append(g.substr(i, j - i));
      i = j;
    } else if (c == '{') {  // repetition bounds {m,n}: digits, not names
      size_t j = g.find('}', i);
      if (j == std::string_view::npos) j = g.size() - 1;
      out.append(g.substr(i, j + 1 - i));
      i = j + 1;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// harmony (gpt-oss): an optional analysis message, then either one call (a commentary message
// to functions.NAME whose body is the arguments; generation stops at its <|call|>) or the
// final message holding the constrained answer; with tool_choice auto and a constrained
// answer, either of the two. Calls in free text (auto, no answer grammar) are not
// constrained: the caller gets "" for them.
Result<std::string> build_harmony_grammar(const ChatGrammarRequest& req) {
  using Mode = ChatGrammarRequest::ToolMode;
  if (req.tool_mode == Mode::kAuto && req.answer_gbnf.empty()) return std::string();
  GbnfBuilder b;
  const std::string root = b.reserve("root");
  LOOM_ASSIGN_OR_RETURN(std::string thought,
                        structured::add_text_without(b, {kHarmonyEnd}, "thought"));
  std::string seq = b.add_rule(
      "analysis", "( " + lit(std::string(kHarmonyChannel) + "analysis" + kHarmonyMessage) + " " +
                      thought + " " + lit(std::string(kHarmonyEnd) + kHarmonyStart + "assistant") +
                      " )?");
  std::string answer;
  if (req.tool_mode == Mode::kNone || req.tool_mode == Mode::kAuto)
    answer = b.add_rule(
        "final", lit(std::string(kHarmonyChannel) + "final" + kHarmonyMessage) + " answer-root");
  if (req.tool_mode != Mode::kNone) {
    LOOM_ASSIGN_OR_RETURN(std::vector<Tool> tools, read_tools(req.tools));
    if (req.tool_mode == Mode::kNamed) {
      auto it = std::find_if(tools.begin(), tools.end(),
                             [&](const Tool& t) { return t.name == req.function_name; });
      if (it == tools.end())
        return invalid_argument("tool_choice names function '" + req.function_name +
                                "', which is not among the request's tools");
      tools = {*it};
    }
    if (tools.empty() && req.tool_mode != Mode::kAuto)
      return invalid_argument("tool_choice requires tools, but none were given");
    std::string alts = answer;  // auto: the final answer is one of the choices
    for (const Tool& t : tools) {
      LOOM_ASSIGN_OR_RETURN(std::string args, add_arguments(b, t));
      const std::string head = std::string(kHarmonyChannel) + "commentary to=" + kHarmonyFunctions +
                               t.name + " " + kHarmonyConstrain + "json" + kHarmonyMessage;
      alts += (alts.empty() ? "" : " | ") + b.add_rule("call-" + t.name, lit(head) + " " + args);
    }
    answer = b.add_rule(req.tool_mode == Mode::kAuto ? "reply" : "call", alts);
  }
  b.define(root, seq + " " + answer);
  std::string out = b.str();
  if (!req.answer_gbnf.empty()) out += "\n" + prefix_rules(req.answer_gbnf, "answer-");
  return out;
}

}  // namespace

Result<std::string> build_chat_grammar(const ChatGrammarRequest& req) {
  using Mode = ChatGrammarRequest::ToolMode;
  const bool wants_tools = req.tool_mode != Mode::kNone;
  if (!wants_tools && req.answer_gbnf.empty()) return std::string();
  if (req.format.tools == ToolCallFormat::kHarmony ||
      req.format.reasoning == ReasoningFormat::kHarmony)
    return build_harmony_grammar(req);
  const ToolCallFormat f = req.format.tools;
  if (wants_tools && f == ToolCallFormat::kNone) {
    return invalid_argument(
        "tools were requested but this model's chat template has no known tool-call format "
        "(start the server with --tool-call-parser NAME)");
  }

  GbnfBuilder b;
  const std::string root = b.reserve("root");
  std::string seq;

  // Reasoning first: the model thinks freely.
  if (req.format.reasoning != ReasoningFormat::kNone &&
      (req.starts_in_reasoning || req.allow_reasoning)) {
    LOOM_ASSIGN_OR_RETURN(std::string thought,
                          structured::add_text_without(b, {kThinkClose}, "thought"));
    std::string ws = b.add_rule("think-ws", "[ \\t\\n]{0,4}");
    if (req.starts_in_reasoning) {
      seq = b.add_rule("reasoning", thought + " " + lit(kThinkClose) + " " + ws);
    } else {
      seq = b.add_rule("reasoning", "( " + lit(kThinkOpen) + " " + thought + " " +
                                        lit(kThinkClose) + " " + ws + " )?");
    }
  }

  std::string answer;
  std::string answer_root;
  if (!req.answer_gbnf.empty()) answer_root = "answer-root";

  if (!wants_tools) {
    answer = answer_root;
  } else {
    LOOM_ASSIGN_OR_RETURN(std::vector<Tool> tools, read_tools(req.tools));
    if (req.tool_mode == Mode::kNamed) {
      auto it = std::find_if(tools.begin(), tools.end(),
                             [&](const Tool& t) { return t.name == req.function_name; });
      if (it == tools.end()) {
        return invalid_argument("tool_choice names function '" + req.function_name +
                                "', which is not among the request's tools");
      }
      tools = {*it};
    }
    if (tools.empty() && req.tool_mode != Mode::kAuto)
      return invalid_argument("tool_choice requires tools, but none were given");
    std::string alts = answer;  // auto: the final answer is one of the choices
    for (const Tool& t : tools) {
      LOOM_ASSIGN_OR_RETURN(std::string call, add_call(b, f, t));
      alts += (alts.empty() ? "" : " | ") + call;
    }
    std::string one = b.add_rule("call", alts);
    bool several = req.tool_mode != Mode::kNamed && req.parallel_tool_calls;
    std::string calls = add_calls(b, f, one, several);

    if (req.tool_mode != Mode::kAuto) {
      answer = calls;
    } else if (!answer_root.empty()) {
      answer = b.add_rule("answer", answer_root + " | " + calls);
    } else if (f == ToolCallFormat::kLlama3Json) {
      // A call is the whole answer; any other answer must not start like one.
      LOOM_ASSIGN_OR_RETURN(std::string any, structured::add_text_without(b, {}, "text"));
      answer = b.add_rule("answer", calls + " | \"\" | [^{ \\t\\n\\r] " + any);
    } else {
      // Free text; a call, once its opener appears, is constrained; then free text again.
      // Without parallel_tool_calls the calls come once (`calls` is then a single call).
      LOOM_ASSIGN_OR_RETURN(std::string text,
                            structured::add_text_without(b, {call_trigger(f)}, "text"));
      answer =
          b.add_rule("answer", text + " ( " + calls + " " + text + " )" + (several ? "*" : "?"));
    }
  }
  seq += (seq.empty() ? "" : " ") + answer;
  b.define(root, seq);

  std::string out = b.str();
  if (!answer_root.empty()) out += "\n" + prefix_rules(req.answer_gbnf, "answer-");
  return out;
}

}  // namespace loom::chat
