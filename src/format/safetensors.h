// Safetensors reader (Hugging Face checkpoints): one file, or a model directory with either
// model.safetensors or a sharded model.safetensors.index.json. Files are mmapped and every
// TensorView points into a mapping (zero copy).
// Format: u64 LE header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the data region; data_offsets are relative to the start of the data region.
// Shapes are converted to ggml order: an HF [rows, cols] weight has ne = {cols, rows}.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "format/tensor.h"

namespace loom {

struct SafetensorsTensor {
  std::string name;
  TensorView view;              // ggml order, data points into the mapping
  std::vector<int64_t> shape;   // as written in the file (HF / PyTorch order)
  uint64_t data_begin = 0;      // relative to the start of the data region
  const char* file_dtype = "";  // as written in the file ("BF16", "F8_E4M3", ...)
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory file kept alive by `bytes` (tests).
  static Result<SafetensorsFile> parse_bytes(std::shared_ptr<const std::vector<uint8_t>> bytes);

  // Sorted by data offset (file order).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  uint64_t data_offset() const { return data_offset_; }  // 8 + header length

 private:
  static Result<SafetensorsFile> parse_range(const uint8_t* data, uint64_t size,
                                             std::shared_ptr<const void> keepalive);
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  uint64_t data_offset_ = 0;
  std::shared_ptr<const void> keepalive_;
};

// All tensors of a Hugging Face checkpoint, across shards.
class SafetensorsModel {
 public:
  // `path` is a model directory (model.safetensors, else model.safetensors.index.json) or a
  // single .safetensors file.
  static Result<SafetensorsModel> open(const std::string& path);

  // name -> tensor, sorted by name.
  const std::map<std::string, TensorView, std::less<>>& tensors() const { return tensors_; }
  const TensorView* find(std::string_view name) const;
  // Whether the file stores this tensor as F8_E4M3 (its view's dtype is then kI8, raw codes).
  bool is_f8_e4m3(std::string_view name) const;
  const std::set<std::string, std::less<>>& f8_e4m3_names() const { return f8_e4m3_; }
  size_t num_shards() const { return shards_.size(); }

 private:
  Status add_shard(SafetensorsFile shard, const std::string& shard_name);
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::set<std::string, std::less<>> f8_e4m3_;
};

}  // namespace loom
