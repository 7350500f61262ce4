// test_fuzz_smoke: every fuzz target (tests/fuzz/*_fuzz.cpp), built with the normal compiler
// and no fuzzing engine, run on its seed corpus (tests/fuzz/corpus/<target>/) and on seeded
// random mutations of it: a crash, abort or fuzz-check failure fails the test. The real
// fuzzing (libFuzzer, ASan, UBSan, hours of inputs) is tests/fuzz/run.sh; the crashing inputs
// it found are in the corpora, so each stays fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using FuzzFn = int (*)(const uint8_t*, size_t);
int loom_fuzz_gguf(const uint8_t*, size_t);
int loom_fuzz_safetensors(const uint8_t*, size_t);
int loom_fuzz_hf_config(const uint8_t*, size_t);
int loom_fuzz_tokenizer(const uint8_t*, size_t);
int loom_fuzz_jinja(const uint8_t*, size_t);
int loom_fuzz_server_request(const uint8_t*, size_t);
int loom_fuzz_structured(const uint8_t*, size_t);

namespace {

using Bytes = std::vector<uint8_t>;

std::vector<Bytes> load_corpus(const std::string& target) {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(std::string(LOOM_SOURCE_DIR) +
                                                           "/tests/fuzz/corpus/" + target))
    if (e.is_regular_file()) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());  // the same mutations on every machine
  std::vector<Bytes> corpus;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return corpus;
}

// libFuzzer-like mutations: bit flips, byte sets, inserted "interesting" tokens (syntax of the
// formats under test, boundary numbers), deleted or duplicated ranges, splices.
Bytes mutate(const std::vector<Bytes>& corpus, std::mt19937_64& rng) {
  static const char* const kTokens[] = {"{",
                                        "}",
                                        "[",
                                        "]",
                                        "\"",
                                        ":",
                                        ",",
                                        "{{",
                                        "}}",
                                        "{%",
                                        "%}",
                                        "{#",
                                        "(",
                                        ")",
                                        "|",
                                        "*",
                                        "\\",
                                        "\xFF",
                                        "\xC3",
                                        "\xED\xA0\x80",
                                        "\x00",
                                        "-1",
                                        "0",
                                        "4294967295",
                                        "18446744073709551615",
                                        "1e308",
                                        "-9223372036854775808",
                                        "null",
                                        "true",
                                        "\"type\"",
                                        "\"$ref\"",
                                        "::=",
                                        "\n"};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  Bytes b = corpus[pick(corpus.size())];
  const int ops = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < ops; ++k) {
    switch (rng() % 7) {
      case 0:
        if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng());
        break;
      case 2: {
        std::string t = kTokens[pick(std::size(kTokens))];
        if (t.empty()) t.push_back('\0');
        b.insert(b.begin() + static_cast<ptrdiff_t>(pick(b.size() + 1)), t.begin(), t.end());
        break;
      }
      case 3:
        if (!b.empty()) {
          size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(16, b.size() - at));
          b.erase(b.begin() + static_cast<ptrdiff_t>(at),
                  b.begin() + static_cast<ptrdiff_t>(at + n));
        }
        break;
      case 4:
        if (!b.empty() && b.size() < (1u << 16)) {
          size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(64, b.size() - at));
          Bytes piece(b.begin() + static_cast<ptrdiff_t>(at),
                      b.begin() + static_cast<ptrdiff_t>(at + n));
          b.insert(b.begin() + static_cast<ptrdiff_t>(pick(b.size() + 1)), piece.begin(),
                   piece.end());
        }
        break;
      case 5: {
        const Bytes& other = corpus[pick(corpus.size())];
        size_t cut = pick(b.size() + 1), from = pick(other.size() + 1);
        b.resize(cut);
        b.insert(b.end(), other.begin() + static_cast<ptrdiff_t>(from), other.end());
        break;
      }
      default:
        b.resize(pick(b.size() + 1));
        break;
    }
  }
  return b;
}

void smoke(const char* target, FuzzFn fn, int mutations) {
  const std::vector<Bytes> corpus = load_corpus(target);
  ASSERT_FALSE(corpus.empty()) << "no seed corpus for " << target;
  auto t0 = std::chrono::steady_clock::now();
  for (const Bytes& b : corpus) fn(b.data(), b.size());
  std::mt19937_64 rng(0x10057u);  // fixed: the same inputs every run
  for (int i = 0; i < mutations; ++i) {
    Bytes b = mutate(corpus, rng);
    fn(b.data(), b.size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu seeds + %d mutations in %.2f s\n", target, corpus.size(), mutations, s);
}

}  // namespace

TEST(FuzzSmoke, Gguf) {
  smoke("gguf", loom_fuzz_gguf, 1000);
}
TEST(FuzzSmoke, Safetensors) {
  smoke("safetensors", loom_fuzz_safetensors, 1000);
}
TEST(FuzzSmoke, HfConfig) {
  smoke("hf_config", loom_fuzz_hf_config, 500);
}
TEST(FuzzSmoke, Tokenizer) {
  smoke("tokenizer", loom_fuzz_tokenizer, 1000);
}
TEST(FuzzSmoke, Jinja) {
  smoke("jinja", loom_fuzz_jinja, 1000);
}
TEST(FuzzSmoke, ServerRequest) {
  smoke("server_request", loom_fuzz_server_request, 1000);
}
TEST(FuzzSmoke, Structured) {
  smoke("structured", loom_fuzz_structured, 500);
}
