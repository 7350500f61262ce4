// The end-of-generation (EOG) set: the token ids that end a completion without any stop
// configuration. Chat models end a turn with a token that is often not the file's EOS (Gemma
// `<end_of_turn>` while EOS is `<eos>`, Phi-3 `<|end|>`, Llama 3 `<|eot_id|>` / `<|eom_id|>`),
// so one EOS id is not enough. This is the one place that decides the set; the engine's stop
// check, min_tokens suppression and the grammar engine's EOS tokens all read it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::tok {

struct Vocab;

// Chat-turn terminators recognised by their text (as llama.cpp does for files that predate
// tokenizer.ggml.eot_token_id / eom_token_id). Only a special token with one of these texts
// counts: control, or user-defined (an added token, which tokenization never builds from
// pieces; early Gemma GGUFs typed <end_of_turn> so, and llama.cpp retypes it to control). A
// normal vocabulary entry that happens to read "<|end|>" is text.
inline constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",      "<|eom_id|>",             // Llama 3
    "<|im_end|>",                                // ChatML: Qwen, SmolLM3, Hermes
    "<|end|>",                                   // Phi-3 / Phi-4
    "<end_of_turn>",                             // Gemma 2 / 3
    "<|endoftext|>",                             // Phi-3, OLMo 2, Qwen
    "<|end_of_text|>",                           // Granite, Llama 3 base
    "<EOT>",           "<｜end▁of▁sentence｜>",  // CodeLlama infill, DeepSeek
    "<|return|>",      "<|call|>",               // gpt-oss (harmony): the reply, a tool call
};

// o200k_harmony (gpt-oss) closes every message with <|end|>, the reasoning one included, and
// ends the reply with <|return|> or a tool call with <|call|>: in a vocabulary that has both
// of those as special tokens, <|end|> never ends generation, whatever the files name (as
// llama.cpp decides; gpt-oss's generation_config.json lists <|return|>, <|endoftext|> and
// <|call|>).

// The eot id a vocabulary implies when its file names none: the first special token (as
// above) among the terminators that mean "end of turn" rather than "end of text"; -1: none.
int32_t implied_eot(const Vocab& v);

// The EOG ids of `v`, sorted and unique, the union of:
//  - the ids the files name: eos, eot, eom (GGUF tokenizer.ggml.{eos,eot,eom}_token_id,
//    tokenizer_config.json eos_token) and v.named_eog (HF generation_config.json /
//    config.json eos_token_id, an id or a list), whatever their token type;
//  - every control or user-defined token whose text is in kEndOfTurnTexts;
// less a harmony vocabulary's <|end|> (above). Ids outside the vocabulary are dropped.
std::vector<int32_t> end_of_generation_ids(const Vocab& v);

}  // namespace loom::tok
