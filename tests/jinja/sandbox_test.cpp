// The sandbox: hostile templates (endless loops, deep recursion, output explosions, huge
// ranges, deeply nested syntax) must fail fast with an error, never hang, crash or exhaust
// memory; and templates cannot reach anything outside their context.
#include <gtest/gtest.h>
#include <time.h>

#include "jinja/chat_template.h"

namespace loom {
namespace {

struct Timed {
  Result<std::string> result;
  double seconds;
};

// CPU time of this thread: the build machines are shared, so wall time would be noisy.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

Timed render_timed(const std::string& source, const ChatTemplateOptions& options = {}) {
  double t0 = thread_cpu_seconds();
  Result<std::string> r = render_chat_template(source, nlohmann::ordered_json::object(), options);
  return {std::move(r), thread_cpu_seconds() - t0};
}

// `max_seconds` of CPU: far below what the unbounded work would take (hours).
void expect_fails_fast(const std::string& source, StatusCode code, const std::string& fragment,
                       double max_seconds = 1.0) {
  Timed t = render_timed(source);
  ASSERT_FALSE(t.result.is_ok()) << source;
  EXPECT_EQ(t.result.status().code(), code) << t.result.status().message();
  EXPECT_NE(t.result.status().message().find(fragment), std::string::npos)
      << t.result.status().message();
  EXPECT_LT(t.seconds, max_seconds) << source;
}

TEST(ChatTemplateSandbox, HugeRangeIsRefused) {
  expect_fails_fast("{% for i in range(10**9) %}x{% endfor %}", StatusCode::kResourceExhausted,
                    "Range too big");
}

TEST(ChatTemplateSandbox, NestedLoopsHitTheStepLimit) {
  expect_fails_fast(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      StatusCode::kResourceExhausted, "step limit");
}

TEST(ChatTemplateSandbox, EndlessRecursionHitsTheDepthLimit) {
  expect_fails_fast("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
                    StatusCode::kResourceExhausted, "call depth");
}

TEST(ChatTemplateSandbox, RecursionWithinTheLimitWorks) {
  Result<std::string> r = render_chat_template(
      "{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ r(50) }}",
      nlohmann::ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::string want;
  for (int i = 0; i <= 50; ++i) want += std::to_string(i);
  EXPECT_EQ(*r, want);
}

TEST(ChatTemplateSandbox, OutputExplosionHitsTheOutputLimit) {
  expect_fails_fast("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
                    StatusCode::kResourceExhausted, "exceeds");
}

TEST(ChatTemplateSandbox, StringDoublingHitsTheOutputLimit) {
  expect_fails_fast(
      "{% set ns = namespace(s='x') %}{% for i in range(200) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}{{ ns.s|length }}",
      StatusCode::kResourceExhausted, "exceeds");
  expect_fails_fast("{{ 'x' * 10**12 }}", StatusCode::kResourceExhausted, "exceeds");
  expect_fails_fast("{{ [1, 2] * 10**12 }}", StatusCode::kResourceExhausted, "exceeds");
}

TEST(ChatTemplateSandbox, LimitsAreConfigurable) {
  ChatTemplateOptions small;
  small.limits.max_output_bytes = 10;
  Timed t = render_timed("{{ 'abcdefghijk' }}", small);
  EXPECT_FALSE(t.result.is_ok());
  t = render_timed("{{ 'abcdefghij' }}", small);
  ASSERT_TRUE(t.result.is_ok());
  EXPECT_EQ(*t.result, "abcdefghij");

  ChatTemplateOptions few_steps;
  few_steps.limits.max_steps = 50;
  EXPECT_FALSE(
      render_timed("{% for i in range(100) %}{{ i }}{% endfor %}", few_steps).result.is_ok());
  EXPECT_TRUE(render_timed("{% for i in range(3) %}{{ i }}{% endfor %}", few_steps).result.is_ok());

  ChatTemplateOptions shallow;
  shallow.limits.max_call_depth = 3;
  const std::string rec =
      "{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(N) }}";
  EXPECT_TRUE(
      render_timed(std::string(rec).replace(rec.find('N'), 1, "2"), shallow).result.is_ok());
  EXPECT_FALSE(
      render_timed(std::string(rec).replace(rec.find('N'), 1, "3"), shallow).result.is_ok());
}

TEST(ChatTemplateSandbox, DeeplyNestedSyntaxIsASyntaxError) {
  std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  expect_fails_fast(parens, StatusCode::kInvalidArgument, "nested too deeply");
  std::string lists = "{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}";
  expect_fails_fast(lists, StatusCode::kInvalidArgument, "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  expect_fails_fast(ifs, StatusCode::kInvalidArgument, "nested too deeply");
  std::string chain = "{{ 'x'";
  for (int i = 0; i < 100000; ++i) chain += "|upper";
  chain += " }}";
  expect_fails_fast(chain, StatusCode::kInvalidArgument, "too long");
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  sum += " }}";
  expect_fails_fast(sum, StatusCode::kInvalidArgument, "too long");
}

// Converting the context to template values recurses once per level: a context nested tens of
// thousands deep is refused (as the server refuses such bodies) instead of overflowing the
// stack; one at the bound renders.
TEST(ChatTemplateSandbox, DeeplyNestedContextIsRefused) {
  auto nested = [](int depth) {
    std::string inner = std::string(depth - 1, '[') + std::string(depth - 1, ']');
    return nlohmann::ordered_json::parse("{\"x\": " + inner + "}");
  };
  Result<std::string> deep = render_chat_template("{{ x | length }}", nested(30000));
  ASSERT_FALSE(deep.is_ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("deeper than 128 levels"), std::string::npos)
      << deep.status().message();
  EXPECT_FALSE(render_chat_template("{{ x | length }}", nested(129)).is_ok());
  Result<std::string> ok = render_chat_template("{{ x | length }}", nested(128));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(*ok, "1");
}

TEST(ChatTemplateSandbox, NoMutationOfContextData) {
  Result<std::string> r =
      render_chat_template("{{ messages.append(1) }}",
                           nlohmann::ordered_json{{"messages", nlohmann::ordered_json::array()}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unsafe"), std::string::npos) << r.status().message();
  r = render_chat_template("{% set x = {} %}{{ x.update({'a': 1}) }}",
                           nlohmann::ordered_json::object());
  EXPECT_FALSE(r.is_ok());
}

TEST(ChatTemplateSandbox, NoPythonInternalsOrFileAccess) {
  // Jinja2 sandbox escapes go through dunder attributes, include/import and globals; none exist.
  EXPECT_FALSE(render_chat_template("{{ messages.__class__.__mro__ }}",
                                    nlohmann::ordered_json{{"messages", 1}})
                   .is_ok());
  for (const char* src : {"{{ ''.__class__ }}", "{{ cycler }}", "{{ lipsum }}", "{{ self }}",
                          "{{ range.__globals__ }}"}) {
    Result<std::string> r = render_chat_template(src, nlohmann::ordered_json{{"messages", 1}});
    ASSERT_TRUE(r.is_ok()) << src << ": " << r.status().message();
    EXPECT_EQ(*r, "") << src;
  }
  for (const char* src : {"{% include '/etc/passwd' %}", "{% import 'x' as y %}",
                          "{% extends 'base' %}", "{% from 'x' import y %}"}) {
    Result<std::string> r = render_chat_template(src, nlohmann::ordered_json::object());
    EXPECT_FALSE(r.is_ok()) << src;
  }
}

TEST(ChatTemplateSandbox, BreakOutsideLoopIsAnError) {
  EXPECT_FALSE(render_chat_template("{% break %}", nlohmann::ordered_json::object()).is_ok());
}

}  // namespace
// Found by fuzzing (tests/fuzz, jinja target). A namespace may hold itself: printing it stops
// at a depth, as Python prints a recursive container as [...], instead of recursing forever.
TEST(ChatTemplateSandbox, SelfReferencingNamespacePrints) {
  Result<std::string> r = render_chat_template(
      "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}|{{ [ns.me.me.a] }}",
      nlohmann::ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, "<Namespace {'a': 1, 'me': <Namespace {...}>}>|[1]");  // as Jinja2 prints it
}

// Shared values double in length as text at each step: 40 doublings would be a terabyte.
TEST(ChatTemplateSandbox, ExponentialSharedListHitsTheOutputLimit) {
  expect_fails_fast(
      "{% set ns = namespace(l=['0123456789abcdef' * 64]) %}{% for i in range(40) %}"
      "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
      // repr writes its 64 MiB bound before giving up: ~1 s of CPU on a busy 2-core machine
      // (2^40 KiB without the bound).
      StatusCode::kResourceExhausted, "", 4.0);
}

// A loop can nest a value once per iteration through a namespace: refused past a depth, since
// printing, comparing or even destroying a million-deep value would overflow the stack.
TEST(ChatTemplateSandbox, DeepNestingThroughANamespaceIsRefused) {
  expect_fails_fast(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}"
      "{% endfor %}{{ ns.l }}",
      StatusCode::kResourceExhausted, "nested more than 256 levels");
  expect_fails_fast(
      "{% set ns = namespace(n=none) %}{% for i in range(100000) %}"
      "{% set ns.n = namespace(inner=ns.n) %}{% endfor %}{{ ns.n }}",
      StatusCode::kResourceExhausted, "nested more than 256 levels");
  Result<std::string> ok = render_chat_template(
      "{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = [ns.l] %}"
      "{% endfor %}{{ ns.l|tojson|length }}",
      nlohmann::ordered_json::object());
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(*ok, "202");
}

// Python's %-formatting, at its edges: no overflow in the precision, exact digits of a large
// float with %d (Python: '%d' % 1e20 == '100000000000000000000'), an error for infinity.
TEST(ChatTemplateSandbox, PercentFormatEdges) {
  auto render = [](const std::string& src) {
    return render_chat_template(src, nlohmann::ordered_json::object());
  };
  auto big = render("{{ '%d|%.2f|%.0f' % (1e20, 1e300, 2.5) }}");
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_EQ(big->substr(0, 22), "100000000000000000000|");
  EXPECT_EQ(big->size(), 22u + 301u + 3u + 2u) << *big;
  EXPECT_FALSE(render("{{ '%.99999999999999f' % 1.0 }}").is_ok());
  EXPECT_FALSE(render("{{ '%d' % (1e308 * 10) }}").is_ok());
  EXPECT_FALSE(render("{{ '{99999999999999999999999}'.format(1) }}").is_ok());
  // An attribute path with an index past any integer type (std::stoll threw through here).
  EXPECT_TRUE(render("{{ [[1]]|map(attribute='99999999999999999999999')|list|length }}").is_ok());
}

// Filter arguments of the wrong type or absurd size are errors, never an exception through the
// renderer or a huge allocation.
TEST(ChatTemplateSandbox, FilterArgumentsAreChecked) {
  for (const char* src : {"{{ 'x'|indent(1.5) }}", "{{ 'x'|indent([1]) }}",
                          "{{ [1]|tojson(indent=1.5) }}", "{{ [1]|tojson(indent=[2]) }}"})
    EXPECT_EQ(render_chat_template(src, nlohmann::ordered_json::object()).status().code(),
              StatusCode::kInvalidArgument)
        << src;
  expect_fails_fast("{{ 'a\nb'|indent(10**12) }}", StatusCode::kResourceExhausted, "");
  expect_fails_fast("{{ [1]|batch(10**12, 'x')|list }}", StatusCode::kResourceExhausted, "");
  Result<std::string> ok = render_chat_template(
      "{{ 'a\nb'|indent(2) }}|{{ [1,2,3]|batch(2, 0)|list }}", nlohmann::ordered_json::object());
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(*ok, "a\n  b|[[1, 2], [3, 0]]");
}

// A macro's defining scope holds the macro (a reference cycle): the renders of templates that
// define macros must not leak it (LeakSanitizer in the sanitizer build checks this test).
TEST(ChatTemplateSandbox, MacrosStillWorkAcrossScopes) {
  Result<std::string> r = render_chat_template(
      "{% macro outer(x) %}{% macro inner(y) %}[{{ x }}{{ y }}]{% endmacro %}{{ inner(2) }}"
      "{% endmacro %}{% set ns = namespace(f=outer) %}{% for i in range(2) %}{{ ns.f(i) }}"
      "{% endfor %}{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}c{% endcall %}",
      nlohmann::ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, "[02][12]<c>");
}

}  // namespace loom
