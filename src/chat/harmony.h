// The harmony format of gpt-oss as a stream of messages: each one a header
//   [<|start|>assistant][ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]
// closed by <|message|>, then a body up to <|end|>, <|return|> or <|call|> (or the next
// <|start|>). Bodies go where their header says: channel analysis → reasoning; a message to
// functions.NAME (in commentary) → a tool call whose arguments are the body; anything else
// (final, a commentary preamble) → the answer. The output parser (output_parser.cpp) runs it
// in place of its reasoning / call-region states; the same split-invariance rule holds: only
// bytes seen decide, a possible marker at the end of the buffer waits.
#pragma once

#include <string>
#include <string_view>

#include "chat/tool_syntax.h"

namespace loom::chat::detail {

// What the harmony machine reports, besides calls (CallSink).
class HarmonySink : public CallSink {
 public:
  // Text of a body (or, at eof, of a header that never reached <|message|>).
  virtual void text(bool reasoning, std::string_view s) = 0;
  // A new body starts: its leading whitespace and the previous body's trailing whitespace
  // are markup spacing.
  virtual void body_start() = 0;
  // The call begun at call_start did not end before eof: it is cut short (reported as an
  // incomplete call) and its text up to `end` is markup, never answer text.
  virtual void call_cut(size_t end) = 0;
};

class HarmonyParser {
 public:
  // tools_enabled false: a message to a function is answer text like any other.
  explicit HarmonyParser(bool tools_enabled) : tools_enabled_(tools_enabled) {}
  // Consumes text[*pos..]; stops where it needs more bytes (at eof it consumes everything).
  // closed (with eof): the output ended at a token that closes a message, whose text is not
  // in it (generation stopped at gpt-oss's <|call|> or <|return|>): a call still open is
  // complete, not cut.
  void run(std::string_view text, size_t* pos, bool eof, HarmonySink& sink, bool closed = false);
  // Where the unfinished call's text starts (for the parser's buffer trimming); npos: none.
  size_t call_start() const { return in_call_ ? call_start_ : std::string::npos; }
  // After the parser drops `n` consumed bytes from the front of its buffer.
  void shift(size_t n) {
    if (in_call_) call_start_ -= n;
  }

 private:
  enum class State { kHeader, kBody };
  bool header(std::string_view text, size_t* pos, bool eof, HarmonySink& sink);
  bool body(std::string_view text, size_t* pos, bool eof, HarmonySink& sink);

  bool tools_enabled_;
  State state_ = State::kHeader;
  bool reasoning_ = false;  // the body is analysis
  bool in_call_ = false;    // the body is a call's arguments
  size_t call_start_ = 0;
};

}  // namespace loom::chat::detail
