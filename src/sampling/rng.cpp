// Rng seeding. splitmix64 spreads a (seed, stream) pair over the 256-bit xoshiro state, which
// must never be all zero; splitmix64 outputs are a bijection of distinct inputs, so four
// consecutive outputs are never all zero.
#include "sampling/rng.h"

#include <atomic>
#include <random>

namespace loom {
namespace {

uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Rng::Rng() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  seed_from(seed, counter.fetch_add(1, std::memory_order_relaxed));
}

Rng::Rng(uint64_t seed, uint64_t stream) { seed_from(seed, stream); }

void Rng::seed_from(uint64_t seed, uint64_t stream) {
  // Mix the stream through its own splitmix round first so that (seed, stream) and
  // (seed + k, stream - k) style pairs do not collide.
  uint64_t st = stream;
  uint64_t x = seed ^ splitmix64(&st);
  for (uint64_t& w : s_) w = splitmix64(&x);
}

}  // namespace loom
