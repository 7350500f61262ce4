// `loom template`: render a chat template (Jinja, as Hugging Face transformers renders it)
// with a JSON context and print the exact text (no newline added). The context is a bare
// render context ({"messages": [...], "add_generation_prompt": true, ...}) or a fixture case
// file from tests/data/chat_templates (whose "context" member is used).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>

#include "base/json_depth.h"
#include "cli/commands.h"
#include "jinja/chat_template.h"

namespace loom::cli {
namespace {

bool read_all(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "loom template: %s\n", msg.c_str());
  return 1;
}

int cmd_template(int argc, char** argv) {
  CLI::App app{"Render a chat template with a JSON context", "loom template"};
  std::string template_path, context_path, now;
  app.add_option("-t,--template", template_path, "the chat template (.jinja)")->required();
  app.add_option("-c,--context", context_path,
                 "JSON render context, or a fixture case file with a \"context\" member")
      ->required();
  app.add_option("--now", now, "fix strftime_now's clock: \"YYYY-MM-DD HH:MM:SS\" (local time)");
  CLI11_PARSE(app, argc, argv);

  std::string source, context_text;
  if (!read_all(template_path, source)) return fail("cannot open " + template_path);
  if (!read_all(context_path, context_text)) return fail("cannot open " + context_path);
  // Copying a parsed value recurses once per level: refuse deep text before parsing it.
  if (json_nesting_exceeds(context_text))
    return fail(context_path + " nests arrays and objects deeper than " +
                std::to_string(kMaxJsonDepth) + " levels");
  // ordered_json keeps key order, which tojson prints as is (like Python's dicts).
  nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_text, nullptr, false);
  if (context.is_discarded()) return fail(context_path + " is not valid JSON");
  if (!context.is_object()) return fail(context_path + " must hold a JSON object");
  if (context.contains("context") && context["context"].is_object() &&
      (context.contains("template") || context.contains("expected") || context.contains("error")))
    context = nlohmann::ordered_json(context["context"]);

  ChatTemplateOptions options;
  if (!now.empty()) {
    std::tm tm{};
    std::istringstream in(now);
    in >> std::get_time(&tm, "%Y-%m-%d %H:%M:%S");
    if (in.fail()) return fail("--now wants \"YYYY-MM-DD HH:MM:SS\", got \"" + now + "\"");
    tm.tm_isdst = -1;
    std::mktime(&tm);  // fills in the weekday and day of the year
    options.now = [tm] { return tm; };
  }

  Result<ChatTemplate> tmpl = ChatTemplate::parse(source);
  if (!tmpl.is_ok()) return fail(tmpl.status().message());
  Result<std::string> out = tmpl->render(context, options);
  if (!out.is_ok()) return fail(out.status().message());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}

LOOM_REGISTER_COMMAND("template", "render a chat template with a JSON context", cmd_template);

}  // namespace
}  // namespace loom::cli
