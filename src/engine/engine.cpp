// Engine: the public synchronous front of EngineCore, plus model + tokenizer loading.
#include <filesystem>
#include <sstream>

#include "base/log.h"
#include "engine/engine_core.h"
#include "engine/memory_plan.h"
#include "format/gguf.h"
#include "tools/synth.h"

namespace loom {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "";
}

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<Model> model,
                                               std::unique_ptr<Tokenizer> tokenizer,
                                               const EngineConfig& config,
                                               const std::string& model_spec) {
  LOOM_ASSIGN_OR_RETURN(
      auto core, EngineCore::create(std::move(model), std::move(tokenizer), config, model_spec));
  return std::unique_ptr<Engine>(new Engine(std::move(core)));
}

Result<std::unique_ptr<Engine>> Engine::load(const std::string& spec, const EngineConfig& config) {
  return load_engine(spec, config, LogLevel::kDebug);
}

Result<std::unique_ptr<Engine>> load_engine(const std::string& spec, const EngineConfig& config,
                                            LogLevel plan_log_level) {
  ModelLoadOptions mo;
  mo.n_threads = config.n_threads;
  mo.max_context = config.max_model_len;
  mo.disable_sliding_window = config.disable_sliding_window;
  BoundModel bound;
  std::unique_ptr<Tokenizer> tokenizer;
  std::error_code ec;
  if (spec.rfind("synth:", 0) != 0 && std::filesystem::is_directory(spec, ec)) {
    LOOM_ASSIGN_OR_RETURN(bound, bind_hf_dir(spec));
    if (auto t = Tokenizer::from_hf_dir(spec); t.is_ok()) tokenizer = std::move(t).value();
  } else {
    GgufFile file;
    if (spec.rfind("synth:", 0) == 0) {
      LOOM_ASSIGN_OR_RETURN(SynthOptions so, parse_synth_spec(spec));
      LOOM_ASSIGN_OR_RETURN(auto bytes, synth_model_bytes(so));
      LOOM_ASSIGN_OR_RETURN(file, GgufFile::parse_bytes(bytes));
    } else {
      if (!std::filesystem::exists(spec, ec)) return not_found("model not found: " + spec);
      LOOM_ASSIGN_OR_RETURN(file, GgufFile::open(spec));
    }
    // A model without a usable vocabulary still runs on token ids.
    if (auto t = Tokenizer::from_gguf(file); t.is_ok()) tokenizer = std::move(t).value();
    LOOM_ASSIGN_OR_RETURN(bound, bind_gguf(std::move(file)));
  }
  // The memory plan, before anything large is allocated: what cannot fit, and what the
  // speculative method needs that the models lack, is refused here.
  LOOM_ASSIGN_OR_RETURN(const MemoryPlan plan, plan_memory(spec, bound, config));
  std::istringstream lines(plan.table());
  for (std::string line; std::getline(lines, line);)
    log_message(plan_log_level, "%s", line.c_str());
  if (!plan.fits()) return Status(StatusCode::kResourceExhausted, plan.advice());
  EngineConfig engine_config = config;
  engine_config.kv_cache_memory_gib = plan.config.kv_cache_memory_gib;  // maybe shrunk to fit
  // Copies of a GiB or more are made in the background (a second per ~3 GB of fresh pages on
  // the test machine); smaller ones at once, so that a small model never runs a step on the
  // file's layout (whose sums round differently: a sequence straddling the switch would not
  // be bit-identical to a run after it).
  constexpr uint64_t kBackgroundRepackBytes = 1ull << 30;
  mo.repack_in_background =
      config.commit_kv_in_background && plan.weight_copies >= kBackgroundRepackBytes;
  if (mo.repack_in_background)
    LOOM_LOG_INFO(
        "weights: serving on the file's layout while their kernel-ready copies (%.2f GiB) are "
        "made in the background",
        static_cast<double>(plan.weight_copies) / double(1ull << 30));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::from_bound(std::move(bound), mo));
  return Engine::create(std::move(model), std::move(tokenizer), engine_config, spec);
}

Engine::Engine(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
Engine::~Engine() = default;

Status Engine::add_request(GenerateRequest request) {
  return core_->add_request(std::move(request));
}
Status Engine::validate(const GenerateRequest& request) const {
  return core_->validate(request);
}
void Engine::abort(const std::string& request_id) {
  core_->abort(request_id);
}
Result<std::vector<RequestOutput>> Engine::step() {
  return core_->step();
}
bool Engine::has_unfinished() const {
  return core_->has_unfinished();
}
EngineMetrics Engine::metrics() const {
  return core_->metrics();
}
const EngineConfig& Engine::config() const {
  return core_->config();
}
const Model& Engine::model() const {
  return core_->model();
}
const Tokenizer* Engine::tokenizer() const {
  return core_->tokenizer();
}
void Engine::keep_logits(bool on) {
  core_->keep_logits(on);
}
const std::vector<std::pair<std::string, std::vector<float>>>& Engine::last_logits() const {
  return core_->last_logits();
}
const std::vector<std::pair<std::string, std::vector<int32_t>>>& Engine::last_drafts() const {
  return core_->last_drafts();
}
std::string Engine::check_kv_drained() const {
  return core_->check_kv_drained();
}

}  // namespace loom
