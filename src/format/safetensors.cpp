// Safetensors reader: the JSON header is untrusted; every dtype, shape and offset is checked
// against the bytes present before a view is handed out.
#include "format/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "base/checked.h"

namespace loom {
namespace {

using nlohmann::json;

// The safetensors spec caps the header at 100 MB; a larger claim is a hostile or broken file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

Status with_context(const Status& s, const std::string& ctx) {
  return Status(s.code(), ctx + ": " + s.message());
}

std::string range_string(uint64_t b, uint64_t e) {
  // Built with += : GCC 12 at -O3 misreports a chain of operator+ here (-Wrestrict).
  std::string s = "[";
  s += std::to_string(b);
  s += ", ";
  s += std::to_string(e);
  s += ")";
  return s;
}

// Parses JSON, rejecting duplicate keys at any depth (nlohmann would silently keep the last,
// which lets two readers of the same file disagree about its contents).
Result<json> parse_json_strict(std::string_view text, const std::string& what) {
  std::vector<std::set<std::string>> seen;
  std::string dup;
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        seen.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        break;
      case json::parse_event_t::key:
        if (!seen.empty() && parsed.is_string() &&
            !seen.back().insert(parsed.get<std::string>()).second && dup.empty())
          dup = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_file(what + " is not valid JSON");
  if (!dup.empty()) return invalid_file(what + " has duplicate key '" + dup + "'");
  return j;
}

struct DtypeSpec {
  const char* name;
  Dtype dtype;
  uint64_t size;
};
constexpr DtypeSpec kDtypes[] = {
    {"F32", Dtype::kF32, 4},
    {"F16", Dtype::kF16, 2},
    {"BF16", Dtype::kBF16, 2},
    // Raw bytes (gpt-oss's MXFP4 expert blocks and scales; model/hf_tensors.cpp repacks them).
    {"U8", Dtype::kI8, 1},
    // FP8 checkpoints' weights, also raw bytes here (model/hf_fp8.h dequantizes them).
    {"F8_E4M3", Dtype::kI8, 1},
};

Result<SafetensorsTensor> parse_entry(const std::string& name, const json& e, uint64_t data_size) {
  SafetensorsTensor t;
  t.name = name;
  if (!e.is_object()) return invalid_file("entry is not a JSON object");
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return invalid_file("missing or non-string \"dtype\"");
  const std::string dtype = dt->get<std::string>();
  const DtypeSpec* spec = nullptr;
  for (const DtypeSpec& s : kDtypes)
    if (dtype == s.name) spec = &s;
  if (spec == nullptr)
    return unsupported("dtype '" + dtype +
                       "' is not supported (loom reads F32, F16, BF16, U8 and F8_E4M3)");

  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return invalid_file("missing or non-array \"shape\"");
  if (sh->size() > 4)
    return unsupported("rank " + std::to_string(sh->size()) + " is not supported (at most 4)");
  uint64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned())
      return invalid_file("shape " + sh->dump() +
                          " has an entry that is not a non-negative integer");
    const uint64_t n = d.get<uint64_t>();
    if (n == 0) return unsupported("shape " + sh->dump() + " has a zero dimension");
    std::optional<uint64_t> p = checked_mul(numel, n);
    if (!p || *p > static_cast<uint64_t>(INT64_MAX))
      return invalid_file("shape " + sh->dump() + ": element count overflows");
    numel = *p;
    t.shape.push_back(static_cast<int64_t>(n));
  }
  std::optional<uint64_t> nbytes = checked_mul(numel, spec->size);
  if (!nbytes) return invalid_file("byte size overflows");

  auto offs = e.find("data_offsets");
  if (offs == e.end() || !offs->is_array() || offs->size() != 2 ||
      !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned())
    return invalid_file("\"data_offsets\" must be two non-negative integers");
  const uint64_t begin = (*offs)[0].get<uint64_t>();
  const uint64_t end = (*offs)[1].get<uint64_t>();
  if (end < begin)
    return invalid_file("data_offsets " + range_string(begin, end) + " end before they begin");
  if (end > data_size)
    return invalid_file("data range " + range_string(begin, end) + " exceeds the data region of " +
                        std::to_string(data_size) + " bytes");
  if (end - begin != *nbytes)
    return invalid_file("data range " + range_string(begin, end) + " holds " +
                        std::to_string(end - begin) + " bytes but " + dtype + " " + sh->dump() +
                        " needs " + std::to_string(*nbytes));
  t.data_begin = begin;
  t.file_dtype = spec->name;

  // ggml order: the last (contiguous) HF dimension becomes ne[0].
  TensorView& v = t.view;
  v.dtype = spec->dtype;
  v.n_dims = std::max<int>(1, static_cast<int>(t.shape.size()));
  for (size_t i = 0; i < t.shape.size(); ++i) v.ne[i] = t.shape[t.shape.size() - 1 - i];
  v.nbytes = *nbytes;
  return t;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mf, MappedFile::open(path));
  const uint8_t* data = mf->data();
  const uint64_t size = mf->size();
  Result<SafetensorsFile> r = parse_range(data, size, std::move(mf));
  if (!r) return with_context(r.status(), "'" + path + "'");
  return r;
}

Result<SafetensorsFile> SafetensorsFile::parse_bytes(
    std::shared_ptr<const std::vector<uint8_t>> bytes) {
  if (!bytes) return invalid_argument("SafetensorsFile::parse_bytes: null buffer");
  const uint8_t* data = bytes->data();
  const uint64_t size = bytes->size();
  return parse_range(data, size, std::move(bytes));
}

Result<SafetensorsFile> SafetensorsFile::parse_range(const uint8_t* data, uint64_t size,
                                                     std::shared_ptr<const void> keepalive) {
  SafetensorsFile f;
  f.keepalive_ = std::move(keepalive);
  if (size < 8)
    return invalid_file("not a safetensors file: " + std::to_string(size) +
                        " bytes is too short for the 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);
  if (header_len > size - 8)
    return invalid_file("header length " + std::to_string(header_len) + " exceeds the " +
                        std::to_string(size - 8) + " bytes after the length field");
  if (header_len > kMaxHeaderBytes)
    return invalid_file("header length " + std::to_string(header_len) +
                        " exceeds the 100 MB limit of the format");
  f.data_offset_ = 8 + header_len;
  const uint64_t data_size = size - f.data_offset_;
  const uint8_t* region = data + f.data_offset_;

  std::string_view text(reinterpret_cast<const char*>(data + 8), header_len);
  LOOM_ASSIGN_OR_RETURN(json header, parse_json_strict(text, "header"));
  if (!header.is_object()) return invalid_file("header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;  // free-form strings; loom needs none of it
    Result<SafetensorsTensor> t = parse_entry(it.key(), it.value(), data_size);
    if (!t) return with_context(t.status(), "tensor '" + it.key() + "'");
    f.tensors_.push_back(std::move(t).value());
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.data_begin < b.data_begin;
            });
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    SafetensorsTensor& t = f.tensors_[i];
    if (i > 0) {
      const SafetensorsTensor& p = f.tensors_[i - 1];
      if (t.data_begin < p.data_begin + p.view.nbytes)
        return invalid_file("tensors '" + p.name + "' " +
                            range_string(p.data_begin, p.data_begin + p.view.nbytes) + " and '" +
                            t.name + "' " +
                            range_string(t.data_begin, t.data_begin + t.view.nbytes) + " overlap");
    }
    // Kernels read elements in place; a misaligned element would be undefined behaviour.
    const uint64_t elem = static_cast<uint64_t>(dtype_info(t.view.dtype).block_bytes);
    if ((f.data_offset_ + t.data_begin) % elem != 0)
      return unsupported("tensor '" + t.name + "': data at file offset " +
                         std::to_string(f.data_offset_ + t.data_begin) + " is not aligned to its " +
                         std::to_string(elem) + "-byte elements");
    t.view.data = region + t.data_begin;
    f.index_.emplace(t.name, i);
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsModel::add_shard(SafetensorsFile shard, const std::string& shard_name) {
  auto owned = std::make_shared<SafetensorsFile>(std::move(shard));
  for (const SafetensorsTensor& t : owned->tensors()) {
    if (!tensors_.emplace(t.name, t.view).second)
      return invalid_file("tensor '" + t.name + "' appears in more than one shard (again in '" +
                          shard_name + "')");
    if (t.file_dtype == std::string_view("F8_E4M3")) f8_e4m3_.insert(t.name);
  }
  shards_.push_back(std::move(owned));
  return Status::ok();
}

Result<SafetensorsModel> SafetensorsModel::open(const std::string& path) {
  SafetensorsModel m;
  if (!is_directory(path)) {
    LOOM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
    LOOM_RETURN_IF_ERROR(m.add_shard(std::move(f), path));
    return m;
  }
  const std::string single = path + "/" + kSingleFile;
  if (is_file(single)) {
    LOOM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(single));
    LOOM_RETURN_IF_ERROR(m.add_shard(std::move(f), single));
    return m;
  }
  const std::string index_path = path + "/" + kIndexFile;
  if (!is_file(index_path))
    return not_found("'" + path + "' has neither " + kSingleFile + " nor " + kIndexFile);

  struct stat st {};
  if (::stat(index_path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) > kMaxHeaderBytes)
    return invalid_file("'" + index_path + "' is larger than 100 MB; not a safetensors index");
  std::ifstream in(index_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return io_error("cannot read '" + index_path + "'");
  const std::string text = ss.str();
  Result<json> index = parse_json_strict(text, "'" + index_path + "'");
  if (!index) return index.status();
  auto wm = index->find("weight_map");
  if (!index->is_object() || wm == index->end() || !wm->is_object())
    return invalid_file("'" + index_path + "' has no \"weight_map\" object");

  // Shard file -> tensor names the index places there.
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      return invalid_file("'" + index_path + "': weight_map entry '" + it.key() +
                          "' is not a string");
    const std::string shard = it.value().get<std::string>();
    // Shards must sit in the model directory: a hostile index must not read other files.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      return invalid_file("'" + index_path + "': shard name '" + shard + "' for tensor '" +
                          it.key() + "' is not a plain file name");
    by_shard[shard].push_back(it.key());
  }
  if (by_shard.empty()) return invalid_file("'" + index_path + "': weight_map is empty");
  for (const auto& [shard, names] : by_shard) {
    LOOM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path + "/" + shard));
    for (const std::string& n : names)
      if (f.find(n) == nullptr)
        return invalid_file("'" + index_path + "' places tensor '" + n + "' in '" + shard +
                            "', which does not contain it");
    LOOM_RETURN_IF_ERROR(m.add_shard(std::move(f), shard));
  }
  return m;
}

const TensorView* SafetensorsModel::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

bool SafetensorsModel::is_f8_e4m3(std::string_view name) const {
  return f8_e4m3_.find(name) != f8_e4m3_.end();
}

}  // namespace loom
