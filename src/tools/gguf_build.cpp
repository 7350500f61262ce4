#include "tools/gguf_build.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/fp16.h"
#include "kernels/quant.h"

namespace loom {
namespace {

// A read-only run of zero bytes as long as the largest tensor, backed by the kernel's shared
// zero page: GgufWriter needs tensor data to lay out and emit the file, and this stands in for
// it without costing memory. The real bytes are written over the zeros afterwards.
class ZeroPages {
 public:
  explicit ZeroPages(uint64_t size) : size_(std::max<uint64_t>(size, 1)) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : p;
  }
  ~ZeroPages() {
    if (data_) munmap(data_, size_);
  }
  ZeroPages(const ZeroPages&) = delete;
  ZeroPages& operator=(const ZeroPages&) = delete;
  const void* data() const { return data_; }

 private:
  uint64_t size_;
  void* data_ = nullptr;
};

Status add_placeholder_tensors(GgufWriter& w, const std::vector<PlannedTensor>& plan,
                               const ZeroPages& zeros) {
  if (!zeros.data()) return io_error("cannot reserve address space for the tensor layout");
  for (const auto& t : plan)
    LOOM_RETURN_IF_ERROR(w.add_tensor(t.name, t.dtype, t.ne, zeros.data(), t.nbytes));
  return Status::ok();
}

uint64_t max_nbytes(const std::vector<PlannedTensor>& plan) {
  uint64_t m = 0;
  for (const auto& t : plan) m = std::max(m, t.nbytes);
  return m;
}

// Where each tensor's bytes start in the file, as the reader sees it (so the fill can never
// disagree with the layout the writer chose).
Result<std::vector<uint64_t>> tensor_file_offsets(const GgufFile& f,
                                                  const std::vector<PlannedTensor>& plan) {
  std::vector<uint64_t> out;
  out.reserve(plan.size());
  for (const auto& t : plan) {
    const GgufTensorInfo* info = f.find_tensor(t.name);
    if (!info || info->view.nbytes != t.nbytes)
      return internal_error("GGUF writer did not reproduce tensor " + t.name);
    out.push_back(f.data_offset() + info->offset);
  }
  return out;
}

}  // namespace

Result<PlannedTensor> plan_tensor(std::string name, Dtype dtype, std::vector<int64_t> ne) {
  if (ne.empty()) return invalid_argument("tensor " + name + " has no dimensions");
  auto rb = row_bytes(dtype, ne[0]);
  if (!rb)
    return invalid_argument("tensor " + name + ": row length " + std::to_string(ne[0]) +
                            " is not a multiple of " + std::string(dtype_name(dtype)) +
                            "'s block size " + std::to_string(dtype_info(dtype).block_size));
  uint64_t n = *rb;
  for (size_t i = 1; i < ne.size(); ++i) n *= static_cast<uint64_t>(ne[i]);
  PlannedTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.ne = std::move(ne);
  t.nbytes = n;
  return t;
}

Result<std::shared_ptr<std::vector<uint8_t>>> build_gguf_bytes(
    GgufWriter meta, const std::vector<PlannedTensor>& plan, const TensorFillFn& fill) {
  std::shared_ptr<std::vector<uint8_t>> bytes;
  {
    ZeroPages zeros(max_nbytes(plan));
    LOOM_RETURN_IF_ERROR(add_placeholder_tensors(meta, plan, zeros));
    bytes = std::make_shared<std::vector<uint8_t>>(meta.to_bytes());
  }
  LOOM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse_bytes(bytes));
  LOOM_ASSIGN_OR_RETURN(auto offsets, tensor_file_offsets(f, plan));
  for (size_t i = 0; i < plan.size(); ++i)
    LOOM_RETURN_IF_ERROR(fill(i, bytes->data() + offsets[i]));
  return bytes;
}

Result<GgufFile> build_gguf_layout(GgufWriter meta, const std::vector<PlannedTensor>& plan) {
  ZeroPages zeros(max_nbytes(plan));
  LOOM_RETURN_IF_ERROR(add_placeholder_tensors(meta, plan, zeros));
  return meta.layout();
}

Status build_gguf_file(GgufWriter meta, const std::vector<PlannedTensor>& plan,
                       const TensorFillFn& fill, const std::string& path) {
  {
    ZeroPages zeros(max_nbytes(plan));
    LOOM_RETURN_IF_ERROR(add_placeholder_tensors(meta, plan, zeros));
    LOOM_RETURN_IF_ERROR(meta.write(path));
  }
  std::vector<uint64_t> offsets;
  uint64_t file_size = 0;
  {
    LOOM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
    LOOM_ASSIGN_OR_RETURN(offsets, tensor_file_offsets(f, plan));
    file_size = f.file_size();
  }
  auto fail = [&](Status st) {
    ::unlink(path.c_str());  // never leave a file of zeros that looks like a model
    return st;
  };
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) return fail(io_error("cannot reopen " + path + ": " + std::strerror(errno)));
  void* map =
      file_size ? mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : nullptr;
  ::close(fd);
  if (map == MAP_FAILED) return fail(io_error("cannot map " + path + ": " + std::strerror(errno)));
  Status st;
  for (size_t i = 0; i < plan.size() && st.is_ok(); ++i)
    st = fill(i, static_cast<uint8_t*>(map) + offsets[i]);
  if (map) {
    if (st.is_ok() && msync(map, file_size, MS_SYNC) != 0)
      st = io_error("cannot write " + path + ": " + std::strerror(errno));
    munmap(map, file_size);
  }
  if (!st.is_ok()) return fail(st);
  return Status::ok();
}

Status encode_rows(Dtype dtype, const float* src, uint8_t* dst, int64_t n_rows, int64_t cols) {
  const int64_t n = n_rows * cols;
  switch (dtype) {
    case Dtype::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return Status::ok();
    case Dtype::kF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      return Status::ok();
    }
    case Dtype::kBF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return Status::ok();
    }
    default:
      break;
  }
  auto rb = row_bytes(dtype, cols);
  if (!rb)
    return invalid_argument("row length does not fit the block size of " +
                            std::string(dtype_name(dtype)));
  for (int64_t r = 0; r < n_rows; ++r)
    LOOM_RETURN_IF_ERROR(kernels::quantize_row(dtype, src + r * cols, dst + r * *rb, cols));
  return Status::ok();
}

void decode_rows(Dtype dtype, const uint8_t* src, float* dst, int64_t n_rows, int64_t cols) {
  const int64_t n = n_rows * cols;
  switch (dtype) {
    case Dtype::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case Dtype::kF16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case Dtype::kBF16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    default:
      break;
  }
  const uint64_t rb = row_bytes(dtype, cols).value();
  for (int64_t r = 0; r < n_rows; ++r)
    kernels::dequantize_row(dtype, src + r * rb, dst + r * cols, cols);
}

void FallbackNotes::add(int64_t cols, Dtype wanted, Dtype used) {
  for (auto& g : groups_)
    if (g.wanted == wanted && g.used == used) {
      ++g.count;
      if (std::find(g.cols.begin(), g.cols.end(), cols) == g.cols.end()) g.cols.push_back(cols);
      return;
    }
  groups_.push_back({wanted, used, 1, {cols}});
}

std::vector<std::string> FallbackNotes::lines() const {
  std::vector<std::string> out;
  for (const auto& g : groups_) {
    std::string cols;
    for (int64_t c : g.cols) cols += (cols.empty() ? "" : ", ") + std::to_string(c);
    out.push_back(std::to_string(g.count) + " tensor(s) with rows of " + cols + " do not fit " +
                  std::string(dtype_name(g.wanted)) + " blocks of " +
                  std::to_string(dtype_info(g.wanted).block_size) + ": stored as " +
                  std::string(dtype_name(g.used)));
  }
  return out;
}

int64_t rows_per_chunk(int64_t cols) {
  return std::max<int64_t>(1, kChunkElems / std::max<int64_t>(cols, 1));
}

Status parallel_row_chunks(ThreadPool& pool, int64_t rows, int64_t cols,
                           const std::function<Status(int64_t, int64_t, int64_t, int)>& fn) {
  const int64_t per = rows_per_chunk(cols);
  const int64_t n_chunks = (rows + per - 1) / per;
  std::mutex mu;
  Status first_error;
  pool.parallel_for(n_chunks, [&](int64_t chunk, int thread) {
    const int64_t r0 = chunk * per;
    Status st = fn(chunk, r0, std::min(per, rows - r0), thread);
    if (!st.is_ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.is_ok()) first_error = st;
    }
  });
  return first_error;
}

}  // namespace loom
