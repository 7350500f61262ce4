// GGUF v2/v3 reader (mmap, zero-copy tensor views) and writer.
// Spec: ggml's docs/gguf.md. Every size computed from file data goes through checked
// arithmetic: a truncated or hostile file is an error that names the problem.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "format/tensor.h"

namespace loom {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Arrays keep their element type; numeric arrays are widened in memory
// (ints to int64/uint64, floats to double) but remember the on-disk element type so a
// writer reproduces the file.
class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue of_uint(GgufType t, uint64_t v);  // kU8/kU16/kU32/kU64
  static GgufValue of_int(GgufType t, int64_t v);    // kI8/kI16/kI32/kI64
  static GgufValue of_float(GgufType t, double v);   // kF32/kF64
  static GgufValue of_bool(bool v);
  static GgufValue of_string(std::string v);
  static GgufValue of_string_array(std::vector<std::string> v);
  static GgufValue of_int_array(GgufType elem, std::vector<int64_t> v);  // signed or unsigned elem
  static GgufValue of_float_array(GgufType elem, std::vector<double> v);
  static GgufValue of_bool_array(std::vector<bool> v);

  GgufType type() const { return type_; }
  GgufType array_type() const { return elem_; }  // meaningful for kArray
  size_t array_size() const;

  // Lossless conversions; nullopt when the value is not of a compatible type.
  std::optional<int64_t> as_int() const;    // any integer or bool
  std::optional<uint64_t> as_uint() const;  // any non-negative integer
  std::optional<double> as_float() const;   // float or integer
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const std::vector<std::string>* as_string_array() const;
  const std::vector<int64_t>* as_int_array()
      const;  // integer/bool arrays (u64 > INT64_MAX stored as bits)
  const std::vector<double>* as_float_array() const;  // f32/f64 arrays

  std::string to_display_string(size_t max_items = 8) const;  // for `loom inspect`

 private:
  GgufType type_ = GgufType::kU32;
  GgufType elem_ = GgufType::kU32;
  std::variant<std::monostate, uint64_t, int64_t, double, bool, std::string,
               std::vector<std::string>, std::vector<int64_t>, std::vector<double>>
      v_;
};

struct GgufTensorInfo {
  std::string name;
  TensorView view;      // data points into the mapping
  uint64_t offset = 0;  // relative to the start of the data section (of its part, when split)
};

// The keys of a model split into several files (llama.cpp's gguf-split, LLM_KV_SPLIT_*).
inline constexpr std::string_view kSplitNo = "split.no";                       // 0-based part
inline constexpr std::string_view kSplitCount = "split.count";                 // parts
inline constexpr std::string_view kSplitTensorsCount = "split.tensors.count";  // in all parts

class GgufFile {
 public:
  // A split model's first part (PREFIX-00001-of-0000N.gguf) opens all its parts as one file:
  // the first part's metadata, every part's tensors, file_size() the sum.
  static Result<GgufFile> open(const std::string& path);
  // Parses a buffer that `owner` keeps alive (tests use in-memory files).
  static Result<GgufFile> parse(std::shared_ptr<const MappedFile> owner);
  // `header` (everything before the tensor data) followed by `data_bytes` of zeros that cost
  // no memory (anonymous pages never committed): a file's layout without its weights
  // (GgufWriter::layout).
  static Result<GgufFile> with_zero_data(const std::vector<uint8_t>& header, uint64_t data_bytes);
  static Result<GgufFile> parse_bytes(std::shared_ptr<const std::vector<uint8_t>> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t size_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::shared_ptr<const void> keepalive_;

  // The parser proper: `data` stays valid as long as `keepalive` lives.
  static Result<GgufFile> open_split(const std::string& path, GgufFile first);
  static Result<GgufFile> parse_range(const uint8_t* data, uint64_t size,
                                      std::shared_ptr<const void> keepalive);
};

// Builds a GGUF v3 file. Tensor data is referenced, not copied: it must stay alive until
// write() returns. Writing streams to disk (models may be larger than memory headroom).
class GgufWriter {
 public:
  void set(std::string key, GgufValue value);  // replaces an existing key, keeps order
  void set_string(std::string key, std::string v) {
    set(std::move(key), GgufValue::of_string(std::move(v)));
  }
  void set_u32(std::string key, uint32_t v) {
    set(std::move(key), GgufValue::of_uint(GgufType::kU32, v));
  }
  void set_f32(std::string key, float v) {
    set(std::move(key), GgufValue::of_float(GgufType::kF32, v));
  }
  void set_bool(std::string key, bool v) { set(std::move(key), GgufValue::of_bool(v)); }
  void set_alignment(uint64_t a) { alignment_ = a; }

  // ne in ggml order (ne[0] contiguous). nbytes must equal the size implied by dtype and ne.
  Status add_tensor(std::string name, Dtype dtype, std::vector<int64_t> ne, const void* data,
                    uint64_t nbytes);

  Status write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;  // for tests and small files
  // The file this writer would write, parsed, with every tensor's data zeros (none of it
  // read or held): what its shapes, types and metadata say, at no cost (loom plan of a synth
  // model). The tensors' data pointers are not read.
  Result<GgufFile> layout() const;

 private:
  struct Pending {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> ne;
    const void* data;
    uint64_t nbytes;
  };
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Pending> tensors_;

  // Everything before the tensor data (magic .. padding); fills `offsets` per tensor.
  std::vector<uint8_t> header_bytes(std::vector<uint64_t>* offsets) const;
};

// Writes `in` as `n_parts` files PREFIX-00001-of-0000N.gguf .. as llama.cpp's gguf-split does:
// the first part carries all metadata, every part the split keys, tensors dealt out in order
// (each part at least one). Returns the paths written.
Result<std::vector<std::string>> write_gguf_split(const GgufFile& in, int n_parts,
                                                  const std::string& prefix);

}  // namespace loom
