#include "spec/mtp_proposer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "spec/sampled_proposal.h"

namespace loom::spec {
Result<std::unique_ptr<MtpProposer>> MtpProposer::create(Model& target, int32_t num_blocks,
                                                         int32_t block_size, Dtype kv_dtype) {
  const ModelConfig& tc = target.config();
  if (tc.n_mtp_layers < 1)
    return invalid_argument("the model (" + tc.arch +
                            ") has no multi-token prediction (MTP / nextn) layers to propose with");
  std::unique_ptr<MtpProposer> p(new MtpProposer());
  LOOM_ASSIGN_OR_RETURN(p->module_, target.mtp_module(0));
  const ModelConfig& c = p->module_->config();
  LOOM_ASSIGN_OR_RETURN(p->kv_, KvCache::create(c, num_blocks, block_size, kv_dtype));
  p->kv_bytes_ =
      static_cast<size_t>(num_blocks) * KvCache::bytes_per_block(c, block_size, kv_dtype);
  return p;
}

Status MtpProposer::run() {
  const ModelConfig& c = module_->config();
  const size_t need_logits = batch_.logits_rows.size() * static_cast<size_t>(c.n_vocab);
  if (logits_.size() < need_logits) logits_.resize(need_logits);
  const size_t need_hidden = static_cast<size_t>(batch_.n_rows()) * c.n_embd;
  if (out_hidden_.size() < need_hidden) out_hidden_.resize(need_hidden);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = module_->forward(batch_, *kv_, logits_.data(), nullptr, out_hidden_.data());
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rows_run_ += batch_.n_rows();
  return st;
}

Status MtpProposer::observe(std::span<const ObservedSeq> seqs) {
  const ModelConfig& c = module_->config();
  const int64_t E = c.n_embd;
  batch_.clear();
  live_.clear();
  for (size_t i = 0; i < seqs.size(); ++i) {
    const ObservedSeq& s = seqs[i];
    if (s.n_rows <= 0) continue;
    BatchSequence bs;
    bs.block_table = s.block_table;
    bs.n_blocks = s.n_blocks;
    bs.n_past = s.first_pos;
    bs.n_new = s.n_rows;
    bs.row_begin = batch_.n_rows();
    const int32_t seq_index = static_cast<int32_t>(batch_.sequences.size());
    batch_.sequences.push_back(bs);
    // Row p pairs the target's h_p with the token after it.
    for (int32_t r = 0; r < s.n_rows; ++r) {
      const int32_t p = s.first_pos + r;
      batch_.tokens.push_back(s.tokens[p + 1]);
      batch_.pos.push_back(p);
      batch_.seq.push_back(seq_index);
    }
    batch_.prev_hidden.insert(batch_.prev_hidden.end(), s.hidden, s.hidden + s.n_rows * E);
    if (s.proposal) {
      batch_.logits_rows.push_back(batch_.n_rows() - 1);
      live_.push_back(i);
    }
  }
  if (batch_.n_rows() == 0) return Status::ok();
  LOOM_RETURN_IF_ERROR(run());
  for (size_t j = 0; j < live_.size(); ++j) {
    const ObservedSeq& s = seqs[live_[j]];
    HiddenProposal& hp = *s.proposal;
    hp.at_tokens = static_cast<int32_t>(s.tokens.size());
    const std::span<const float> row(logits_.data() + j * c.n_vocab,
                                     static_cast<size_t>(c.n_vocab));
    hp.unsure = unsure(row);
    if (s.sampling)
      hp.q.resize(c.n_vocab);
    else
      hp.q.clear();
    hp.token = propose_from_logits(sampler_, row, s.sampling, s.rng, hp.q);
    const float* h = &out_hidden_[static_cast<size_t>(batch_.logits_rows[j]) * E];
    hp.hidden.assign(h, h + E);
  }
  return Status::ok();
}

Status MtpProposer::fill(std::span<DraftSeq> seqs) {
  const ModelConfig& c = module_->config();
  const int64_t E = c.n_embd;
  int32_t k_max = 0;
  for (DraftSeq& s : seqs) {
    const HiddenProposal* hp = s.hidden_proposal;
    // The engine plans only sequences with a current proposal; without one, the placeholders
    // stay (the verify then keeps none of them).
    if (!hp || hp->at_tokens != static_cast<int32_t>(s.tokens.size())) continue;
    if (hp->unsure) {
      s.draft->clear();
      continue;
    }
    (*s.draft)[0] = hp->token;
    if (s.sampling) {
      // The first proposal's q is observe()'s; one it drew as a point mass (the request's
      // sampling was not known then) is one here too.
      if (hp->q.size() == static_cast<size_t>(c.n_vocab)) {
        std::copy(hp->q.begin(), hp->q.end(), s.draft_probs);
      } else {
        std::fill(s.draft_probs, s.draft_probs + c.n_vocab, 0.0f);
        s.draft_probs[hp->token] = 1.0f;
      }
    }
    k_max = std::max(k_max, static_cast<int32_t>(s.draft->size()));
  }
  // Proposal j (j >= 1): a module step at position n - 2 + j on proposal j - 1 and the
  // previous step's output state, n the sequence's known tokens.
  std::vector<float>& chain = chain_hidden_;
  for (int32_t j = 1; j < k_max; ++j) {
    batch_.clear();
    live_.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const DraftSeq& s = seqs[i];
      const HiddenProposal* hp = s.hidden_proposal;
      if (static_cast<int32_t>(s.draft->size()) <= j || !hp ||
          hp->at_tokens != static_cast<int32_t>(s.tokens.size()))
        continue;
      const int32_t pos = static_cast<int32_t>(s.tokens.size()) - 2 + j;
      BatchSequence bs;
      bs.block_table = s.block_table;
      bs.n_blocks = s.n_blocks;
      bs.n_past = pos;
      bs.n_new = 1;
      bs.row_begin = batch_.n_rows();
      batch_.sequences.push_back(bs);
      batch_.tokens.push_back((*s.draft)[j - 1]);
      batch_.pos.push_back(pos);
      batch_.seq.push_back(static_cast<int32_t>(batch_.sequences.size()) - 1);
      batch_.logits_rows.push_back(batch_.n_rows() - 1);
      // The state to chain on: observe()'s for the first step, the previous step's after.
      const float* h = j == 1 ? hp->hidden.data() : &chain[i * E];
      batch_.prev_hidden.insert(batch_.prev_hidden.end(), h, h + E);
      live_.push_back(i);
    }
    if (live_.empty()) break;
    LOOM_RETURN_IF_ERROR(run());
    if (chain.size() < seqs.size() * E) chain.resize(seqs.size() * E);
    for (size_t r = 0; r < live_.size(); ++r) {
      DraftSeq& s = seqs[live_[r]];
      const std::span<const float> row(logits_.data() + r * c.n_vocab,
                                       static_cast<size_t>(c.n_vocab));
      std::memcpy(&chain[live_[r] * E], &out_hidden_[r * E], E * sizeof(float));
      if (unsure(row)) {
        s.draft->resize(j);  // the proposals before this row stand
        continue;
      }
      (*s.draft)[j] = propose_from_logits(
          sampler_, row, s.sampling, s.rng,
          s.sampling ? std::span<float>(s.draft_probs + static_cast<size_t>(j) * c.n_vocab,
                                        static_cast<size_t>(c.n_vocab))
                     : std::span<float>());
    }
  }
  return Status::ok();
}

}  // namespace loom::spec
