// Registers `loom bench gdn` (src/bench/gdn_bench.cpp): the Gated DeltaNet step's chunked
// prefill against its token-by-token form. In src/cli because that library is linked whole.
#include "bench/bench_registry.h"

namespace loom::bench {
int gdn_bench_main(int argc, char** argv);
}

namespace loom::cli {
namespace {

LOOM_REGISTER_BENCH("gdn", "Gated DeltaNet step: chunked prefill vs token by token, decode bytes",
                    bench::gdn_bench_main);

}  // namespace
}  // namespace loom::cli
