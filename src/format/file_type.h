// GGUF general.file_type (llama.cpp's llama_ftype): what most of a file's matrices are, by the
// names llama.cpp's enum gives them without LLAMA_FTYPE_MOSTLY_ ("Q4_K_M", "IQ4_XS", "F16"),
// which is how Ollama reports a model's quantization_level.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace loom {

// nullopt for a value llama.cpp does not define (or no longer uses: 4-6, 33-35).
std::optional<std::string_view> file_type_name(int64_t file_type);
// The value of a name file_type_name gives ("Q4_K_M" -> 15); nullopt for any other string.
std::optional<int64_t> file_type_value(std::string_view name);

}  // namespace loom
