// Internal seam between the streaming output parser (output_parser.cpp) and the per-family
// tool-call syntaxes (tool_format_*.cpp). The parser finds where a call region opens (one of
// the family's opener markers) and hands the bytes after it to the family's syntax, which
// consumes them incrementally and reports calls through a CallSink.
//
// Split invariance (any chunking of the output gives the same result) rests on one rule every
// syntax follows: a decision is taken only when the bytes seen decide it, never because the
// buffer happens to end; "maybe" (a partial marker at the end of the buffer) means wait.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_format.h"

namespace loom::chat::detail {

// The buffered output: `text[pos..]` is unconsumed; `eof`: no more bytes will come.
struct Input {
  std::string_view text;
  size_t pos = 0;
  bool eof = false;

  std::string_view rest() const { return text.substr(pos); }
  bool at_end() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }
};

enum class Match { kYes, kMaybe, kNo };

inline bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
inline void skip_ws(Input& in) {
  while (!in.at_end() && is_ws(in.peek())) ++in.pos;
}
// Matches `lit` at in.pos, consuming it on kYes. kMaybe: the rest is a proper prefix of `lit`
// and more input may come.
Match match_literal(Input& in, std::string_view lit);
// At eof, consumes the rest of the input if it is a proper prefix of `lit`: a closing marker
// that the end of the output cut off is still markup, not text.
void consume_cut_literal(Input& in, std::string_view lit);
// Index in `s` from which s is a proper prefix of one of `markers` (the part to hold back
// while it might still become a marker), or s.size().
size_t partial_marker_start(std::string_view s, const std::vector<std::string>& markers);
// The earliest full occurrence of any marker in `s`: {index, which}; index npos when none.
std::pair<size_t, size_t> find_first_marker(std::string_view s,
                                            const std::vector<std::string>& markers);

// Finds where one JSON value ends, byte by byte, without building it (arguments are streamed
// as the model writes them and normalized once complete). Validation is structural only.
class JsonValueScanner {
 public:
  void reset() { *this = JsonValueScanner(); }
  // Consumes bytes of the value from `s` (which starts at the value or inside it) and returns
  // how many; stops after the value's last byte. A bare scalar (number, true, null) ends at the
  // first byte that cannot continue it, which is not consumed.
  size_t feed(std::string_view s);
  // At end of output a bare scalar is complete.
  void finish_at_eof() {
    if (scalar_ && !failed_) done_ = true;
  }
  bool done() const { return done_; }
  bool failed() const { return failed_; }

 private:
  bool started_ = false, done_ = false, failed_ = false;
  bool scalar_ = false, in_string_ = false, escape_ = false;
  int depth_ = 0;
};

// Reads a JSON string's body (after the opening quote) incrementally; done() after the
// closing quote. value() decodes escapes.
class JsonStringReader {
 public:
  void reset() { *this = JsonStringReader(); }
  size_t feed(std::string_view s);
  bool done() const { return done_; }
  size_t raw_size() const { return raw_.size(); }
  // The decoded string; false if the escapes are invalid.
  bool value(std::string* out) const;

 private:
  std::string raw_;
  bool escape_ = false, done_ = false;
};

// Appends `s` to `out` escaped for the inside of a JSON string. Byte-wise, so fragments of a
// longer text escape to fragments of its escaping.
void append_json_escaped(std::string* out, std::string_view s);

// What a syntax reports.
class CallSink {
 public:
  virtual ~CallSink() = default;
  // The text of a new call starts at input position `pos` (an unterminated call is returned
  // as content from there). The region's first call starts at its opener (set by the parser).
  virtual void item_start(size_t pos) = 0;
  // id empty: the parser generates one.
  virtual void begin_call(std::string name, std::string id) = 0;
  virtual void args(std::string_view fragment) = 0;
  virtual void end_call() = 0;
};

enum class Step {
  kNeedMore,  // consumed what it could; at eof this means the region is unterminated
  kDone,      // the region ended at in.pos; answer text continues there
  kFail,      // not well-formed at in.pos: the region's text so far is content
};

class ToolSyntax {
 public:
  virtual ~ToolSyntax() = default;
  // Markers that open a call region anywhere in the answer.
  virtual std::vector<std::string> openers() const = 0;
  // Markers that open one only where the answer starts (after leading whitespace).
  virtual std::vector<std::string> start_openers() const { return {}; }
  // Whether a region opened by `opener` is call markup even before a call's name is read: a
  // region cut off there is dropped, not content (llama3's bare "{" may be a JSON answer).
  virtual bool opener_is_markup(std::string_view /*opener*/) const { return true; }
  // A region opened by `opener` (already consumed) begins.
  virtual void begin(std::string_view opener) = 0;
  virtual Step step(Input& in, CallSink& sink) = 0;
};

// `tools`: the request's OpenAI-shape tools (may be null); used where the markup does not say
// a value's type (qwen3_coder parameters).
std::unique_ptr<ToolSyntax> make_tool_syntax(ToolCallFormat format,
                                             const nlohmann::ordered_json* tools);

// Per-family factories (tool_format_*.cpp).
std::unique_ptr<ToolSyntax> make_hermes_syntax();
std::unique_ptr<ToolSyntax> make_llama3_json_syntax();
std::unique_ptr<ToolSyntax> make_mistral_syntax();
std::unique_ptr<ToolSyntax> make_deepseek_v3_syntax();
std::unique_ptr<ToolSyntax> make_qwen3_coder_syntax(const nlohmann::ordered_json* tools);

// Parses one JSON call object {"name": "...", "arguments"|"parameters": {...}} incrementally:
// the name is reported as soon as it is read, the arguments streamed as written (buffered
// until the name is known when they come first). Shared by hermes, llama3_json and mistral.
class JsonCallObjectParser {
 public:
  // opened: the '{' was already consumed (llama3's "{" opener). strict: an object whose first
  // key is not name/arguments/parameters is not a call (fail at once: llama3 answers that are
  // JSON objects should not be held back to their end).
  void reset(bool opened, bool strict);
  // kDone after the closing '}' (the call is begun but not ended: the caller ends it).
  Step step(Input& in, CallSink& sink);

 private:
  enum class S { kOpen, kKeyOrEnd, kKey, kColon, kValue, kName, kArgs, kSkip, kCommaOrEnd };
  S s_ = S::kOpen;
  bool strict_ = false;
  bool have_name_ = false, have_args_ = false, first_key_ = true;
  std::string key_;
  std::string pending_args_;  // arguments written before the name
  JsonStringReader str_;
  JsonValueScanner scan_;
};

}  // namespace loom::chat::detail
