// Writing a model as several GGUF parts (the layout of llama.cpp's gguf-split), so that split
// loading (GgufFile::open) and `loom pull` of split repositories can be tested end to end.
#include <cstdio>

#include "format/gguf.h"

namespace loom {

Result<std::vector<std::string>> write_gguf_split(const GgufFile& in, int n_parts,
                                                  const std::string& prefix) {
  const auto& tensors = in.tensors();
  if (n_parts < 1 || n_parts > 99999 || static_cast<size_t>(n_parts) > tensors.size())
    return invalid_argument("write_gguf_split: " + std::to_string(n_parts) + " parts for " +
                            std::to_string(tensors.size()) + " tensors");
  std::vector<std::string> paths;
  size_t next = 0;
  for (int i = 0; i < n_parts; ++i) {
    GgufWriter w;
    w.set_alignment(in.alignment());
    if (i == 0)
      for (const auto& [key, value] : in.metadata())
        if (key != kSplitNo && key != kSplitCount && key != kSplitTensorsCount) w.set(key, value);
    w.set(std::string(kSplitNo), GgufValue::of_uint(GgufType::kU16, static_cast<uint64_t>(i)));
    w.set(std::string(kSplitCount),
          GgufValue::of_uint(GgufType::kU16, static_cast<uint64_t>(n_parts)));
    w.set(std::string(kSplitTensorsCount),
          GgufValue::of_int(GgufType::kI32, static_cast<int64_t>(tensors.size())));
    const size_t end = tensors.size() * static_cast<size_t>(i + 1) / static_cast<size_t>(n_parts);
    for (; next < end; ++next) {
      const GgufTensorInfo& t = tensors[next];
      std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
      LOOM_RETURN_IF_ERROR(w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes));
    }
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", i + 1, n_parts);
    paths.push_back(prefix + suffix);
    LOOM_RETURN_IF_ERROR(w.write(paths.back()));
  }
  return paths;
}

}  // namespace loom
