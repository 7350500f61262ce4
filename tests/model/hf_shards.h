// Test helpers that grow a Hugging Face fixture (tests/data/hf_reference/*) into a sharded
// checkpoint: its own model.safetensors as one shard, tensors the fixture lacks (transformers'
// save_pretrained leaves multi-token prediction layers out) as a second one with random
// values, and the model.safetensors.index.json that names every tensor's file.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace loom::test {

struct ShardTensor {
  std::string name;
  std::vector<int64_t> shape;  // torch order
};

// A safetensors file: the JSON header (padded to 8 bytes), then the tensors' bytes.
inline void write_safetensors_file(const std::string& path, const nlohmann::json& header,
                                   const std::vector<const std::vector<uint8_t>*>& data) {
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const std::vector<uint8_t>* d : data)
    out.write(reinterpret_cast<const char*>(d->data()), static_cast<std::streamsize>(d->size()));
}

// The same with the tensors' bytes in one string (as read_safetensors_file returns them).
inline void write_safetensors_file(const std::string& path, const nlohmann::json& header,
                                   const std::string& data) {
  const std::vector<uint8_t> bytes(data.begin(), data.end());
  write_safetensors_file(path, header, {&bytes});
}

// A safetensors file read back: its JSON header and the tensors' bytes after it.
struct SafetensorsContents {
  nlohmann::json header;
  std::string data;
};
inline SafetensorsContents read_safetensors_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  return {nlohmann::json::parse(bytes.substr(8, header_len)), bytes.substr(8 + header_len)};
}

// One tensor of a checkpoint a test writes: its safetensors dtype ("F32", "U8", "F8_E4M3",
// ...), its shape in torch order, its bytes.
struct CheckpointTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// `tensors` as a safetensors file, in name order.
inline void write_safetensors(const std::string& path,
                              const std::map<std::string, CheckpointTensor>& tensors) {
  nlohmann::json header;
  std::vector<const std::vector<uint8_t>*> data;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
    data.push_back(&t.bytes);
  }
  write_safetensors_file(path, header, data);
}

// Writes `tensors` (random F32: names with "norm" near 1, the rest ~N(0, 0.2)) as a
// safetensors file.
inline void write_random_safetensors(const std::string& path,
                                     const std::vector<ShardTensor>& tensors) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.2f);
  nlohmann::json header;
  std::vector<float> data;
  for (const ShardTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    const bool norm = t.name.find("norm") != std::string::npos;
    const size_t begin = data.size() * 4;
    for (int64_t i = 0; i < n; ++i) data.push_back(norm ? 1.0f + d(rng) : d(rng));
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size() * 4}}};
  }
  std::vector<uint8_t> bytes(data.size() * 4);
  std::memcpy(bytes.data(), data.data(), bytes.size());
  write_safetensors_file(path, header, {&bytes});
}

// `dir`: the fixture `src`'s weights as model-main.safetensors, `extra` as
// model-extra.safetensors, the index, and `config` as config.json.
inline void write_sharded_checkpoint(const std::string& src, const std::string& dir,
                                     const nlohmann::json& config,
                                     const std::vector<ShardTensor>& extra) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump(2);
  fs::copy_file(src + "/model.safetensors", dir + "/model-main.safetensors",
                fs::copy_options::overwrite_existing);
  write_random_safetensors(dir + "/model-extra.safetensors", extra);
  std::ifstream main(src + "/model.safetensors", std::ios::binary);
  uint64_t len = 0;
  main.read(reinterpret_cast<char*>(&len), 8);
  std::string h(len, '\0');
  main.read(h.data(), static_cast<std::streamsize>(len));
  nlohmann::json index;
  const nlohmann::json main_header = nlohmann::json::parse(h);  // kept: items() refers to it
  for (const auto& [name, v] : main_header.items())
    if (name != "__metadata__") index["weight_map"][name] = "model-main.safetensors";
  for (const ShardTensor& t : extra) index["weight_map"][t.name] = "model-extra.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
}

}  // namespace loom::test
