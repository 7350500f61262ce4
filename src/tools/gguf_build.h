// Writing a GGUF file whose tensor bytes are produced on the fly (synth, quantize): the
// header comes from GgufWriter, and each tensor is filled in place in the final buffer or
// file, so no tool ever holds a second full copy of a model's weights.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "format/dtype.h"
#include "format/gguf.h"

namespace loom {

struct PlannedTensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> ne;  // ggml order
  uint64_t nbytes = 0;      // set by plan_tensor
};

// Fills in nbytes from dtype and shape; error when the row length does not fit the block size.
Result<PlannedTensor> plan_tensor(std::string name, Dtype dtype, std::vector<int64_t> ne);

// Writes tensor `index`'s bytes (exactly plan[index].nbytes) to dst.
using TensorFillFn = std::function<Status(size_t index, uint8_t* dst)>;

// `meta` carries the metadata (and alignment) only; the tensors are added here.
Result<std::shared_ptr<std::vector<uint8_t>>> build_gguf_bytes(
    GgufWriter meta, const std::vector<PlannedTensor>& plan, const TensorFillFn& fill);
Status build_gguf_file(GgufWriter meta, const std::vector<PlannedTensor>& plan,
                       const TensorFillFn& fill, const std::string& path);
// The file the two above would build, parsed, its tensor data zeros that cost no memory
// (GgufWriter::layout): metadata, shapes and types without generating any bytes.
Result<GgufFile> build_gguf_layout(GgufWriter meta, const std::vector<PlannedTensor>& plan);

// Collects "rows do not fit the block size" fallbacks and reports them as one line per
// (wanted, used) pair instead of one per tensor.
class FallbackNotes {
 public:
  void add(int64_t cols, Dtype wanted, Dtype used);
  std::vector<std::string> lines() const;

 private:
  struct Group {
    Dtype wanted, used;
    int count;
    std::vector<int64_t> cols;
  };
  std::vector<Group> groups_;
};

// Row-wise conversions between float and a storage dtype (f32, f16, bf16 or a block format
// the kernels can quantize). `cols` must fit the dtype's block size.
Status encode_rows(Dtype dtype, const float* src, uint8_t* dst, int64_t n_rows, int64_t cols);
void decode_rows(Dtype dtype, const uint8_t* src, float* dst, int64_t n_rows, int64_t cols);

// Runs fn(first_row, n_rows, thread) over a tensor of `rows` rows split into chunks of about
// kChunkElems elements. The chunking depends only on (rows, cols), never on the thread count,
// so anything seeded per chunk is deterministic. Returns the first error any chunk returned.
inline constexpr int64_t kChunkElems = 1 << 16;
int64_t rows_per_chunk(int64_t cols);
Status parallel_row_chunks(
    ThreadPool& pool, int64_t rows, int64_t cols,
    const std::function<Status(int64_t chunk, int64_t first_row, int64_t n_rows, int thread)>& fn);

}  // namespace loom
