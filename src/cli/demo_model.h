// What `loom run` and `loom serve` share as a new user meets them: the random-weight demo model
// used when no -m is given (announced, never silent), and text written to a terminal with its
// control bytes escaped (a model's output must not move the cursor or change the terminal).
#pragma once

#include <string>
#include <string_view>

namespace loom::cli {

// A tiny random-weight model with a vocabulary, so the whole path runs in a second anywhere.
inline constexpr const char* kDemoModel = "synth:tiny";

// If `model` is empty: sets it to kDemoModel, prints why to stderr (as `command`) and returns
// true.
bool use_demo_model_if_empty(std::string& model, const char* command);

// `text` with C0 control bytes other than newline and tab, and DEL, written as \xNN (UTF-8
// sequences pass through), for output that goes to a terminal.
std::string escape_control_bytes(std::string_view text);

}  // namespace loom::cli
