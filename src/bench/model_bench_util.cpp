#include "bench/model_bench_util.h"

#include <algorithm>
#include <cmath>

namespace loom::bench {

void mean_sd(ModelBenchRow& row) {
  const double n = static_cast<double>(row.samples_ts.size());
  double sum = 0;
  for (double x : row.samples_ts) sum += x;
  row.avg_ts = sum / n;
  double ss = 0;
  for (double x : row.samples_ts) ss += (x - row.avg_ts) * (x - row.avg_ts);
  row.stddev_ts = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  row.median_ts = median_of(row.samples_ts);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size();
  return k == 0 ? 0 : k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

std::string depth_suffix(int32_t depth) {
  return depth > 0 ? " @ d" + std::to_string(depth) : "";
}

}  // namespace loom::bench
