// `loom bench <sub>`: dispatches to the benchmarks registered in src/bench/bench_registry.h.
// Each benchmark registers itself (offline here; serve and model from their own files).
#include "bench/bench_registry.h"
#include "bench/chat_bench.h"
#include "bench/offline.h"
#include "cli/commands.h"

namespace loom::bench {
int structured_bench_main(int argc, char** argv);  // src/bench/structured_bench.cpp
}

namespace loom::cli {
namespace {

int cmd_bench(int argc, char** argv) {
  return bench::run_bench(argc, argv);
}

LOOM_REGISTER_COMMAND("bench", "benchmarks: offline (throughput), ...", cmd_bench);
LOOM_REGISTER_BENCH("offline", "throughput of N random-token prompts run at once",
                    bench::offline_main);
LOOM_REGISTER_BENCH("chat", "multi-turn chat replay: TTFT per turn with prefix caching on and off",
                    bench::chat_main);
LOOM_REGISTER_BENCH("structured", "grammar engine: compile time and per-token mask time",
                    bench::structured_bench_main);

}  // namespace
}  // namespace loom::cli
