#include "tools/model_spec.h"

#include <filesystem>

#include "format/gguf.h"
#include "tools/synth.h"

namespace loom::tools {

bool is_synth_spec(const std::string& spec) {
  return spec.rfind("synth:", 0) == 0;
}

bool same_model_spec(const std::string& a, const std::string& b) {
  if (is_synth_spec(a) || is_synth_spec(b)) return a == b;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

Result<std::unique_ptr<Model>> load_model(const std::string& spec,
                                          const ModelLoadOptions& options) {
  if (!is_synth_spec(spec)) return Model::load(spec, options);
  LOOM_ASSIGN_OR_RETURN(SynthOptions so, parse_synth_spec(spec));
  LOOM_ASSIGN_OR_RETURN(auto bytes, synth_model_bytes(so));
  LOOM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::parse_bytes(bytes));
  return Model::from_gguf(std::move(file), options);
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& spec) {
  if (!is_synth_spec(spec)) return Tokenizer::load(spec);
  LOOM_ASSIGN_OR_RETURN(SynthOptions so, parse_synth_spec(spec));
  LOOM_ASSIGN_OR_RETURN(SynthLayout layout, synth_layout(so));
  GgufWriter w;
  for (auto& [key, value] : layout.metadata) w.set(key, std::move(value));
  LOOM_ASSIGN_OR_RETURN(
      GgufFile file, GgufFile::parse_bytes(std::make_shared<std::vector<uint8_t>>(w.to_bytes())));
  return Tokenizer::from_gguf(file);
}

}  // namespace loom::tools
