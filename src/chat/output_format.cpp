// Format names (vLLM's --tool-call-parser / --reasoning-parser spellings) and detection of a
// model's formats from its chat template, as llama.cpp does: each family's template renders
// its own markup literally, so the markup's presence identifies the family.
#include "chat/output_format.h"

#include <string>

#include "chat/markup.h"

namespace loom::chat {

namespace {

struct ToolName {
  const char* name;
  ToolCallFormat format;
};
constexpr ToolName kToolNames[] = {
    {"none", ToolCallFormat::kNone},
    {"hermes", ToolCallFormat::kHermes},
    {"llama3_json", ToolCallFormat::kLlama3Json},
    {"mistral", ToolCallFormat::kMistral},
    {"deepseek_v3", ToolCallFormat::kDeepSeekV3},
    {"qwen3_coder", ToolCallFormat::kQwen3Coder},
    {"openai", ToolCallFormat::kHarmony},
};
struct ReasoningName {
  const char* name;
  ReasoningFormat format;
};
constexpr ReasoningName kReasoningNames[] = {
    {"none", ReasoningFormat::kNone},
    {"deepseek_r1", ReasoningFormat::kDeepSeekR1},
    {"qwen3", ReasoningFormat::kQwen3},
    {"openai_gptoss", ReasoningFormat::kHarmony},
};

bool contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}
// gpt-oss's template renders harmony's channel and message markers literally.
bool is_harmony_template(std::string_view t) {
  return contains(t, markup::kHarmonyChannel) && contains(t, markup::kHarmonyMessage);
}

}  // namespace

namespace {
template <typename Names>
std::string joined(const Names& names) {
  std::string out;
  for (const auto& n : names) {
    out += out.empty() ? "" : ", ";
    out += n.name;
  }
  return out;
}
}  // namespace

std::string tool_call_format_names() {
  return joined(kToolNames);
}
std::string reasoning_format_names() {
  return joined(kReasoningNames);
}

Result<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  for (const auto& n : kToolNames)
    if (name == n.name) return n.format;
  return invalid_argument("unknown tool-call parser '" + std::string(name) +
                          "' (known: " + tool_call_format_names() + ")");
}

Result<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  for (const auto& n : kReasoningNames)
    if (name == n.name) return n.format;
  return invalid_argument("unknown reasoning parser '" + std::string(name) +
                          "' (known: " + reasoning_format_names() + ")");
}

const char* tool_call_format_name(ToolCallFormat f) {
  for (const auto& n : kToolNames) {
    if (n.format == f) return n.name;
  }
  return "none";
}

const char* reasoning_format_name(ReasoningFormat f) {
  for (const auto& n : kReasoningNames) {
    if (n.format == f) return n.name;
  }
  return "none";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  if (is_harmony_template(t)) return ToolCallFormat::kHarmony;
  // Order matters: Qwen3-Coder's template also contains <tool_call>; Hermes-2-Pro's is a
  // Llama-3 model with ChatML + <tool_call>, so <tool_call> wins over Llama markers.
  if (contains(t, markup::kToolCallOpen) && contains(t, markup::kFunctionOpen) &&
      contains(t, markup::kParameterOpen))
    return ToolCallFormat::kQwen3Coder;
  if (contains(t, markup::kToolCallOpen)) return ToolCallFormat::kHermes;
  if (contains(t, markup::kMistralToolCalls)) return ToolCallFormat::kMistral;
  // The template may spell the markers out or build them; "tool▁calls▁begin" is in both.
  if (contains(t, "tool▁calls▁begin")) return ToolCallFormat::kDeepSeekV3;
  // Llama 3.1-3.3: custom tools are answered as bare JSON with "parameters".
  if (contains(t, markup::kPythonTag) ||
      (contains(t, "<|start_header_id|>") && contains(t, "\"parameters\"") && contains(t, "tools")))
    return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

ReasoningFormat detect_reasoning_format(std::string_view t) {
  if (is_harmony_template(t)) return ReasoningFormat::kHarmony;
  // Only templates that write the opening tag are reasoning models: DeepSeek V3's template
  // strips "</think>" from history but V3 does not think.
  if (!contains(t, markup::kThinkOpen)) return ReasoningFormat::kNone;
  // Qwen3's hybrid thinking: the model writes <think> itself unless enable_thinking=false.
  if (contains(t, "enable_thinking")) return ReasoningFormat::kQwen3;
  // DeepSeek-R1 (and distills, QwQ, Qwen3 thinking-only): the prompt opens <think>.
  return ReasoningFormat::kDeepSeekR1;
}

std::vector<std::string> parser_markers(OutputFormat f, bool tools_enabled) {
  using namespace markup;
  std::vector<std::string> m;
  auto add = [&](std::initializer_list<const char*> list) {
    m.insert(m.end(), list.begin(), list.end());
  };
  if (f.reasoning == ReasoningFormat::kDeepSeekR1 || f.reasoning == ReasoningFormat::kQwen3)
    add({kThinkOpen, kThinkClose});
  switch (tools_enabled ? f.tools : ToolCallFormat::kNone) {
    case ToolCallFormat::kNone:
      break;
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
      add({kToolCallOpen, kToolCallClose});
      break;
    case ToolCallFormat::kLlama3Json:
      add({kPythonTag});
      break;
    case ToolCallFormat::kMistral:
      add({kMistralToolCalls, kMistralArgs, kMistralCallId});
      break;
    case ToolCallFormat::kDeepSeekV3:
      add({kDeepSeekCallsBegin, kDeepSeekCallsEnd, kDeepSeekCallBegin, kDeepSeekCallEnd,
           kDeepSeekSep});
      break;
    case ToolCallFormat::kHarmony:
      break;  // below, with the reasoning format of the same name
  }
  // Harmony is read as a whole (harmony.h) whichever of its two formats is set.
  if (f.tools == ToolCallFormat::kHarmony || f.reasoning == ReasoningFormat::kHarmony)
    add({kHarmonyStart, kHarmonyChannel, kHarmonyMessage, kHarmonyConstrain, kHarmonyEnd,
         kHarmonyReturn, kHarmonyCall});
  return m;
}

bool prompt_opens_reasoning(ReasoningFormat f, std::string_view prompt) {
  // harmony: each message's channel says what it is; the parser starts at a header.
  if (f == ReasoningFormat::kNone || f == ReasoningFormat::kHarmony) return false;
  size_t end = prompt.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  std::string_view open = markup::kThinkOpen;
  std::string_view head = prompt.substr(0, end + 1);
  return head.size() >= open.size() && head.substr(head.size() - open.size()) == open;
}

}  // namespace loom::chat
