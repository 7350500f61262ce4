// Fuzz target: a GGUF file from untrusted bytes. Parsing, then everything loading does with a
// parsed file: hyperparameters (config_from_gguf), binding the architecture's tensor plan
// (bind_gguf) and building the tokenizer from the tokenizer.ggml.* keys.
#include <memory>
#include <vector>

#include "format/gguf.h"
#include "fuzz_target.h"
#include "loom/tokenizer.h"
#include "model/bind.h"

LOOM_FUZZ_TARGET(gguf) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  auto file = loom::GgufFile::parse_bytes(bytes);
  if (!file.is_ok()) {
    LOOM_FUZZ_CHECK(!file.status().message().empty(), "an error names its problem");
    return;
  }
  for (const auto& [key, value] : file->metadata()) {
    LOOM_FUZZ_CHECK(!key.empty(), "metadata keys are non-empty");
    (void)value.to_display_string();
  }
  for (const auto& t : file->tensors()) {
    LOOM_FUZZ_CHECK(t.offset <= file->file_size(), "tensor offsets lie inside the file");
    (void)file->find_tensor(t.name);
  }
  if (auto tok = loom::Tokenizer::from_gguf(*file); tok.is_ok()) {
    const std::string text = "Hello, wörld! 123 <s>\n\t  ";
    auto ids = (*tok)->encode(text, true, true);
    (void)(*tok)->decode(ids);
  }
  (void)loom::bind_gguf(std::move(file).value());
}
