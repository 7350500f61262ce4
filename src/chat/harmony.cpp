#include "chat/harmony.h"

#include "chat/markup.h"

namespace loom::chat::detail {
namespace {

using namespace markup;

// The word after `key` in a header ("analysis" after <|channel|>, "functions.f" after "to="):
// up to whitespace or the next marker.
std::string_view word_after(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  size_t end = 0;
  while (end < rest.size() && !is_ws(rest[end]) && rest[end] != '<') ++end;
  return rest.substr(0, end);
}

// Every marker; the first four end a body, the others are markup wherever they stand.
const std::vector<std::string>& markers() {
  static const std::vector<std::string> kMarkers = {
      kHarmonyEnd,     kHarmonyReturn,  kHarmonyCall,     kHarmonyStart,
      kHarmonyChannel, kHarmonyMessage, kHarmonyConstrain};
  return kMarkers;
}
constexpr size_t kNumBodyEnds = 4;

// `s` without its markers: a stray control token is never answer text, as everywhere else with
// skip_special_tokens (a random or confused model can write one anywhere).
std::string without_markers(std::string_view s) {
  std::string out;
  for (;;) {
    auto [at, which] = find_first_marker(s, markers());
    if (at == std::string_view::npos) return out.append(s);
    out.append(s.substr(0, at));
    s.remove_prefix(at + markers()[which].size());
  }
}

}  // namespace

void HarmonyParser::run(std::string_view text, size_t* pos, bool eof, HarmonySink& sink,
                        bool closed) {
  for (;;) {
    const bool progressed =
        state_ == State::kHeader ? header(text, pos, eof, sink) : body(text, pos, eof, sink);
    if (!progressed || *pos >= text.size()) {
      if (eof && *pos >= text.size() && state_ == State::kBody && in_call_) {
        if (closed)
          sink.end_call();
        else
          sink.call_cut(text.size());  // reads call_start() first
        in_call_ = false;
      }
      return;
    }
  }
}

// A header is decided once its <|message|> has arrived. At eof an unfinished one is dropped
// when it is markup (starts with a marker), else it is the answer of a model that wrote no
// harmony at all.
bool HarmonyParser::header(std::string_view text, size_t* pos, bool eof, HarmonySink& sink) {
  std::string_view rest = text.substr(*pos);
  const size_t at = rest.find(kHarmonyMessage);
  if (at == std::string_view::npos) {
    if (!eof) return false;
    const size_t first = rest.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && rest.substr(first, 2) != "<|") {
      sink.body_start();
      sink.text(false, without_markers(rest));
    }
    *pos = text.size();
    return true;
  }
  const std::string_view head = rest.substr(0, at);
  const std::string_view channel = word_after(head, kHarmonyChannel);
  const std::string_view recipient = word_after(head, "to=");
  const size_t header_start = *pos;
  *pos += at + std::string_view(kHarmonyMessage).size();
  state_ = State::kBody;
  reasoning_ = false;
  in_call_ = false;
  sink.body_start();
  const std::string_view fn = kHarmonyFunctions;
  if (tools_enabled_ && recipient.substr(0, fn.size()) == fn && recipient.size() > fn.size()) {
    in_call_ = true;
    call_start_ = header_start;
    sink.item_start(header_start);
    sink.begin_call(std::string(recipient.substr(fn.size())), "");
  } else {
    reasoning_ = channel == "analysis";
  }
  return true;
}

bool HarmonyParser::body(std::string_view text, size_t* pos, bool eof, HarmonySink& sink) {
  std::string_view rest = text.substr(*pos);
  auto emit = [&](std::string_view s) {
    if (in_call_)
      sink.args(s);
    else
      sink.text(reasoning_, s);
  };
  auto [at, which] = find_first_marker(rest, markers());
  if (at == std::string_view::npos) {
    const size_t take = eof ? rest.size() : partial_marker_start(rest, markers());
    emit(rest.substr(0, take));
    *pos += take;
    return eof;
  }
  emit(rest.substr(0, at));
  *pos += at + markers()[which].size();
  if (which >= kNumBodyEnds) return true;  // markup inside a body: dropped, the body goes on
  if (in_call_) {
    sink.end_call();
    in_call_ = false;
  }
  state_ = State::kHeader;
  return true;
}

}  // namespace loom::chat::detail
