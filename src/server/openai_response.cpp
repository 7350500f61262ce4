// OpenAI response rendering: the completion / chat.completion objects, their streaming
// *.chunk forms as SSE, logprobs in both APIs' shapes, and usage.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "chat/output_format.h"
#include "loom/tokenizer.h"
#include "server/jobs.h"
#include "server/server_context.h"

namespace loom::server {

chat::ChatDelta next_chat_delta(chat::ChatOutputParser* parser, std::string text,
                                const CompletionOutput& c) {
  chat::ChatDelta d;
  if (!parser) {
    d.content = std::move(text);
    return d;
  }
  d = parser->push(text);
  if (c.finished()) {
    // Ended by the model (an end-of-generation token) or by its grammar's end (a forced
    // call's arguments complete), not by a stop string, a stop_token_ids entry or the length.
    const bool closed = c.finish_reason == FinishReason::kStop && c.stop_reason.empty();
    chat::ChatDelta rest = parser->finish(closed);
    d.reasoning += rest.reasoning;
    d.content += rest.content;
    for (auto& t : rest.tool_calls) d.tool_calls.push_back(std::move(t));
  }
  return d;
}

std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_data(const Json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

namespace {

// Invalid UTF-8 (a token that is part of a character) → U+FFFD per bad byte, so the strings
// clients see, their lengths (text_offset) and the top_logprobs keys are what we computed with.
std::string sanitize_utf8(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 2) ok = c >= 0xC2;
    if (ok && len == 3) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = c <= 0xF4 && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += 1;
    }
  }
  return out;
}

// Characters (code points) of valid UTF-8: text_offset counts them, as Python's len() does in
// OpenAI's and vLLM's servers.
size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// JSON has no -inf; vLLM reports this value for impossible tokens.
double finite_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

class OpenAiJob : public GenerationJob {
 public:
  OpenAiJob(const ServerContext& ctx, GenerationSpec spec, std::string id,
            std::shared_ptr<Responder> out)
      : ctx_(ctx), spec_(std::move(spec)), id_(std::move(id)), created_(std::time(nullptr)) {
    responder = std::move(out);
    const size_t n_prompts = spec_.prompts.size();
    const size_t n = static_cast<size_t>(spec_.params.n);
    choices_.resize(n_prompts * n);
    prompt_tokens_.assign(n_prompts, 0);
    cached_tokens_.assign(n_prompts, 0);
    for (size_t i = 0; i < n_prompts; ++i)
      prompt_tokens_[i] = static_cast<int64_t>(spec_.prompts[i].size());
    if (chat() && spec_.output.enabled) {
      for (Choice& ch : choices_) {
        ch.parser = std::make_unique<chat::ChatOutputParser>(
            spec_.output.format, spec_.output.tools_enabled, spec_.output.starts_in_reasoning);
        ch.parser->set_tools(spec_.output.tools);
      }
    }
  }

  void start() {
    if (!spec_.stream) return;
    responder->begin_stream("text/event-stream");
    if (chat()) {
      // vLLM and OpenAI open every choice with a role-only delta.
      for (size_t i = 0; i < choices_.size(); ++i) {
        Json delta = {{"role", "assistant"}, {"content", ""}};
        Json ck = chunk(i, std::move(delta), Json(), Json());
        if (spec_.continuous_usage) ck["usage"] = usage();
        responder->write(sse_data(ck));
      }
    }
  }

  void on_output(size_t pi, RequestOutput& out) override {
    if (!out.error.empty() && error_.empty()) error_ = out.error;
    if (!out.prompt_logprobs.empty()) prompt_lp_[pi] = std::move(out.prompt_logprobs);
    if (out.num_prompt_tokens > 0) prompt_tokens_[pi] = out.num_prompt_tokens;
    cached_tokens_[pi] = out.num_cached_tokens;
    for (CompletionOutput& c : out.outputs) {
      const size_t idx = pi * static_cast<size_t>(spec_.params.n) + static_cast<size_t>(c.index);
      if (idx >= choices_.size()) continue;
      Choice& ch = choices_[idx];
      std::string text = std::move(c.text);
      const bool echo_lp = spec_.echo && !ch.echoed && spec_.params.logprobs >= 0 && !chat();
      if (spec_.echo && !ch.echoed) {
        text = spec_.prompt_texts[pi] + text;
        ch.text_offset = utf8_chars(sanitize_utf8(spec_.prompt_texts[pi]));
        ch.echoed = true;
      }
      ch.tokens = c.num_output_tokens;
      // Echo with logprobs: the prompt's tokens come first (vLLM's), then the generated ones.
      Json lp = echo_lp ? concat_logprobs(echoed_prompt_logprobs(pi), render_logprobs(c, &ch))
                        : render_logprobs(c, &ch);
      if (c.finished()) {
        ch.finish = c.finish_reason;
        if (!c.stop_reason.empty() && !c.stop_token)
          ch.stop_reason = c.stop_reason;
        else if (c.stop_token && !is_eos(*c.stop_token))
          ch.stop_reason = *c.stop_token;
      }
      chat::ChatDelta d = next_chat_delta(ch.parser.get(), std::move(text), c);
      if (ch.parser) ch.num_calls = ch.parser->tool_calls().size();
      if (spec_.stream) {
        if (d.empty() && lp.is_null() && !c.finished()) continue;
        Json fin = c.finished() ? Json(finish_reason(ch, c.finish_reason)) : Json();
        Json payload;
        if (chat())
          payload = delta_json(d);
        else
          payload = d.content;
        Json ck = chunk(idx, std::move(payload), std::move(lp), std::move(fin));
        if (c.finished()) ck["choices"][0]["stop_reason"] = ch.stop_reason;
        // vLLM's continuous_usage_stats: the running totals on every chunk.
        if (spec_.continuous_usage) ck["usage"] = usage();
        responder->write(sse_data(ck));
      } else {
        ch.text += d.content;
        ch.reasoning += d.reasoning;
        if (!lp.is_null()) merge_logprobs(&ch, lp);
      }
    }
  }

  void on_finished() override {
    if (responder->closed()) return;
    if (spec_.stream) {
      if (!error_.empty()) {
        ApiError e;
        e.status = 500;
        e.type = "internal_error";
        e.message = error_;
        responder->write("data: " + openai_error_body(e) + "\n\n");
      }
      if (spec_.include_usage) {
        Json u = base_object();
        u["choices"] = Json::array();
        u["usage"] = usage();
        responder->write(sse_data(u));
      }
      responder->write("data: [DONE]\n\n");
      responder->end_stream();
      return;
    }
    if (!error_.empty()) {
      ApiError e;
      e.status = 500;
      e.type = "internal_error";
      e.message = "generation failed: " + error_;
      send_error(*responder, e);
      return;
    }
    Json j = base_object();
    Json list = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& ch = choices_[i];
      Json c = {{"index", i}};
      if (chat()) {
        c["message"] = message_json(ch);
        c["logprobs"] = spec_.chat_logprobs ? Json{{"content", ch.chat_lp}} : Json();
      } else {
        c["text"] = ch.text;
        c["logprobs"] = spec_.params.logprobs >= 0 ? ch.completion_lp : Json();
        // vLLM's prompt_logprobs: on each choice of the prompt in completions.
        if (spec_.prompt_logprobs >= 0)
          c["prompt_logprobs"] = vllm_prompt_logprobs(i / static_cast<size_t>(spec_.params.n));
      }
      c["finish_reason"] =
          ch.finish == FinishReason::kNone ? Json() : Json(finish_reason(ch, ch.finish));
      c["stop_reason"] = ch.stop_reason;
      list.push_back(std::move(c));
    }
    j["choices"] = std::move(list);
    if (chat() && spec_.prompt_logprobs >= 0) j["prompt_logprobs"] = vllm_prompt_logprobs(0);
    j["usage"] = usage();
    responder->send(200, "application/json", dump_json(j));
  }

 private:
  struct Choice {
    std::string text;                                // content
    std::string reasoning;                           // reasoning_content
    std::unique_ptr<chat::ChatOutputParser> parser;  // when spec_.output.enabled
    size_t num_calls = 0;
    int64_t tokens = 0;
    FinishReason finish = FinishReason::kNone;
    Json stop_reason;  // null, the stop string, or the stop token id
    bool echoed = false;
    Json chat_lp = Json::array();
    Json completion_lp;      // {tokens, token_logprobs, top_logprobs, text_offset}
    size_t text_offset = 0;  // characters of the choice's text so far (the echoed prompt's)
  };

  bool chat() const { return spec_.kind == ApiKind::kChat; }

  // A choice that made tool calls and then stopped finished with "tool_calls" (OpenAI).
  static const char* finish_reason(const Choice& ch, FinishReason r) {
    if (r == FinishReason::kStop && ch.num_calls > 0) return "tool_calls";
    return finish_reason_name(r);
  }

  // A chat chunk's delta: only what changed; a call's first delta carries id, type and name.
  static Json delta_json(const chat::ChatDelta& d) {
    Json j = Json::object();
    if (!d.reasoning.empty()) j["reasoning_content"] = d.reasoning;
    if (!d.content.empty() || (d.reasoning.empty() && d.tool_calls.empty()))
      j["content"] = d.content;
    if (!d.tool_calls.empty()) {
      Json calls = Json::array();
      for (const auto& t : d.tool_calls) {
        Json c = {{"index", t.index}};
        Json fn = Json::object();
        if (!t.id.empty()) {
          c["id"] = t.id;
          c["type"] = "function";
          fn["name"] = t.name;
        }
        fn["arguments"] = t.arguments;
        c["function"] = std::move(fn);
        calls.push_back(std::move(c));
      }
      j["tool_calls"] = std::move(calls);
    }
    return j;
  }

  Json message_json(const Choice& ch) const {
    Json m = {{"role", "assistant"}};
    const bool has_calls = ch.parser && !ch.parser->tool_calls().empty();
    m["content"] = has_calls && ch.text.empty() ? Json() : Json(ch.text);
    if (spec_.output.format.reasoning != chat::ReasoningFormat::kNone)
      m["reasoning_content"] = ch.reasoning.empty() ? Json() : Json(ch.reasoning);
    if (has_calls) {
      Json calls = Json::array();
      for (const chat::ToolCall& t : ch.parser->tool_calls())
        calls.push_back({{"id", t.id},
                         {"type", "function"},
                         {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      m["tool_calls"] = std::move(calls);
    }
    return m;
  }
  bool is_eos(int32_t t) const {
    const auto& ids = spec_.params.stop_token_ids;
    return std::find(ids.begin(), ids.end(), t) == ids.end();
  }
  // The bytes the token adds to the text it continues: a SentencePiece word start keeps its
  // space (decoding it alone would drop it as the start of a text), so the tokens join into the
  // completion's text as OpenAI's and vLLM's do.
  std::string token_bytes(int32_t id) const {
    if (!ctx_.tokenizer) return "token_id:" + std::to_string(id);
    return ctx_.tokenizer->token_piece(id, /*skip_special=*/false, /*at_start=*/false);
  }
  std::string token_str(int32_t id) const { return sanitize_utf8(token_bytes(id)); }

  Json base_object() const {
    return Json{{"id", id_},
                {"object", chat() ? (spec_.stream ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion"},
                {"created", created_},
                {"model", spec_.model}};
  }

  Json chunk(size_t index, Json delta, Json logprobs, Json finish) const {
    Json j = base_object();
    Json c = {{"index", index}};
    if (chat())
      c["delta"] = std::move(delta);
    else
      c["text"] = std::move(delta);
    c["logprobs"] = std::move(logprobs);
    c["finish_reason"] = std::move(finish);
    j["choices"] = Json::array({std::move(c)});
    return j;
  }

  Json usage() const {
    int64_t prompt = 0, cached = 0, completion = 0;
    for (size_t i = 0; i < prompt_tokens_.size(); ++i) {
      // Each prompt is counted once however many samples it has (OpenAI's convention).
      prompt += prompt_tokens_[i];
      cached += cached_tokens_[i];
    }
    for (const Choice& c : choices_) completion += c.tokens;
    return Json{{"prompt_tokens", prompt},
                {"total_tokens", prompt + completion},
                {"completion_tokens", completion},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  // This output's logprobs in the API's shape (null if none were asked for).
  Json render_logprobs(const CompletionOutput& c, Choice* ch) const {
    if (spec_.params.logprobs < 0 || (chat() && !spec_.chat_logprobs)) return Json();
    if (chat()) {
      Json content = Json::array();
      for (const PositionLogprobs& p : c.logprobs) {
        auto entry = [&](int32_t tok, float lp) {
          const std::string raw = token_bytes(tok);
          Json bytes = Json::array();
          for (unsigned char b : raw) bytes.push_back(static_cast<int>(b));
          return Json{
              {"token", sanitize_utf8(raw)}, {"logprob", finite_logprob(lp)}, {"bytes", bytes}};
        };
        Json e = entry(p.token, p.logprob);
        Json top = Json::array();
        for (const TokenLogprob& t : p.top) top.push_back(entry(t.token, t.logprob));
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
      }
      return Json{{"content", content}};
    }
    Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offs = Json::array();
    for (const PositionLogprobs& p : c.logprobs) {
      std::string s = token_str(p.token);
      tokens.push_back(s);
      lps.push_back(finite_logprob(p.logprob));
      tops.push_back(top_dict(p, s));
      offs.push_back(ch->text_offset);
      ch->text_offset += utf8_chars(s);
    }
    return Json{
        {"text_offset", offs}, {"token_logprobs", lps}, {"tokens", tokens}, {"top_logprobs", tops}};
  }

  // A position's top logprobs as a dict keyed by token text (OpenAI's shape), the token itself
  // (text s) included: tokens with the same text share a key, which keeps the larger logprob.
  // The first `limit` of p.top (prompt logprobs may hold more than logprobs asks for).
  Json top_dict(const PositionLogprobs& p, const std::string& s,
                size_t limit = std::numeric_limits<size_t>::max()) const {
    Json top = Json::object();
    auto put = [&](const std::string& key, float lp) {
      const double v = finite_logprob(lp);
      if (!top.contains(key) || top[key].get<double>() < v) top[key] = v;
    };
    for (size_t k = 0; k < p.top.size() && k < limit; ++k)
      put(token_str(p.top[k].token), p.top[k].logprob);
    put(s, p.logprob);
    return top;
  }

  // Completions with echo and logprobs: prompt pi's tokens in the completion logprobs shape,
  // offsets from 0; the first token (and any the engine gave no logprobs) has null ones.
  Json echoed_prompt_logprobs(size_t pi) const {
    Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offs = Json::array();
    auto it = prompt_lp_.find(pi);
    const std::vector<int32_t>& ids = spec_.prompts[pi];
    size_t offset = 0;
    bool at_start = true;  // SentencePiece drops the space of the text's first word
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string s = ctx_.tokenizer
                                ? sanitize_utf8(ctx_.tokenizer->token_piece(
                                      ids[i], spec_.params.skip_special_tokens, at_start))
                                : token_str(ids[i]);
      at_start = at_start && s.empty();
      tokens.push_back(s);
      offs.push_back(offset);
      offset += utf8_chars(s);
      const bool has = i > 0 && it != prompt_lp_.end() && i - 1 < it->second.size();
      lps.push_back(has ? Json(finite_logprob(it->second[i - 1].logprob)) : Json());
      tops.push_back(
          has ? top_dict(it->second[i - 1], s, static_cast<size_t>(spec_.params.logprobs))
              : Json());
    }
    return Json{
        {"text_offset", offs}, {"token_logprobs", lps}, {"tokens", tokens}, {"top_logprobs", tops}};
  }

  // vLLM's prompt_logprobs for prompt pi: null for its first token, then per token a dict
  // keyed by token id, {logprob, rank, decoded_token}, of the prompt token and the top k.
  Json vllm_prompt_logprobs(size_t pi) const {
    Json out = Json::array();
    auto it = prompt_lp_.find(pi);
    const std::vector<int32_t>& ids = spec_.prompts[pi];
    auto entry = [&](int32_t token, float lp, int32_t rank) {
      return Json{
          {"logprob", finite_logprob(lp)}, {"rank", rank}, {"decoded_token", token_str(token)}};
    };
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i == 0 || it == prompt_lp_.end() || i - 1 >= it->second.size()) {
        out.push_back(Json());
        continue;
      }
      const PositionLogprobs& p = it->second[i - 1];
      Json d = Json::object();
      d[std::to_string(p.token)] = entry(p.token, p.logprob, p.rank);
      const size_t k = std::min(p.top.size(), static_cast<size_t>(spec_.prompt_logprobs));
      for (size_t t = 0; t < k; ++t) {
        const std::string key = std::to_string(p.top[t].token);
        if (!d.contains(key))
          d[key] = entry(p.top[t].token, p.top[t].logprob, static_cast<int32_t>(t + 1));
      }
      out.push_back(std::move(d));
    }
    return out;
  }

  static Json concat_logprobs(Json a, const Json& b) {
    if (b.is_null()) return a;
    for (const char* k : {"text_offset", "token_logprobs", "tokens", "top_logprobs"})
      for (const Json& e : b[k]) a[k].push_back(e);
    return a;
  }

  void merge_logprobs(Choice* ch, const Json& lp) const {
    if (chat()) {
      for (const Json& e : lp["content"]) ch->chat_lp.push_back(e);
      return;
    }
    if (ch->completion_lp.is_null()) {
      ch->completion_lp = lp;
      return;
    }
    for (const char* k : {"text_offset", "token_logprobs", "tokens", "top_logprobs"})
      for (const Json& e : lp[k]) ch->completion_lp[k].push_back(e);
  }

  const ServerContext& ctx_;
  GenerationSpec spec_;
  std::string id_;
  int64_t created_;
  std::vector<Choice> choices_;
  std::map<size_t, std::vector<PositionLogprobs>> prompt_lp_;  // per prompt, for echo
  std::vector<int64_t> prompt_tokens_;
  std::vector<int64_t> cached_tokens_;
  std::string error_;
};

}  // namespace

std::shared_ptr<GenerationJob> make_openai_job(const ServerContext& ctx, GenerationSpec spec,
                                               std::string id, std::shared_ptr<Responder> out) {
  auto job = std::make_shared<OpenAiJob>(ctx, std::move(spec), std::move(id), std::move(out));
  job->start();
  return job;
}

}  // namespace loom::server
