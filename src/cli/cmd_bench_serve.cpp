// Registers `loom bench serve` (load generator) and `loom bench model` (single-stream speed and
// roofline); both live in src/bench. Kept in src/cli because that library is linked whole, so
// these static registrations always run.
#include "bench/bench_registry.h"
#include "bench/model_bench.h"
#include "bench/serve.h"

namespace loom::cli {
namespace {

LOOM_REGISTER_BENCH("serve", "load-test an OpenAI-compatible server (TTFT, TPOT, ITL, goodput, sweeps)",
                    bench::serve_main);
LOOM_REGISTER_BENCH("model", "single-stream prefill / generation tokens/s and memory roofline",
                    bench::model_main);

}  // namespace
}  // namespace loom::cli
