#include "hub/hub_settings.h"

#include <cctype>
#include <cstdlib>

namespace loom::hub {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

// huggingface_hub's boolean environment values.
bool env_true(const char* name) {
  std::string v = env_or(name, "");
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

bool valid_name_part(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<HubSettings> HubSettings::from_env() {
  HubSettings s;
  s.endpoint = env_or("HF_ENDPOINT", "https://huggingface.co");
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  s.token = env_or("HF_TOKEN", "");
  s.offline = env_true("HF_HUB_OFFLINE");
  std::string hf_home = env_or("HF_HOME", "");
  if (hf_home.empty()) {
    const std::string xdg = env_or("XDG_CACHE_HOME", "");
    const std::string home = env_or("HOME", "");
    if (!xdg.empty())
      hf_home = xdg + "/huggingface";
    else if (!home.empty())
      hf_home = home + "/.cache/huggingface";
  }
  s.cache_dir = env_or("HF_HUB_CACHE", hf_home.empty() ? "" : hf_home + "/hub");
  if (s.cache_dir.empty())
    return invalid_argument("no Hugging Face cache folder: set HF_HOME, HF_HUB_CACHE or HOME");
  return s;
}

Result<RepoSpec> parse_repo_spec(const std::string& text) {
  RepoSpec spec;
  const size_t colon = text.find(':');
  spec.repo = text.substr(0, colon);
  if (colon != std::string::npos) {
    spec.tag = text.substr(colon + 1);
    if (spec.tag.empty() || spec.tag.find(':') != std::string::npos)
      return invalid_argument("'" + text +
                              "': expected ORG/NAME[:QUANT] (one quant tag after ':')");
    for (char c : spec.tag)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
        return invalid_argument("'" + text + "': a quant tag holds letters, digits, '_', '-', '.'");
  }
  const size_t slash = spec.repo.find('/');
  if (slash == std::string::npos || !valid_name_part(spec.repo.substr(0, slash)) ||
      !valid_name_part(spec.repo.substr(slash + 1)))
    return invalid_argument("'" + text +
                            "' is not a Hugging Face repository: expected ORG/NAME[:QUANT], e.g. "
                            "Qwen/Qwen3-0.6B-GGUF:Q8_0");
  return spec;
}

}  // namespace loom::hub
