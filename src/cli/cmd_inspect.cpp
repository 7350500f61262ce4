// `loom inspect FILE`: everything a GGUF file declares: header, metadata (arrays abbreviated)
// and the tensor table, with totals. Works on vocabulary-only files.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>

#include "base/checked.h"
#include "base/format_bytes.h"
#include "cli/commands.h"
#include "format/gguf.h"
#include "hub/hf_option.h"
#include "model/tensor_names.h"
#include "model/weight_footprint.h"

namespace loom::cli {
namespace {

std::string type_string(const GgufValue& v) {
  if (v.type() != GgufType::kArray) return std::string(gguf_type_name(v.type()));
  return "array[" + std::string(gguf_type_name(v.array_type())) + "," +
         std::to_string(v.array_size()) + "]";
}

int cmd_inspect(int argc, char** argv) {
  CLI::App app{"Print a GGUF file's header, metadata and tensor table.", "loom inspect"};
  std::string path;
  int max_items = 5;
  std::string hf_repo;
  app.add_option("file", path, "GGUF file");
  hub::add_hf_option(app, &hf_repo);
  app.add_option("--items", max_items, "array items to show per key")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status st = hub::resolve_hf_option(hf_repo, &path, true); !st.is_ok()) {
    std::fprintf(stderr, "loom inspect: %s\n", st.message().c_str());
    return 1;
  }
  auto f = GgufFile::open(path);
  if (!f.is_ok()) {
    std::fprintf(stderr, "loom inspect: %s\n", f.status().message().c_str());
    return 1;
  }
  std::printf("file: %s\n", path.c_str());
  std::printf("GGUF version: %u\n", f->version());
  std::printf("alignment: %llu\n", static_cast<unsigned long long>(f->alignment()));
  std::printf("data offset: %llu\n", static_cast<unsigned long long>(f->data_offset()));
  std::printf("file size: %llu (%s)\n", static_cast<unsigned long long>(f->file_size()),
              format_bytes(f->file_size(), 2).c_str());
  std::printf("tensor count: %zu\n", f->tensors().size());
  std::printf("metadata: %zu keys\n", f->metadata().size());

  size_t key_w = 3;
  for (const auto& [k, v] : f->metadata()) key_w = std::max(key_w, k.size());
  for (const auto& [k, v] : f->metadata())
    std::printf("  %-*s  %-20s  %s\n", static_cast<int>(key_w), k.c_str(), type_string(v).c_str(),
                v.to_display_string(static_cast<size_t>(std::max(max_items, 0))).c_str());

  if (!f->tensors().empty()) {
    size_t name_w = 4;
    for (const auto& t : f->tensors()) name_w = std::max(name_w, t.name.size());
    std::printf("tensors:\n  %-*s  %-6s  %-22s  %14s  %14s\n", static_cast<int>(name_w), "name",
                "dtype", "shape", "offset", "bytes");
    for (const auto& t : f->tensors())
      std::printf("  %-*s  %-6s  %-22s  %14llu  %14llu\n", static_cast<int>(name_w), t.name.c_str(),
                  std::string(dtype_name(t.view.dtype)).c_str(), shape_string(t.view).c_str(),
                  static_cast<unsigned long long>(t.offset),
                  static_cast<unsigned long long>(t.view.nbytes));
  }
  // What one token reads (model/weight_footprint.h, the loaded model's own count): one row of
  // the embedding (all of it when it is the LM head too), expert_used_count of each routed
  // expert tensor's experts, all the rest.
  // Multi-token prediction layers (llama.cpp's nextn) are the last nextn_predict_layers of
  // block_count: a speculative proposer's, never read by a token of the main pass.
  const std::string arch = f->get_string("general.architecture").value_or("");
  const int64_t used = f->get_int(arch + ".expert_used_count").value_or(0);
  const int64_t n_mtp = f->get_int(arch + ".nextn_predict_layers").value_or(0);
  const int64_t first_mtp = f->get_int(arch + ".block_count").value_or(0) - n_mtp;
  // Without output.weight the LM head is the embedding: read whole, counted once.
  const bool tied = f->find_tensor(names::kTokenEmbd) && !f->find_tensor(names::kOutput);
  WeightFootprint fp;
  uint64_t mtp_params = 0;
  for (const auto& t : f->tensors()) {
    const uint64_t n = static_cast<uint64_t>(t.view.numel());
    TokenShare share = token_share(t.name, tied);
    if (auto l = names::parse_layer_tensor(t.name); n_mtp > 0 && l && l->layer >= first_mtp) {
      mtp_params += n;
      share = TokenShare::kNone;
    }
    fp.add(share, n, t.view.nbytes, t.view.ne[std::max(t.view.n_dims, 1) - 1], used);
  }
  const uint64_t params = fp.params, bytes = fp.bytes;
  const uint64_t active_params = fp.active_params, active_bytes = fp.active_bytes;
  std::printf("total: %llu params (%.3f B), %llu bytes of tensor data (%s)\n",
              static_cast<unsigned long long>(params), params / 1e9,
              static_cast<unsigned long long>(bytes), format_bytes(bytes, 2).c_str());
  if (used > 0)
    std::printf(
        "active per token (%lld experts of each MoE layer): %llu params (%.3f B), %llu bytes "
        "(%s) read\n",
        static_cast<long long>(used), static_cast<unsigned long long>(active_params),
        active_params / 1e9, static_cast<unsigned long long>(active_bytes),
        format_bytes(active_bytes, 2).c_str());
  if (n_mtp > 0)
    std::printf(
        "multi-token prediction: %lld layer(s), blocks %lld..%lld, %llu params (%.3f B), outside "
        "the main forward pass (--speculative-config '{\"method\": \"mtp\"}' proposes with "
        "them)\n",
        static_cast<long long>(n_mtp), static_cast<long long>(first_mtp),
        static_cast<long long>(first_mtp + n_mtp - 1), static_cast<unsigned long long>(mtp_params),
        mtp_params / 1e9);
  return 0;
}

LOOM_REGISTER_COMMAND("inspect", "print a GGUF file's metadata and tensors", cmd_inspect);

}  // namespace
}  // namespace loom::cli
