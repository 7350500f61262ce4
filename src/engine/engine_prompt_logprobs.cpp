// EngineCore's prompt logprobs (SamplingParams::prompt_logprobs, vLLM's): the logprob of each
// prompt token given the ones before it, from the logits of the rows that compute the prompt.
// Those rows need the model's logits as no other prompt row does: they follow the sampled rows
// (and precede the pooling ones) in the step's logits rows. The request reads no prefix cache
// (a cached position is never computed) and the prompts of all such requests in a step add up
// to at most kPromptLogprobsTokensPerStep tokens (the scheduler's prompt_logits_tokens), so a
// step's logits stay within that many rows of the vocabulary beyond the sampled ones, what the
// memory plan counts; a preempted request recomputing its prompt adds no row twice.
#include "engine/engine_core.h"

namespace loom {

void EngineCore::add_prompt_logprob_rows(Request& r, int32_t first_row, int32_t num_new) {
  RequestGroup& g = *r.group;
  if (g.params.prompt_logprobs < 0 || r.index != 0) return;
  // Row p gives the logprob of prompt token p + 1; the positions done so far are in order.
  int32_t next = static_cast<int32_t>(g.prompt_logprobs.size());
  for (const PromptLogprobRow& q : prompt_lp_rows_) next += q.req == &r;
  for (int32_t i = 0; i < num_new; ++i) {
    const int32_t pos = r.num_computed_tokens + i;
    if (pos != next || pos + 1 >= r.num_prompt_tokens) continue;
    prompt_lp_rows_.push_back({&r, first_row + i, r.tokens[pos + 1]});
    ++next;
  }
}

void EngineCore::append_prompt_logprob_rows() {
  prompt_lp_first_ = batch_.logits_rows.size();
  for (const PromptLogprobRow& q : prompt_lp_rows_) batch_.logits_rows.push_back(q.batch_row);
}

void EngineCore::collect_prompt_logprobs() {
  const size_t n_vocab = static_cast<size_t>(model_->config().n_vocab);
  for (size_t k = 0; k < prompt_lp_rows_.size(); ++k) {
    const PromptLogprobRow& q = prompt_lp_rows_[k];
    if (q.req->finished()) continue;
    RequestGroup& g = *q.req->group;
    std::span<const float> row(logits_.data() + (prompt_lp_first_ + k) * n_vocab, n_vocab);
    PositionLogprobs& lp = g.prompt_logprobs.emplace_back();
    sampler_.logprobs(row, q.token, g.params.prompt_logprobs, &lp);
  }
}

void EngineCore::take_prompt_logprobs(RequestGroup& g, RequestOutput& o) {
  if (g.params.prompt_logprobs < 0 || g.prompt_logprobs_sent) return;
  if (static_cast<int32_t>(g.prompt_logprobs.size()) < g.num_prompt_tokens - 1) return;
  o.prompt_logprobs = std::move(g.prompt_logprobs);
  g.prompt_logprobs_sent = true;
}

}  // namespace loom
