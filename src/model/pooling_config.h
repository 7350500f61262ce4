// What an embedding or reranking model says about pooling, from either kind of file: a GGUF's
// {arch}.pooling_type / classifier labels / rerank prompt (as llama.cpp's converter writes
// them), or a Hugging Face directory's sentence-transformers modules (modules.json and
// 1_Pooling/config.json) and a Qwen3-Reranker's name.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "format/gguf.h"
#include "model/config.h"

namespace loom {

// "none", "mean", "cls", "last", "rank" (llama.cpp's --pooling names); "" for kUnspecified.
std::string_view pooling_type_name(PoolingType t);
// The inverse; nullopt for anything else.
std::optional<PoolingType> parse_pooling_type(std::string_view name);

// {arch}.pooling_type (an integer 0..4; another value is an error naming the key),
// {arch}.classifier.output_labels and tokenizer.chat_template.rerank into `c` (c.arch set).
Status read_gguf_pooling(const GgufFile& f, ModelConfig& c);

// From a Hugging Face model directory (`config_json`: its config.json text): the
// sentence-transformers Pooling module's mode (lasttoken, mean, cls; max and weighted modes
// are an error), or, without one, a Qwen3-Reranker (the directory's or _name_or_path's name
// says "reranker", or README.md opens with "# Qwen3-Reranker", as llama.cpp's converter
// checks) as kRank with no classifier head: it scores with the LM head's yes/no logits.
Status read_hf_pooling(const std::string& dir, std::string_view config_json, ModelConfig& c);

}  // namespace loom
