// Where a forward pass's time goes: wall time per phase, summed over the calls made while a
// profile is attached (Model::set_profile; `loom bench model --profile`). Each phase ends
// where the calling thread has finished it and every pool thread with it, so the phases add
// up to the calls' wall time (a phase includes its hand-off and the threads' waiting).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace loom {

struct ForwardProfile {
  // Each matmul phase includes the row work that computes its input, which runs inside the
  // matmul's activation pass (kernels::RowFill).
  enum Phase : int {
    kQkv,        // the previous layer's residual add, attention norm (layer 0: the step's
                 // setup, embedding lookup and RoPE angles instead of the add), q/k/v matmuls
    kRope,       // bias, qk-norm, RoPE and the K/V store (in decode steps, within kAttention)
    kAttention,  // paged attention
    kWo,         // output projection
    kGateUp,     // residual add, FFN norm, gate/up matmuls
    kDown,       // SwiGLU and the down projection
    kOutput,     // last residual add, output norm and the logits matmul
    kPhases
  };
  static constexpr std::array<const char*, kPhases> kNames = {
      "qkv", "rope+kv", "attention", "wo", "gate/up", "down", "output"};
  std::array<double, kPhases> seconds{};
  int64_t calls = 0;
};

// Ends the phases of one forward call on a profile; does nothing without one.
class PhaseClock {
 public:
  explicit PhaseClock(ForwardProfile* profile) : profile_(profile) {
    if (!profile_) return;
    ++profile_->calls;
    last_ = std::chrono::steady_clock::now();
  }
  // The time since the previous end (or the start) goes to `phase`.
  void end(ForwardProfile::Phase phase) {
    if (!profile_) return;
    const auto now = std::chrono::steady_clock::now();
    profile_->seconds[phase] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  ForwardProfile* profile_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace loom
