// The engine's sizing flags, shared by the commands that plan or start a serving engine
// (`loom serve`, `loom plan`), with vLLM's spelling: what the memory plan depends on.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "loom/engine.h"
#include "spec/spec_flags.h"

namespace loom::cli {

struct EngineFlags {
  EngineConfig config;
  bool no_prefix_cache = false;
  std::string kv_cache_dtype = "auto";
  spec::SpeculativeFlags speculative;

  void add_to(CLI::App& app) {
    app.add_option("--max-model-len", config.max_model_len,
                   "longest prompt + output (0 = the model's context)")
        ->check(CLI::Range(0, 1 << 30));
    app.add_option("--max-num-seqs", config.max_num_seqs, "sequences running at once")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    app.add_option("--max-num-batched-tokens", config.max_num_batched_tokens,
                   "tokens per engine step (0 = 2048)")
        ->check(CLI::Range(0, 1 << 30));
    app.add_option("--shared-prefill-tokens", config.shared_prefill_tokens,
                   "prompt tokens per engine step while more than one request runs or waits, so "
                   "that a burst of prompts does not stall every first token and decode (default: "
                   "256 on CPU; 0 = only --max-num-batched-tokens limits them)")
        ->check(CLI::Range(0, 1 << 30));
    app.add_option("--kv-cache-memory", config.kv_cache_memory_gib,
                   "KV cache size in GiB (0 = room for max_num_seqs sequences of max_model_len "
                   "tokens, at most a quarter of RAM; sliding-window layers take only their "
                   "windows)")
        ->check(CLI::Range(0.0, 1e6));
    app.add_option("--kv-cache-dtype", kv_cache_dtype,
                   "KV cache element type: auto (= f16), f16, bf16 or f32")
        ->check(CLI::IsMember({"auto", "f16", "bf16", "f32"}))
        ->capture_default_str();
    app.add_option("--block-size", config.block_size, "tokens per KV block")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_flag("--disable-sliding-window", config.disable_sliding_window,
                 "full attention in every layer, also where the model slides a window");
    speculative.add_to(app);
    app.add_flag("--no-prefix-cache,--no-enable-prefix-caching", no_prefix_cache,
                 "disable prefix caching");
    app.add_option("--state-snapshot-every", config.state_snapshot_every,
                   "hybrid models: snapshot the recurrent state for the prefix cache every N KV "
                   "blocks (and at each sequence's newest block boundary)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    app.add_option("--state-cache-memory", config.state_cache_memory_gib,
                   "hybrid models: GiB for recurrent-state prefix snapshots (0 = 1 GiB, at most 8 "
                   "per --max-num-seqs)")
        ->check(CLI::Range(0.0, 1e6));
    app.add_option("-t,--threads", config.n_threads, "CPU threads (0 = physical cores)")
        ->check(CLI::Range(0, 1024));
  }

  // After parsing: the flags that need more than a store (an error names the flag).
  Status apply() {
    LOOM_RETURN_IF_ERROR(speculative.apply(config.speculative));
    config.enable_prefix_caching = !no_prefix_cache;
    config.kv_dtype = kv_cache_dtype == "f32"    ? Dtype::kF32
                      : kv_cache_dtype == "bf16" ? Dtype::kBF16
                                                 : Dtype::kF16;
    return Status();
  }
};

// Prints model's memory plan under `config` (a table, or JSON) to stdout; returns the exit
// status: 0 when it fits, 1 when not or when the model cannot be read (`command` names the
// command in errors). Defined in cmd_plan.cpp.
int print_memory_plan(const std::string& model, const EngineConfig& config, bool json,
                      const char* command);

}  // namespace loom::cli
