// GGUF reader: validates the whole header against the bytes actually present before trusting
// any count, size or offset, then hands out zero-copy views into the mapping.
// Layout (ggml docs/gguf.md): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv x
// (string key, u32 type, value), n_tensors x (string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset), padding to `general.alignment`, tensor data.
#include <sys/mman.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "base/checked.h"
#include "format/byte_cursor.h"
#include "format/gguf.h"

namespace loom {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
// Smallest possible encodings, used to reject counts the remaining bytes cannot hold before
// anything is allocated: a kv is key length (8) + type (4) + a 1-byte value; a tensor info is
// name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 13;
constexpr uint64_t kMinTensorInfoBytes = 32;

Status with_context(const Status& s, const std::string& ctx) {
  return Status(s.code(), ctx + ": " + s.message());
}

Status read_string(ByteCursor& c, std::string* out, std::string_view what) {
  uint64_t len = 0;
  LOOM_RETURN_IF_ERROR(c.read(&len, std::string(what) + " length"));
  if (len > c.remaining())
    return invalid_file(std::string(what) + " length " + std::to_string(len) + " at offset " +
                        std::to_string(c.pos() - 8) + " exceeds the " +
                        std::to_string(c.remaining()) + " bytes remaining in the file");
  std::string_view sv;
  LOOM_RETURN_IF_ERROR(c.read_bytes(len, &sv, what));
  out->assign(sv);
  return Status::ok();
}

// The GGUF specification's rules for a metadata key: an ASCII string of at most 65,535 bytes,
// hierarchical (segments separated by '.'). Keys are compared byte for byte, so a control byte,
// a non-ASCII byte or an empty segment would make a key that only looks like another one.
// (lower_snake_case is what converters write; upper case is read as is.) "" when fine.
std::string key_error(const std::string& key) {
  if (key.empty()) return "is empty";
  if (key.size() > 65535)
    return "is " + std::to_string(key.size()) + " bytes long; the limit is 65535";
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(key[i]);
    if (ch < 0x20 || ch > 0x7E) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", ch);
      return std::string("has byte ") + hex + " at " + std::to_string(i) + ", not printable ASCII";
    }
  }
  if (key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    return "has an empty segment";
  return "";
}

// A key as error messages show it: control and non-ASCII bytes escaped, at most 80 bytes.
std::string printable_key(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size() && out.size() < 80; ++i) {
    const unsigned char ch = static_cast<unsigned char>(key[i]);
    if (ch >= 0x20 && ch <= 0x7E) {
      out += static_cast<char>(ch);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", ch);
      out += hex;
    }
  }
  return key.size() > 80 ? out + "..." : out;
}

bool valid_type_id(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::kF64);
}

uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
      return 8;  // at least the length field
    case GgufType::kArray:
      return 12;  // at least element type + count
  }
  return 1;
}

// Integer-like element (signed, unsigned or bool) widened to int64 bits.
Status read_int_elem(ByteCursor& c, GgufType t, int64_t* out) {
  switch (t) {
    case GgufType::kU8: {
      uint8_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "u8 value"));
      *out = v;
      break;
    }
    case GgufType::kI8: {
      int8_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "i8 value"));
      *out = v;
      break;
    }
    case GgufType::kU16: {
      uint16_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "u16 value"));
      *out = v;
      break;
    }
    case GgufType::kI16: {
      int16_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "i16 value"));
      *out = v;
      break;
    }
    case GgufType::kU32: {
      uint32_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "u32 value"));
      *out = v;
      break;
    }
    case GgufType::kI32: {
      int32_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "i32 value"));
      *out = v;
      break;
    }
    case GgufType::kU64: {
      uint64_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "u64 value"));
      *out = static_cast<int64_t>(v);  // bits preserved; as_uint()/the writer read them back
      break;
    }
    case GgufType::kI64: {
      int64_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "i64 value"));
      *out = v;
      break;
    }
    case GgufType::kBool: {
      uint8_t v = 0;
      LOOM_RETURN_IF_ERROR(c.read(&v, "bool value"));
      if (v > 1)
        return invalid_file("bool value at offset " + std::to_string(c.pos() - 1) + " is " +
                            std::to_string(v) + " (must be 0 or 1)");
      *out = v;
      break;
    }
    default:
      return internal_error("read_int_elem on non-integer type");
  }
  return Status::ok();
}

Status read_float_elem(ByteCursor& c, GgufType t, double* out) {
  if (t == GgufType::kF32) {
    float v = 0;
    LOOM_RETURN_IF_ERROR(c.read(&v, "f32 value"));
    *out = v;
  } else {
    LOOM_RETURN_IF_ERROR(c.read(out, "f64 value"));
  }
  return Status::ok();
}

Result<GgufValue> read_array(ByteCursor& c) {
  uint32_t elem_id = 0;
  uint64_t n = 0;
  LOOM_RETURN_IF_ERROR(c.read(&elem_id, "array element type"));
  LOOM_RETURN_IF_ERROR(c.read(&n, "array length"));
  if (!valid_type_id(elem_id))
    return invalid_file("array has unknown element type id " + std::to_string(elem_id));
  const auto elem = static_cast<GgufType>(elem_id);
  if (elem == GgufType::kArray) return unsupported("arrays of arrays are not supported");
  // Validate the count against the bytes left before reserving anything.
  if (n > c.remaining() / scalar_size(elem))
    return invalid_file("array of " + std::to_string(n) + " " + std::string(gguf_type_name(elem)) +
                        " elements cannot fit in the " + std::to_string(c.remaining()) +
                        " bytes remaining in the file");
  if (elem == GgufType::kString) {
    std::vector<std::string> v(n);
    for (uint64_t i = 0; i < n; ++i) {
      Status s = read_string(c, &v[i], "string");
      if (!s) return with_context(s, "array element " + std::to_string(i));
    }
    return GgufValue::of_string_array(std::move(v));
  }
  if (elem == GgufType::kF32 || elem == GgufType::kF64) {
    std::vector<double> v(n);
    for (uint64_t i = 0; i < n; ++i) LOOM_RETURN_IF_ERROR(read_float_elem(c, elem, &v[i]));
    return GgufValue::of_float_array(elem, std::move(v));
  }
  std::vector<int64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    Status s = read_int_elem(c, elem, &v[i]);
    if (!s) return with_context(s, "array element " + std::to_string(i));
  }
  return GgufValue::of_int_array(elem, std::move(v));
}

Result<GgufValue> read_value(ByteCursor& c, GgufType t) {
  switch (t) {
    case GgufType::kString: {
      std::string s;
      LOOM_RETURN_IF_ERROR(read_string(c, &s, "string"));
      return GgufValue::of_string(std::move(s));
    }
    case GgufType::kArray:
      return read_array(c);
    case GgufType::kF32:
    case GgufType::kF64: {
      double d = 0;
      LOOM_RETURN_IF_ERROR(read_float_elem(c, t, &d));
      return GgufValue::of_float(t, d);
    }
    case GgufType::kBool: {
      int64_t b = 0;
      LOOM_RETURN_IF_ERROR(read_int_elem(c, t, &b));
      return GgufValue::of_bool(b != 0);
    }
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64: {
      int64_t v = 0;
      LOOM_RETURN_IF_ERROR(read_int_elem(c, t, &v));
      return GgufValue::of_uint(t, static_cast<uint64_t>(v));
    }
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64: {
      int64_t v = 0;
      LOOM_RETURN_IF_ERROR(read_int_elem(c, t, &v));
      return GgufValue::of_int(t, v);
    }
  }
  return internal_error("read_value: unhandled type");
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

}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mf, MappedFile::open(path));
  Result<GgufFile> r = parse(std::move(mf));
  if (!r) return with_context(r.status(), "'" + path + "'");
  if (r->find(kSplitCount) != nullptr) return open_split(path, std::move(r).value());
  return r;
}

// A model split by llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf holds the metadata and
// the first tensors, the other parts (same folder) more tensors; all carry split.no (0-based),
// split.count and split.tensors.count. They load as one file.
Result<GgufFile> GgufFile::open_split(const std::string& path, GgufFile first) {
  const auto count = first.get_int(kSplitCount);
  const auto no = first.get_int(kSplitNo);
  if (!count || *count < 1 || *count > 99999)
    return invalid_file("'" + path + "': split.count must be an integer in 1..99999");
  if (*count == 1) return first;
  if (!no || *no != 0)
    return invalid_argument("'" + path + "' is part " + std::to_string(no.value_or(-1) + 1) +
                            " of a split model: open its first part (-00001-of-...)");
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-00001-of-%05d.gguf", static_cast<int>(*count));
  if (path.size() <= std::strlen(suffix) ||
      path.compare(path.size() - std::strlen(suffix), std::string::npos, suffix) != 0)
    return invalid_file("'" + path + "' is the first of " + std::to_string(*count) +
                        " parts but is not named PREFIX" + suffix +
                        " (how the other parts are found)");
  const std::string prefix = path.substr(0, path.size() - std::strlen(suffix));
  auto owners = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  owners->push_back(first.keepalive_);
  std::unordered_set<std::string> names;
  for (const GgufTensorInfo& t : first.tensors_) names.insert(t.name);
  for (int64_t i = 1; i < *count; ++i) {
    std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", static_cast<int>(i + 1),
                  static_cast<int>(*count));
    const std::string part_path = prefix + suffix;
    auto mf = MappedFile::open(part_path);
    if (!mf.is_ok())
      return with_context(mf.status(),
                          "part " + std::to_string(i + 1) + " of split model '" + path + "'");
    Result<GgufFile> part = parse(std::move(mf).value());
    if (!part) return with_context(part.status(), "'" + part_path + "'");
    if (part->get_int(kSplitNo) != i || part->get_int(kSplitCount) != *count)
      return invalid_file("'" + part_path + "' does not say it is part " + std::to_string(i + 1) +
                          " of " + std::to_string(*count) + " (split.no, split.count)");
    for (GgufTensorInfo& t : part->tensors_) {
      if (!names.insert(t.name).second)
        return invalid_file("tensor '" + t.name + "' appears in two parts of split model '" + path +
                            "' (again in '" + part_path + "')");
      first.tensors_.push_back(std::move(t));
    }
    first.size_ += part->size_;
    owners->push_back(part->keepalive_);
  }
  if (auto n = first.get_int(kSplitTensorsCount);
      n && *n != static_cast<int64_t>(first.tensors_.size()))
    return invalid_file("split model '" + path + "' declares " + std::to_string(*n) +
                        " tensors (split.tensors.count) but its parts hold " +
                        std::to_string(first.tensors_.size()));
  first.keepalive_ = std::move(owners);
  return first;
}

Result<GgufFile> GgufFile::parse(std::shared_ptr<const MappedFile> owner) {
  if (!owner) return invalid_argument("GgufFile::parse: null file");
  const uint8_t* data = owner->data();
  const uint64_t size = owner->size();
  return parse_range(data, size, std::move(owner));
}

Result<GgufFile> GgufFile::with_zero_data(const std::vector<uint8_t>& header, uint64_t data_bytes) {
  const uint64_t size = header.size() + data_bytes;
  void* p = size ? mmap(nullptr, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                 : nullptr;
  if (p == MAP_FAILED)
    return io_error("cannot reserve " + std::to_string(size) + " bytes of address space");
  std::memcpy(p, header.data(), header.size());
  // The mapping lives as long as the file (and every view of it).
  std::shared_ptr<const void> owner(p, [size](const void* q) {
    if (q) munmap(const_cast<void*>(q), size);
  });
  return parse_range(static_cast<const uint8_t*>(p), size, std::move(owner));
}

Result<GgufFile> GgufFile::parse_bytes(std::shared_ptr<const std::vector<uint8_t>> bytes) {
  if (!bytes) return invalid_argument("GgufFile::parse_bytes: null buffer");
  const uint8_t* data = bytes->data();
  const uint64_t size = bytes->size();
  return parse_range(data, size, std::move(bytes));
}

Result<GgufFile> GgufFile::parse_range(const uint8_t* data, uint64_t size,
                                       std::shared_ptr<const void> keepalive) {
  ByteCursor c(data, size);
  GgufFile f;
  f.size_ = size;
  f.keepalive_ = std::move(keepalive);

  // --- fixed header ---
  uint32_t magic = 0;
  if (size < 4) return invalid_file("not a GGUF file: only " + std::to_string(size) + " bytes");
  LOOM_RETURN_IF_ERROR(c.read(&magic, "magic"));
  if (magic != kGgufMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "not a GGUF file: bad magic 0x%08x (expected \"GGUF\")", magic);
    return invalid_file(buf);
  }
  LOOM_RETURN_IF_ERROR(c.read(&f.version_, "version"));
  if (f.version_ == 1)
    return unsupported(
        "GGUF version 1 is not supported (only v2 and v3); re-convert the model "
        "with a current llama.cpp");
  if (f.version_ != 2 && f.version_ != 3) {
    std::string hint = (__builtin_bswap32(f.version_) <= 3) ? " (a big-endian file?)" : "";
    return unsupported("GGUF version " + std::to_string(f.version_) +
                       " is not supported (only v2 and v3)" + hint);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  LOOM_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  LOOM_RETURN_IF_ERROR(c.read(&n_kv, "metadata count"));
  if (n_kv > c.remaining() / kMinKvBytes)
    return invalid_file("header claims " + std::to_string(n_kv) + " metadata entries but only " +
                        std::to_string(c.remaining()) + " bytes remain");
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    return invalid_file("header claims " + std::to_string(n_tensors) + " tensors but only " +
                        std::to_string(c.remaining()) + " bytes remain");

  // --- metadata ---
  f.kv_.reserve(n_kv);
  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    Status s = read_string(c, &key, "metadata key");
    if (!s) return with_context(s, "metadata entry " + std::to_string(i));
    if (const std::string e = key_error(key); !e.empty())
      return invalid_file("metadata entry " + std::to_string(i) + ": the key '" +
                          printable_key(key) + "' " + e +
                          " (GGUF keys are dot-separated ASCII, at most 65535 bytes)");
    const std::string ctx = "metadata key '" + key + "'";
    uint32_t type_id = 0;
    s = c.read(&type_id, "value type");
    if (!s) return with_context(s, ctx);
    if (!valid_type_id(type_id))
      return invalid_file(ctx + ": unknown value type id " + std::to_string(type_id));
    Result<GgufValue> v = read_value(c, static_cast<GgufType>(type_id));
    if (!v) return with_context(v.status(), ctx);
    if (!keys.insert(key).second) return invalid_file("duplicate " + ctx);
    f.kv_.emplace_back(std::move(key), std::move(v).value());
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    std::optional<uint64_t> al = a->type() == GgufType::kArray ? std::nullopt : a->as_uint();
    if (!al || a->type() == GgufType::kBool)
      return invalid_file("general.alignment must be an unsigned integer, got " +
                          std::string(gguf_type_name(a->type())));
    if (*al == 0 || (*al & (*al - 1)) != 0)
      return invalid_file("general.alignment " + std::to_string(*al) +
                          " is not a power of two greater than 0");
    f.alignment_ = *al;
  } else {
    f.alignment_ = kDefaultAlignment;
  }

  // --- tensor infos ---
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    return invalid_file("header claims " + std::to_string(n_tensors) + " tensors but only " +
                        std::to_string(c.remaining()) + " bytes remain after the metadata");
  f.tensors_.reserve(n_tensors);
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    Status s = read_string(c, &t.name, "tensor name");
    if (!s) return with_context(s, "tensor info " + std::to_string(i));
    const std::string ctx = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    s = c.read(&n_dims, "n_dims");
    if (!s) return with_context(s, ctx);
    if (n_dims < 1 || n_dims > kMaxDims)
      return invalid_file(ctx + ": n_dims " + std::to_string(n_dims) + " is out of range (1.." +
                          std::to_string(kMaxDims) + ")");
    t.view.n_dims = static_cast<int>(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      s = c.read(&ne, "ne");
      if (!s) return with_context(s, ctx);
      if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX))
        return invalid_file(ctx + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne) +
                            " is out of range");
      std::optional<uint64_t> p = checked_mul(numel, ne);
      if (!p || *p > static_cast<uint64_t>(INT64_MAX))
        return invalid_file(ctx + ": element count overflows");
      numel = *p;
      t.view.ne[d] = static_cast<int64_t>(ne);
    }
    uint32_t type_id = 0;
    s = c.read(&type_id, "type");
    if (!s) return with_context(s, ctx);
    std::optional<DtypeInfo> info = dtype_info(type_id);
    if (!info) return unsupported(ctx + ": unknown ggml type id " + std::to_string(type_id));
    t.view.dtype = info->dtype;
    s = c.read(&t.offset, "offset");
    if (!s) return with_context(s, ctx);

    if (t.view.ne[0] % info->block_size != 0)
      return invalid_file(ctx + ": ne[0] = " + std::to_string(t.view.ne[0]) +
                          " is not a multiple of the " + std::string(info->name) + " block size " +
                          std::to_string(info->block_size));
    std::optional<uint64_t> nb = checked_product(
        static_cast<uint64_t>(t.view.ne[0] / info->block_size),
        static_cast<uint64_t>(info->block_bytes), t.view.ne[1], t.view.ne[2], t.view.ne[3]);
    if (!nb) return invalid_file(ctx + ": byte size overflows");
    t.view.nbytes = *nb;
    if (!names.insert(t.name).second) return invalid_file("duplicate " + ctx);
    f.tensors_.push_back(std::move(t));
  }

  // --- data section ---
  std::optional<uint64_t> data_off = checked_align_up(c.pos(), f.alignment_);
  if (!data_off) return invalid_file("data section offset overflows");
  f.data_offset_ = *data_off;
  for (GgufTensorInfo& t : f.tensors_) {
    const std::string ctx = "tensor '" + t.name + "'";
    if (t.offset % f.alignment_ != 0)
      return invalid_file(ctx + ": offset " + std::to_string(t.offset) +
                          " is not a multiple of the alignment " + std::to_string(f.alignment_));
    std::optional<uint64_t> begin = checked_add(f.data_offset_, t.offset);
    std::optional<uint64_t> end = begin ? checked_add(*begin, t.view.nbytes) : std::nullopt;
    if (!end)
      return invalid_file(ctx + ": data range overflows (offset " + std::to_string(t.offset) + ")");
    if (*end > size)
      return invalid_file(ctx + ": data range " + range_string(*begin, *end) +
                          " exceeds file size " + std::to_string(size));
    t.view.data = data + *begin;
  }
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(f.tensors_.size());
  for (const GgufTensorInfo& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* p = by_offset[i - 1];
    const GgufTensorInfo* q = by_offset[i];
    if (q->offset < p->offset + p->view.nbytes)  // no overflow: both ranges checked above
      return invalid_file("tensors '" + p->name + "' " +
                          range_string(p->offset, p->offset + p->view.nbytes) + " and '" + q->name +
                          "' " + range_string(q->offset, q->offset + q->view.nbytes) +
                          " overlap (offsets relative to the data section)");
  }
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->as_string() == nullptr) return std::nullopt;
  return *v->as_string();
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_bool() : std::nullopt;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace loom
