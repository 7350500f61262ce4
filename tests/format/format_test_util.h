// Helpers shared by the format tests: temp dirs, random bytes, and hand-rolled encoders for
// GGUF and safetensors that follow the specs directly (independent of loom's writer).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace loom::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loom_format_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline std::shared_ptr<const std::vector<uint8_t>> share(std::vector<uint8_t> v) {
  return std::make_shared<const std::vector<uint8_t>>(std::move(v));
}

inline std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Little-endian byte builder for hand-made files.
class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& pad_to(size_t align) {
    while (b_.size() % align) b_.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b_.resize(b_.size() + n, 0);
    return *this;
  }
  size_t size() const { return b_.size(); }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

// GGUF header start per ggml docs/gguf.md: magic, version, n_tensors, n_kv.
inline Bytes gguf_header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  Bytes b;
  b.u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  return b;
}
// One tensor info: name, n_dims, ne..., ggml type, offset.
inline void gguf_tensor_info(Bytes& b, const std::string& name, std::vector<uint64_t> ne,
                             uint32_t type, uint64_t offset) {
  b.str(name).u32(static_cast<uint32_t>(ne.size()));
  for (uint64_t n : ne) b.u64(n);
  b.u32(type).u64(offset);
}

}  // namespace loom::test
