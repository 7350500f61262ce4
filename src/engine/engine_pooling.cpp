// EngineCore's pooling requests (embeddings and scores): their rows in a step's batch, and
// what the forward pass gave them. A pooling request is a sequence like any other for the
// scheduler and the KV cache (chunked, preempted, batched with generating ones); it only
// never samples, and finishes in the step that computes its last prompt token.
#include <algorithm>

#include "engine/engine_core.h"

namespace loom {

Status EngineCore::validate_pooling(const GenerateRequest& req) const {
  const ModelConfig& mc = model_->config();
  const PoolingParams& p = *req.pooling;
  if (req.params.n != 1) return invalid_argument("a pooling request has one sample (n = 1)");
  for (int32_t t : p.logit_tokens)
    if (t < 0 || t >= mc.n_vocab)
      return invalid_argument("pooling: logit token id " + std::to_string(t) +
                              " is outside the vocabulary [0, " + std::to_string(mc.n_vocab) + ")");
  if (p.classify && mc.n_cls_out <= 0)
    return invalid_argument("this model has no classifier head (cls.output.weight)");
  if ((p.classify || !p.logit_tokens.empty()) && p.mode != PoolingParams::Mode::kLast)
    return invalid_argument("scoring reads the last token: pooling mode must be last");
  const int64_t len = static_cast<int64_t>(req.prompt.size());
  if (len > config_.max_model_len)
    return invalid_argument("input (" + std::to_string(len) + " tokens) is over max_model_len " +
                            std::to_string(config_.max_model_len));
  // Every prompt token runs through the model, so each needs a KV slot.
  if (!kv_manager_->fits(len, config_.max_num_batched_tokens))
    return invalid_argument("input needs " + std::to_string(kv_manager_->blocks_for(len)) +
                            " KV blocks but the whole cache has " +
                            std::to_string(kv_manager_->num_blocks()) +
                            "; raise --kv-cache-memory");
  return Status::ok();
}

void EngineCore::add_pooling_rows(Request& r, int32_t num_new) {
  RequestGroup& g = *r.group;
  const int32_t first_row = batch_.n_rows() - num_new;
  const bool hidden = g.pooling->logit_tokens.empty();
  for (int32_t i = 0; i < num_new; ++i) {
    const int32_t pos = r.num_computed_tokens + i;
    if (hidden && g.pooler->wants(pos, r.num_tokens())) {
      batch_.hidden_rows.push_back(first_row + i);
      hidden_owner_.push_back({&r, pos});
    }
  }
  if (!hidden && r.num_computed_tokens + num_new == r.num_tokens()) {
    pooling_logits_seqs_.push_back(&r);
    pooling_logits_batch_rows_.push_back(batch_.n_rows() - 1);
  }
}

void EngineCore::append_pooling_logits_rows() {
  // After every sampled row, so the sampling loop's row numbers are unchanged.
  for (int32_t row : pooling_logits_batch_rows_) batch_.logits_rows.push_back(row);
}

void EngineCore::collect_pooling(const SchedulerOutput& so, std::vector<RequestGroup*>& touched) {
  const ModelConfig& mc = model_->config();
  const size_t E = static_cast<size_t>(mc.n_embd);
  for (size_t k = 0; k < hidden_owner_.size(); ++k) {
    const HiddenRow& h = hidden_owner_[k];
    if (h.req->finished()) continue;
    h.req->group->pooler->add(h.pos, std::span<const float>(hidden_.data() + k * E, E));
  }
  // The scores read from logits: rows after the sampled ones.
  const size_t first_logits_row = batch_.logits_rows.size() - pooling_logits_seqs_.size();
  for (size_t k = 0; k < pooling_logits_seqs_.size(); ++k) {
    Request& r = *pooling_logits_seqs_[k];
    if (r.finished()) continue;
    const float* row = logits_.data() + (first_logits_row + k) * static_cast<size_t>(mc.n_vocab);
    std::vector<float>& out = r.group->pooled;
    out.clear();
    for (int32_t t : r.group->pooling->logit_tokens) out.push_back(row[t]);
  }
  // Sequences whose prompt went through in this step finish now.
  for (const ScheduledSeq& s : so.seqs) {
    Request* r = s.req;
    if (!r->group->pooling) continue;
    RequestGroup& g = *r->group;
    if (r->finished() || r->num_computed_tokens < r->num_tokens()) continue;
    if (g.pooling->logit_tokens.empty()) {
      g.pooled = g.pooler->finish(r->num_tokens());
      if (g.pooling->classify) {
        std::vector<float> scores(static_cast<size_t>(mc.n_cls_out));
        if (!model_->classify(g.pooled.data(), scores.data()).is_ok()) {
          abort(g.id);  // validate_pooling checked for the head: cannot happen
          continue;
        }
        g.pooled = std::move(scores);
      }
    }
    if (g.ttft_s == 0.0)
      g.ttft_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - g.arrival).count();
    finish_seq(*r, FinishReason::kStop);
    if (std::find(touched.begin(), touched.end(), &g) == touched.end()) touched.push_back(&g);
  }
}

}  // namespace loom
