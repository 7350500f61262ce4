// What `bench model`'s parts share: a row's statistics and test names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/model_bench.h"

namespace loom::bench {

// avg_ts, stddev_ts (sample) and median_ts from row.samples_ts.
void mean_sd(ModelBenchRow& row);
double median_of(std::vector<double> v);  // 0 for none
// " @ dD" after a generation test's name when it starts D tokens deep (-d), else "".
std::string depth_suffix(int32_t depth);

}  // namespace loom::bench
