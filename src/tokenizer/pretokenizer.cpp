// PCRE2-backed pre-tokenizer splits (see pretokenizer.h).
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

namespace loom::tok {

struct PreTokenizer::Stage {
  pcre2_code* code = nullptr;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  ~Stage() {
    if (code) pcre2_code_free(code);
  }
};

Result<PreTokenizer> PreTokenizer::create(const std::vector<PreSplit>& splits) {
  PreTokenizer p;
  for (const PreSplit& s : splits) {
    auto st = std::make_shared<Stage>();
    st->behavior = s.behavior;
    st->invert = s.invert;
    // DOLLAR_ENDONLY: `$` means the end of the piece, not "before a final newline" (matches
    // the ECMAScript / Rust semantics the patterns were written for).
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    if (s.literal) opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_LITERAL;  // the only flags LITERAL allows
    int err = 0;
    PCRE2_SIZE err_off = 0;
    st->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(s.regex.data()), s.regex.size(), opts,
                             &err, &err_off, nullptr);
    if (!st->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return invalid_file("pre-tokenizer regex '" + s.regex + "' does not compile at offset " +
                          std::to_string(err_off) + ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(st->code, PCRE2_JIT_COMPLETE);  // optional speed-up; interpreter otherwise
    p.stages_.push_back(std::move(st));
  }
  return p;
}

namespace {

struct Segment {
  size_t begin, end;
  bool delim;  // matched by the regex (after `invert`)
};

void apply_stage(const pcre2_code* code, SplitBehavior behavior, bool invert, std::string_view text,
                 pcre2_match_data* md, std::vector<std::string_view>* out) {
  std::vector<Segment> segs;
  size_t pos = 0, last = 0;
  const auto* subj = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subj, text.size(), pos, 0, md, nullptr);
    if (rc < 0) break;  // no match (or a matching error: keep the rest whole)
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t mb = ov[0], me = ov[1];
    if (me == mb) {
      // An empty match splits nothing; step one character and keep looking.
      if (mb >= text.size()) break;
      size_t n = 1;
      while (mb + n < text.size() && (static_cast<uint8_t>(text[mb + n]) & 0xC0) == 0x80) ++n;
      pos = mb + n;
      continue;
    }
    if (mb > last) segs.push_back({last, mb, invert});
    segs.push_back({mb, me, !invert});
    last = pos = me;
  }
  if (last < text.size()) segs.push_back({last, text.size(), invert});

  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Segment& s : segs) out->push_back(text.substr(s.begin, s.end - s.begin));
      break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segs) {
        if (!s.delim) out->push_back(text.substr(s.begin, s.end - s.begin));
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      // A delimiter closes the piece before it: "a-b--c" → "a-", "b-", "-", "c".
      size_t start = 0;
      bool open = false;
      for (const Segment& s : segs) {
        if (s.delim) {
          if (!open) start = s.begin;
          out->push_back(text.substr(start, s.end - start));
          open = false;
        } else {
          if (open) out->push_back(text.substr(start, s.begin - start));
          start = s.begin;
          open = true;
        }
      }
      if (open) out->push_back(text.substr(start));
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // A delimiter opens the piece after it: "a-b--c" → "a", "-b", "-", "-c".
      size_t start = 0;
      bool open = false;
      for (const Segment& s : segs) {
        if (s.delim) {
          if (open) out->push_back(text.substr(start, s.begin - start));
          start = s.begin;
          open = true;
        } else {
          if (!open) start = s.begin;
          out->push_back(text.substr(start, s.end - start));
          open = false;
        }
      }
      if (open) out->push_back(text.substr(start));
      break;
    }
  }
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>* out) const {
  if (text.empty()) return;
  if (stages_.empty()) {
    out->push_back(text);
    return;
  }
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  std::vector<std::string_view> cur{text}, next;
  for (const auto& st : stages_) {
    next.clear();
    for (std::string_view piece : cur) apply_stage(st->code, st->behavior, st->invert, piece, md, &next);
    cur.swap(next);
  }
  pcre2_match_data_free(md);
  out->insert(out->end(), cur.begin(), cur.end());
}

}  // namespace loom::tok
