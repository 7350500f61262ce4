// Rng: the per-request random generator (xoshiro256**, seeded through splitmix64). Every
// request — every sequence of an n > 1 request — owns one, so its samples depend only on its
// seed and its own logits, never on which other requests share the batch.
#pragma once

#include <cstdint>
#include <optional>

namespace loom {

class Rng {
 public:
  // Seeded from std::random_device (mixed with a process-wide counter, so two generators
  // made in the same instant still differ).
  Rng();
  // Deterministic: the same (seed, stream) always yields the same sequence. `stream`
  // separates the sequences of one request (n > 1: sequence i uses stream i).
  explicit Rng(uint64_t seed, uint64_t stream = 0);

  // The generator for sequence `stream` of a request: seeded from `seed` when set, else random.
  static Rng for_request(const std::optional<uint64_t>& seed, uint64_t stream = 0) {
    return seed ? Rng(*seed, stream) : Rng();
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  void seed_from(uint64_t seed, uint64_t stream);

  uint64_t s_[4];
};

}  // namespace loom
