// One fuzz target = one LOOM_FUZZ_TARGET(name) { ... } body over (data, size). With LOOM_FUZZ (the
// clang libFuzzer build, tests/fuzz/fuzz.cmake) the body becomes LLVMFuzzerTestOneInput; in the
// normal build every target is linked into test_fuzz_smoke under its own name
// (loom_fuzz_<name>), which feeds it the seed corpus and seeded mutations of it.
//
// A target must never crash, hang or allocate without bound on any input; whatever the input,
// the code under test answers with an error or a result. Targets return 0 always (libFuzzer's
// convention); what they check beyond "no crash" they check with LOOM_FUZZ_CHECK, which aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define LOOM_FUZZ_CHECK(cond, what)                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

#ifdef LOOM_FUZZ_LIBFUZZER
#define LOOM_FUZZ_TARGET(name)                                              \
  static void loom_fuzz_body_##name(const uint8_t* data, size_t size);      \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    loom_fuzz_body_##name(data, size);                                      \
    return 0;                                                               \
  }                                                                         \
  static void loom_fuzz_body_##name(const uint8_t* data, size_t size)
#else
#define LOOM_FUZZ_TARGET(name)                                         \
  static void loom_fuzz_body_##name(const uint8_t* data, size_t size); \
  int loom_fuzz_##name(const uint8_t* data, size_t size) {             \
    loom_fuzz_body_##name(data, size);                                 \
    return 0;                                                          \
  }                                                                    \
  static void loom_fuzz_body_##name(const uint8_t* data, size_t size)
#endif

// LOOM_FUZZ_INIT(name, fn): fn() loads what a target shares between inputs (vocabularies, a
// model) before the first input, so that loading does not count against libFuzzer's
// per-input timeout. In the smoke test the target loads it on first use instead.
#ifdef LOOM_FUZZ_LIBFUZZER
#define LOOM_FUZZ_INIT(fn)                             \
  extern "C" int LLVMFuzzerInitialize(int*, char***) { \
    fn();                                              \
    return 0;                                          \
  }
#else
#define LOOM_FUZZ_INIT(fn)
#endif

namespace loom::fuzz {

// Reads a fuzz input front to back: a few selector bytes, then the rest as text or bytes.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t byte() {  // 0 once exhausted
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  std::string_view rest() const { return {reinterpret_cast<const char*>(p_), n_}; }
  size_t size() const { return n_; }
  // Splits the rest at the first occurrence of `sep` (the whole rest and "" when absent).
  std::pair<std::string_view, std::string_view> split(std::string_view sep) const {
    std::string_view r = rest();
    size_t at = r.find(sep);
    if (at == std::string_view::npos) return {r, {}};
    return {r.substr(0, at), r.substr(at + sep.size())};
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

// Where tests/data lives (fixtures the targets load once: vocabularies, templates).
inline std::string test_data(std::string_view rel) {
  return std::string(LOOM_TEST_DATA) + "/" + std::string(rel);
}

}  // namespace loom::fuzz
