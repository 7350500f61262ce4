// The CPU model's kernel-ready weight copies: made up front or by a background repacker while
// the model already runs on the file's layout, switched in between steps, and the loader's
// memory they replace released as they go.
#include <algorithm>
#include <chrono>

#include "backend/cpu/cpu_model.h"
#include "backend/cpu/weight_matrices.h"
#include "base/log.h"

namespace loom {

// At load, every weight matrix gets a kernel-ready copy in huge-page memory: Q8_0/Q4_0/MXFP4/
// Q4_K/Q6_K/F16/BF16 in the kernels' interleaved layout (prefill's GEMM ~2-3x, decode
// bandwidth-bound), the others as they are (decode streams them faster than from the file mapping);
// the file's pages stay in the page cache, reclaimable. Most of the copy's cost is the kernel
// zeroing the fresh pages on first touch (85% of an 8 GB model's load in a profile; ~2.8 GB/s per
// thread on the test machine), not the packing: a server makes the copies in the background while
// it already answers on the file's layout (the kernels take either), a benchmark waits for them.
void CpuModel::start_repacking(bool background) {
  for_each_repacked(
      weights_, [&](TensorView& w) { repack_todo_.push_back(&w); }, repack_output_);
  packed_.resize(repack_todo_.size());
  // One huge-page arena holds every copy, each at a 64 KiB boundary. A MoE model's thousands of
  // expert matrices (3,072 of 296 KiB in qwen3moe-2b Q4_K_M) each in huge pages of their own
  // held 7.7 GB for a 1 GB file (Qwen3-30B-A3B's shape ran out of 24 GB); packed end to end,
  // decode ran 18-24% slower (tg64 95-102 vs 123-130 tok/s; likely a thread's prefetch stream
  // running on into the next matrix, which the other thread reads). At 64 KiB boundaries it
  // measured as before (tg64 146-152 vs 149-155, alternating), for 8% more memory at 296 KiB
  // experts, 1.4% at 884 KiB.
  std::vector<uint64_t> offsets(repack_todo_.size());
  uint64_t arena_bytes = 0;
  for (size_t i = 0; i < repack_todo_.size(); ++i) {
    offsets[i] = arena_bytes;
    arena_bytes += arena_slot_bytes(*repack_todo_[i]);
  }
  weight_arena_ = allocate_huge(arena_bytes, /*commit=*/false);  // written as packed
  weight_arena_bytes_ = arena_bytes;
  auto pack = [this, offsets = std::move(offsets)](size_t i) {
    const TensorView& w = *repack_todo_[i];
    uint8_t* dst = weight_arena_.get() + offsets[i];
    packed_[i] = kernels::packable(w) ? kernels::PackedMatrix::pack_rows16(w, dst)
                                      : kernels::PackedMatrix::copy_rows(w, dst);
  };
  for (const TensorView* w : repack_todo_) copied_from_.push_back(w->data);
  repack_pending_ = true;
  if (!background) {
    pool_.parallel_for(static_cast<int64_t>(repack_todo_.size()),
                       [&](int64_t i, int) { pack(static_cast<size_t>(i)); });
    repack_made_.store(repack_todo_.size(), std::memory_order_relaxed);
    copies_made_->store(true, std::memory_order_release);
    switch_to_copies();
    return;
  }
  repacker_ = std::thread([this, pack] {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t unswitched = 0;  // bytes copied since this thread last switched views
    for (size_t i = 0; i < repack_todo_.size(); ++i) {
      if (repack_stop_.load(std::memory_order_relaxed)) return;
      pack(i);
      repack_made_.store(i + 1, std::memory_order_release);
      unswitched += packed_[i].view().nbytes;
      if (unswitched >= kSwitchEvery && try_switch_between_steps()) unswitched = 0;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    LOOM_LOG_INFO("weights: kernel-ready copies (%.2f GiB) made in the background in %.2f s",
                  static_cast<double>(weight_arena_bytes_) / double(1ull << 30), seconds);
    copies_made_->store(true, std::memory_order_release);
    try_switch_between_steps();
  });
}

// The repacker's side: switches what it made unless a step is running (that step's successor
// does it then). An idle server's loader memory goes as the copies replace it, not at its
// first request.
bool CpuModel::try_switch_between_steps() {
  std::unique_lock<std::mutex> no_step(views_mutex_, std::try_to_lock);
  if (!no_step.owns_lock()) return false;
  switch_made_copies();
  return true;
}

// Points the views at the copies made so far, between steps (so a step never sees a view
// change): the engine's thread at a forward call's start, or the repacker when no step runs
// (try_switch_between_steps), under views_mutex_. Each matrix switches soon after its copy exists:
// from then on no step reads its bytes in the file, and the kernel reclaims those pages first
// when memory runs short. Switched all at once at the end, every step read the whole file while
// the copies grew beside it, and where a file and its copies do not fit in memory together (a
// Qwen3-30B-A3B-sized MoE on 24 GiB) copier and decoder evicted each other's pages until the
// last copy was made. (Handing the pages back explicitly, MADV_PAGEOUT or MADV_COLD, measured
// no faster in bench/moe_startup.sh under a memory limit than leaving them to the kernel.)
void CpuModel::switch_to_copies() {
  switch_made_copies();
  if (repack_switched_ == repack_todo_.size()) finish_repacking();
}

void CpuModel::switch_made_copies() {
  const size_t made = repack_made_.load(std::memory_order_acquire);
  if (made == repack_switched_) return;
  for (size_t i = repack_switched_; i < made; ++i) {
    *repack_todo_[i] = packed_[i].view();
    switched_unreleased_ += packed_[i].view().nbytes;
  }
  repack_switched_ = made;
  if (switched_unreleased_ >= kSwitchEvery || made == repack_todo_.size()) {
    release_switched_loader_memory();
    switched_unreleased_ = 0;
  }
}

// What the loader made in memory (a Hugging Face checkpoint's dequantized FP8, gpt-oss's
// transposed experts) goes as soon as every view into it reads its copy, not once the last
// copy is made: the copies grow as the loader's memory shrinks, so a load peaks near the larger
// of the two instead of at both (qwen3moe-2b FP8, 3.16 GiB dequantized and 3.22 GiB of copies:
// peak anonymous memory 3.73 GiB, was 6.4-6.9 GiB; docs/benchmarks.md).
void CpuModel::release_switched_loader_memory() {
  if (!weights_.release_copied || !weights_.loader_made_bytes || weights_.loader_made_bytes() == 0)
    return;
  const std::span<const void* const> copied(copied_from_.data(), repack_switched_);
  std::vector<const void*> in_use = loader_views_in_use();
  in_use.insert(in_use.end(), copied_from_.begin() + static_cast<ptrdiff_t>(repack_switched_),
                copied_from_.end());
  weights_.release_copied(copied, in_use);
}

// Once every view reads its copy: the repacker is done (joined). What the loader made for the
// copied views went with the last switch (switch_made_copies releases when the last copy is
// switched); its hook stays for the MTP modules' weights, which only their modules copy.
void CpuModel::finish_repacking() {
  if (repacker_.joinable()) repacker_.join();
  copied_from_.clear();
  repack_todo_.clear();
  repack_pending_ = false;
  release_loader_made_ = std::move(weights_.release_copied);
  weights_.release_copied = nullptr;
  count_weight_bytes();
}

// The loader's memory that views still read: the embeddings and heads (dequantized on lookup
// or shared), and the MTP modules' weights (each module's block until the module has copied
// it; eh_proj and the embedding for the module's life: it reads them in place).
std::vector<const void*> CpuModel::loader_views_in_use() {
  std::vector<const void*> in_use = {weights_.token_embd.data, weights_.output.data,
                                     weights_.cls_out.data};
  mtp_module_made_.resize(weights_.mtp.size());
  for (size_t i = 0; i < weights_.mtp.size(); ++i) {
    MtpWeights& m = weights_.mtp[i];
    in_use.insert(in_use.end(), {m.eh_proj.data, m.embed.data});
    if (mtp_module_made_[i]) continue;
    in_use.push_back(m.head.data);
    for_each_matrix(m.block, [&](TensorView& w) { in_use.push_back(w.data); });
  }
  return in_use;
}

CpuModel::~CpuModel() {
  repack_stop_.store(true, std::memory_order_relaxed);
  if (repacker_.joinable()) repacker_.join();
}

uint64_t CpuModel::arena_slot_bytes(const TensorView& w) {
  constexpr uint64_t kBoundary = 64 << 10;
  return (kernels::PackedMatrix::packed_bytes(w) + kBoundary - 1) & ~(kBoundary - 1);
}

uint64_t CpuModel::weight_copy_bytes(const Weights& weights) {
  uint64_t bytes = 0;
  for_each_repacked(weights, [&](const TensorView& w) { bytes += arena_slot_bytes(w); });
  return bytes;
}

}  // namespace loom
