// The step-time model speculation weighs its proposals with (engine/step_cost.h): it recovers
// a + b x rows from noisy steps, keeps its fit while every step has the same rows, follows a
// change of regime, and its row share grows with the rows towards 1.
#include "engine/step_cost.h"

#include <gtest/gtest.h>

#include <random>

namespace loom {
namespace {

// Steps of 1, 5, 16 and 80 rows (decodes and verifies of 1 and 16 sequences) costing
// a + b x rows, +-5% noise.
void feed(StepCostModel& m, double a, double b, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  const int rows[] = {1, 5, 16, 80};
  for (int i = 0; i < steps; ++i) {
    const int r = rows[rng() % 4];
    m.observe(r, (a + b * r) * noise(rng));
  }
}

TEST(StepCost, FitsFixedAndPerRowCost) {
  StepCostModel m;
  feed(m, 6e-3, 1.5e-3, 200, 1);
  EXPECT_NEAR(m.fixed_seconds(), 6e-3, 1.5e-3);
  EXPECT_NEAR(m.seconds_per_row(), 1.5e-3, 0.1e-3);
  EXPECT_NEAR(m.row_share(16), 24.0 / 30.0, 0.05);
  EXPECT_NEAR(m.row_share(1), 1.5 / 7.5, 0.05);
}

TEST(StepCost, SameRowsEveryStepKeepTheFit) {
  StepCostModel m;
  const double before = m.row_share(8);
  for (int i = 0; i < 100; ++i) m.observe(8, 0.05);  // says nothing about the per-row cost
  EXPECT_DOUBLE_EQ(m.row_share(8), before);
  feed(m, 6e-3, 1.5e-3, 200, 2);
  const double fitted = m.row_share(8);
  for (int i = 0; i < 100; ++i) m.observe(8, 6e-3 + 8 * 1.5e-3);
  EXPECT_NEAR(m.row_share(8), fitted, 0.02);
}

TEST(StepCost, FollowsTheRecentSteps) {
  StepCostModel m;
  feed(m, 8e-3, 0.5e-3, 200, 3);  // memory-bound: rows add little
  const double memory_bound = m.row_share(16);
  feed(m, 1e-3, 2e-3, 200, 4);  // compute-bound
  EXPECT_NEAR(m.seconds_per_row(), 2e-3, 0.2e-3);
  EXPECT_GT(m.row_share(16), memory_bound + 0.2);
}

TEST(StepCost, ShareGrowsWithRowsTowardsOne) {
  StepCostModel m;
  double last = 0;
  for (int rows : {1, 2, 4, 8, 16, 64, 1024}) {
    const double s = m.row_share(rows);
    EXPECT_GT(s, last) << rows;
    EXPECT_LT(s, 1.0) << rows;
    last = s;
  }
  EXPECT_GT(last, 0.9);
  feed(m, 0.0, 1e-3, 200, 5);  // no fixed part: every row pays for itself
  EXPECT_NEAR(m.row_share(1), 1.0, 0.1);
  m.observe(0, 1.0);   // ignored: no rows
  m.observe(4, -1.0);  // ignored: no time
  EXPECT_NEAR(m.row_share(1), 1.0, 0.1);
}

// Steps that get cheaper with rows (a noisy host) fit no per-row cost at all; a row still
// costs kMinRowShare of a step, so proposals that keep nothing still do not pay.
TEST(StepCost, ARowNeverCostsNothing) {
  StepCostModel m;
  for (int i = 0; i < 100; ++i) m.observe(i % 2 ? 1 : 9, i % 2 ? 0.02 : 0.01);
  EXPECT_EQ(m.seconds_per_row(), 0.0);
  EXPECT_EQ(m.row_share(1), StepCostModel::kMinRowShare);
  EXPECT_EQ(m.row_share(64), StepCostModel::kMinRowShare);
  EXPECT_GT(StepCostModel::kMinRowShare, 0.0);
}

TEST(StepCost, HeldFitIgnoresTheSteps) {
  StepCostModel m;
  m.hold(6e-3, 2e-3);
  feed(m, 1e-3, 0.0, 200, 6);
  EXPECT_EQ(m.fixed_seconds(), 6e-3);
  EXPECT_EQ(m.seconds_per_row(), 2e-3);
  EXPECT_DOUBLE_EQ(m.row_share(3), 6.0 / 12.0);
}

}  // namespace
}  // namespace loom
