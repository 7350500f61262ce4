// GGUF v3 writer: metadata in insertion order, tensor infos, padding, aligned tensor data.
// The header is built in memory (it is small); tensor data is streamed from the caller's
// buffers so that writing a model needs no second copy of its weights.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/checked.h"
#include "format/gguf.h"

namespace loom {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";

bool valid_alignment(uint64_t a) {
  return a > 0 && (a & (a - 1)) == 0 && a <= UINT32_MAX;
}

class Out {
 public:
  explicit Out(std::vector<uint8_t>* b) : b_(b) {}
  template <typename T>
  void put(T v) {
    const size_t at = b_->size();
    b_->resize(at + sizeof(T));
    std::memcpy(b_->data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    b_->insert(b_->end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>* b_;
};

// Writes one integer-like element of on-disk type t from its widened int64 bits.
void put_int(Out& o, GgufType t, int64_t v) {
  switch (t) {
    case GgufType::kU8:
      o.put(static_cast<uint8_t>(v));
      break;
    case GgufType::kI8:
      o.put(static_cast<int8_t>(v));
      break;
    case GgufType::kU16:
      o.put(static_cast<uint16_t>(v));
      break;
    case GgufType::kI16:
      o.put(static_cast<int16_t>(v));
      break;
    case GgufType::kU32:
      o.put(static_cast<uint32_t>(v));
      break;
    case GgufType::kI32:
      o.put(static_cast<int32_t>(v));
      break;
    case GgufType::kU64:
      o.put(static_cast<uint64_t>(v));
      break;
    case GgufType::kI64:
      o.put(static_cast<int64_t>(v));
      break;
    case GgufType::kBool:
      o.put(static_cast<uint8_t>(v != 0));
      break;
    default:
      LOOM_CHECK(false && "put_int on non-integer type");
  }
}

void put_float(Out& o, GgufType t, double v) {
  if (t == GgufType::kF32)
    o.put(static_cast<float>(v));
  else
    o.put(v);
}

void put_value(Out& o, const GgufValue& v) {
  const GgufType t = v.type();
  o.put(static_cast<uint32_t>(t));
  switch (t) {
    case GgufType::kString:
      o.put_string(*v.as_string());
      return;
    case GgufType::kBool:
      o.put(static_cast<uint8_t>(*v.as_bool()));
      return;
    case GgufType::kF32:
    case GgufType::kF64:
      put_float(o, t, *v.as_float());
      return;
    case GgufType::kU64: {
      std::optional<uint64_t> u = v.as_uint();
      LOOM_CHECK(u.has_value());  // a default-constructed GgufValue was set
      o.put(*u);
      return;
    }
    case GgufType::kArray: {
      const GgufType e = v.array_type();
      o.put(static_cast<uint32_t>(e));
      o.put<uint64_t>(v.array_size());
      if (auto* s = v.as_string_array()) {
        for (const std::string& x : *s) o.put_string(x);
      } else if (auto* f = v.as_float_array()) {
        for (double x : *f) put_float(o, e, x);
      } else if (auto* iv = v.as_int_array()) {
        for (int64_t x : *iv) put_int(o, e, x);
      }
      return;
    }
    default: {
      std::optional<int64_t> i = v.as_int();
      if (!i) i = static_cast<int64_t>(v.as_uint().value_or(0));
      put_int(o, t, *i);
    }
  }
}

}  // namespace

void GgufWriter::set(std::string key, GgufValue value) {
  if (key == kAlignmentKey) {
    // Keep the padding the writer produces consistent with what the file declares.
    if (std::optional<uint64_t> a = value.as_uint()) alignment_ = *a;
  }
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(value));
}

Status GgufWriter::add_tensor(std::string name, Dtype dtype, std::vector<int64_t> ne,
                              const void* data, uint64_t nbytes) {
  const std::string ctx = "tensor '" + name + "'";
  if (name.empty()) return invalid_argument("tensor name is empty");
  for (const Pending& p : tensors_)
    if (p.name == name) return invalid_argument("duplicate " + ctx);
  if (ne.empty() || ne.size() > 4)
    return invalid_argument(ctx + ": " + std::to_string(ne.size()) + " dims (must be 1..4)");
  uint64_t numel = 1;
  for (int64_t n : ne) {
    if (n <= 0) return invalid_argument(ctx + ": dimension " + std::to_string(n) + " must be > 0");
    std::optional<uint64_t> p = checked_mul(numel, static_cast<uint64_t>(n));
    if (!p || *p > static_cast<uint64_t>(INT64_MAX))
      return invalid_argument(ctx + ": element count overflows");
    numel = *p;
  }
  std::optional<uint64_t> rb = row_bytes(dtype, ne[0]);
  if (!rb)
    return invalid_argument(ctx + ": ne[0] = " + std::to_string(ne[0]) +
                            " is not a multiple of the block size of " +
                            std::string(dtype_name(dtype)));
  std::optional<uint64_t> expect = *rb;
  for (size_t d = 1; d < ne.size() && expect; ++d)
    expect = checked_mul(*expect, static_cast<uint64_t>(ne[d]));
  if (!expect || *expect != nbytes)
    return invalid_argument(ctx + ": " + std::to_string(nbytes) + " bytes given but " +
                            std::string(dtype_name(dtype)) + " with this shape needs " +
                            (expect ? std::to_string(*expect) : std::string("more than 2^64")));
  if (data == nullptr && nbytes > 0) return invalid_argument(ctx + ": null data");
  tensors_.push_back({std::move(name), dtype, std::move(ne), data, nbytes});
  return Status::ok();
}

std::vector<uint8_t> GgufWriter::header_bytes(std::vector<uint64_t>* offsets) const {
  LOOM_CHECK(valid_alignment(alignment_));
  std::vector<uint8_t> buf;
  Out o(&buf);
  // general.alignment is written whenever it differs from the default or was set
  // explicitly, always as u32 (what the spec and llama.cpp expect) and always equal to the
  // alignment actually used.
  bool has_key = false;
  for (const auto& kv : kv_) has_key |= kv.first == kAlignmentKey;
  const bool add_key = !has_key && alignment_ != kDefaultAlignment;

  o.put(kGgufMagic);
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size() + (add_key ? 1 : 0));
  const GgufValue align_value = GgufValue::of_uint(GgufType::kU32, alignment_);
  for (const auto& [k, v] : kv_) {
    o.put_string(k);
    put_value(o, k == kAlignmentKey ? align_value : v);
  }
  if (add_key) {
    o.put_string(kAlignmentKey);
    put_value(o, align_value);
  }
  offsets->clear();
  uint64_t off = 0;
  for (const Pending& t : tensors_) {
    o.put_string(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) o.put<uint64_t>(static_cast<uint64_t>(n));
    o.put<uint32_t>(static_cast<uint32_t>(t.dtype));
    o.put<uint64_t>(off);
    offsets->push_back(off);
    off = *checked_align_up(off + t.nbytes, alignment_);
  }
  buf.resize(*checked_align_up(buf.size(), alignment_), 0);
  return buf;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = header_bytes(&offsets);
  const uint64_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data_start + offsets[i], 0);
    const auto* p = static_cast<const uint8_t*>(tensors_[i].data);
    out.insert(out.end(), p, p + tensors_[i].nbytes);
  }
  out.resize(*checked_align_up(out.size(), alignment_), 0);
  return out;
}

Result<GgufFile> GgufWriter::layout() const {
  if (!valid_alignment(alignment_))
    return invalid_argument("alignment " + std::to_string(alignment_) +
                            " is not a power of two in [1, 2^32)");
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = header_bytes(&offsets);
  const uint64_t data_bytes =
      tensors_.empty() ? 0 : *checked_align_up(offsets.back() + tensors_.back().nbytes, alignment_);
  return GgufFile::with_zero_data(header, data_bytes);
}

Status GgufWriter::write(const std::string& path) const {
  if (!valid_alignment(alignment_))
    return invalid_argument("alignment " + std::to_string(alignment_) +
                            " is not a power of two in [1, 2^32)");
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = header_bytes(&offsets);
  // Write beside the target and rename, so a failed write never leaves a truncated model
  // under the final name.
  const std::string tmp = path + ".tmp";
  std::FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (fp == nullptr) return io_error("cannot create '" + tmp + "': " + std::strerror(errno));
  bool ok = std::fwrite(header.data(), 1, header.size(), fp) == header.size();
  uint64_t pos = 0;  // relative to the data section
  static const uint8_t kZeros[4096] = {};
  auto pad_to = [&](uint64_t target) {
    while (ok && pos < target) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(target - pos, sizeof kZeros));
      ok = std::fwrite(kZeros, 1, n, fp) == n;
      pos += n;
    }
  };
  for (size_t i = 0; i < tensors_.size() && ok; ++i) {
    pad_to(offsets[i]);
    const Pending& t = tensors_[i];
    if (ok && t.nbytes > 0) ok = std::fwrite(t.data, 1, t.nbytes, fp) == t.nbytes;
    pos += t.nbytes;
  }
  pad_to(*checked_align_up(pos, alignment_));
  const int saved_errno = errno;
  if (std::fclose(fp) != 0) ok = false;
  if (!ok) {
    std::remove(tmp.c_str());
    return io_error("writing '" + tmp + "' failed: " + std::strerror(saved_errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return io_error("cannot rename '" + tmp + "' to '" + path + "': " + err);
  }
  return Status::ok();
}

}  // namespace loom
