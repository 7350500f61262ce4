// `loom plan -m MODEL [serve's engine options] [--json]`: the memory plan of a serving
// configuration (engine/memory_plan.h) without loading the model: weights as stored and as
// the kernels' copies, KV cache per token and in total, recurrent states, scratch, and what
// the machine has. Exit status 1 when it does not fit, with the option to change.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/engine_flags.h"
#include "engine/memory_plan.h"

namespace loom::cli {

int print_memory_plan(const std::string& model, const EngineConfig& config, bool json,
                      const char* command) {
  Result<MemoryPlan> plan = plan_memory(model, config);
  if (!plan.is_ok()) {
    std::fprintf(stderr, "loom %s: %s\n", command, plan.status().message().c_str());
    return 1;
  }
  const std::string text = json ? plan->to_json() + "\n" : plan->table();
  std::fputs(text.c_str(), stdout);
  return plan->fits() ? 0 : 1;
}

namespace {

int cmd_plan(int argc, char** argv) {
  CLI::App app{"Print the memory a serving configuration needs, before loading anything",
               "loom plan"};
  std::string model;
  bool json = false;
  app.add_option("-m,--model", model,
                 "GGUF file, Hugging Face directory or synth:PRESET[:TYPE] (optional; default: "
                 "the random-weight demo model " +
                     std::string(kDemoModel) + ")");
  app.add_flag("--json", json, "the plan as JSON");
  EngineFlags engine_flags;
  engine_flags.add_to(app);
  CLI11_PARSE(app, argc, argv);
  if (Status st = engine_flags.apply(); !st.is_ok()) {
    std::fprintf(stderr, "loom plan: %s\n", st.message().c_str());
    return 1;
  }
  use_demo_model_if_empty(model, "plan");
  return print_memory_plan(model, engine_flags.config, json, "plan");
}

}  // namespace

LOOM_REGISTER_COMMAND("plan", "print the memory a model and serving configuration need", cmd_plan);

}  // namespace loom::cli
