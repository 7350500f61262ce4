// Multi-turn chat replay (`loom bench chat`): what prefix caching is for. One conversation of
// T turns: a system prompt, then per turn a user message of random tokens; each turn's prompt
// is the whole history (system, every earlier user message and answer) plus its new message,
// and its answer (greedy, a fixed number of tokens) joins the history. The time to first token
// of each turn is measured with prefix caching on and off, on two engines over the same model,
// conversation by conversation alternately (these machines are noisy: ratios measured back to
// back). For a hybrid model the "on" engine resumes each turn from the recurrent-state snapshot
// at the end of the previous one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "loom/engine.h"

namespace loom::bench {

struct ChatOptions {
  int32_t turns = 8;
  int32_t system_len = 512;
  int32_t user_len = 64;
  int32_t output_len = 32;
  int32_t repeats = 3;  // conversations per engine (each with its own random tokens)
  uint64_t seed = 0;
};

struct ChatTurn {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // served by the prefix cache
  double ttft_s = 0;
};

// One conversation on `engine` (idle): per turn its prompt, what the cache served, its TTFT.
Result<std::vector<ChatTurn>> run_chat(Engine& engine, const ChatOptions& options, uint64_t seed);

// `loom bench chat ...` (argv[0] == "chat").
int chat_main(int argc, char** argv);

}  // namespace loom::bench
