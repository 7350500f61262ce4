#include "spec/draft_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "spec/sampled_proposal.h"

namespace loom::spec {
namespace {

// A token's text for a message: quoted, control bytes escaped.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if (b < 0x20 || b == 0x7f || ch == '"' || ch == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

Status check_draft_vocabulary(int32_t draft_vocab, int32_t target_vocab,
                              const Tokenizer* draft_tokenizer, const Tokenizer* target_tokenizer) {
  if (std::abs(draft_vocab - target_vocab) > kMaxDraftVocabDifference)
    return invalid_argument("the draft model's vocabulary has " + std::to_string(draft_vocab) +
                            " tokens but the target's has " + std::to_string(target_vocab) +
                            " (more than " + std::to_string(kMaxDraftVocabDifference) +
                            " apart); a draft model must share the target's vocabulary");
  if (!draft_tokenizer || !target_tokenizer) return Status::ok();
  const int32_t n = std::min(
      {draft_vocab, target_vocab, draft_tokenizer->n_vocab(), target_tokenizer->n_vocab()});
  for (int32_t id = kFirstComparedToken; id < n; ++id) {
    const std::string t = target_tokenizer->token_text(id);
    const std::string d = draft_tokenizer->token_text(id);
    if (t != d)
      return invalid_argument("the draft model's vocabulary differs from the target's at token " +
                              std::to_string(id) + ": the target's is " + quoted(t) +
                              ", the draft's " + quoted(d) +
                              "; a draft model must share the target's vocabulary");
  }
  return Status::ok();
}

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::create(
    std::unique_ptr<Model> draft, int32_t target_vocab, int32_t num_blocks, int32_t block_size,
    Dtype kv_dtype, int32_t max_seqs, int32_t k) {
  if (!draft) return invalid_argument("draft model: none given");
  LOOM_RETURN_IF_ERROR(check_draft_vocabulary(draft->config().n_vocab, target_vocab));
  Model& m = *draft;
  return make(m, std::move(draft), target_vocab, num_blocks, block_size, kv_dtype, max_seqs, k);
}

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::create_sharing(
    Model& target, int32_t num_blocks, int32_t block_size, Dtype kv_dtype, int32_t max_seqs,
    int32_t k) {
  return make(target, nullptr, target.config().n_vocab, num_blocks, block_size, kv_dtype, max_seqs,
              k);
}

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::make(
    Model& draft, std::unique_ptr<Model> owned, int32_t target_vocab, int32_t num_blocks,
    int32_t block_size, Dtype kv_dtype, int32_t max_seqs, int32_t k) {
  const ModelConfig& c = draft.config();
  std::unique_ptr<DraftModelProposer> p(new DraftModelProposer());
  KvLayout layout = KvLayout::single(c.n_layer, num_blocks);
  if (KvCache::state_bytes_per_slot(c) > 0) {
    if (Status st = KvCache::check_state_rollback(c, k); !st.is_ok())
      return Status(st.code(), "draft model: " + st.message());
    if (block_size % kRecurrentChunk != 0)
      return invalid_argument("a draft model with recurrent layers (" + c.arch +
                              ") needs a block size that is a multiple of " +
                              std::to_string(kRecurrentChunk));
    layout.num_state_slots = max_seqs;
    layout.state_rollback_tokens = k;
    p->rollback_ = k;
    p->state_end_.assign(max_seqs, 0);
    for (int32_t slot = max_seqs - 1; slot >= 0; --slot) p->free_slots_.push_back(slot);
  }
  LOOM_ASSIGN_OR_RETURN(p->kv_, KvCache::create(c, layout, block_size, kv_dtype));
  p->kv_bytes_ =
      static_cast<size_t>(num_blocks) * KvCache::bytes_per_block(c, block_size, kv_dtype) +
      static_cast<size_t>(layout.num_state_slots) * KvCache::state_bytes_per_slot(c, k);
  p->owned_ = std::move(owned);
  p->model_ = &draft;
  p->target_vocab_ = target_vocab;
  return p;
}

Status DraftModelProposer::run(std::vector<float>& logits) {
  const size_t need = batch_.logits_rows.size() * static_cast<size_t>(model_->config().n_vocab);
  if (logits.size() < need) logits.resize(need);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = model_->forward(batch_, *kv_, logits.data());
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

bool DraftModelProposer::reserve(int64_t seq_id) {
  if (rollback_ == 0 || slot_of_.contains(seq_id)) return true;
  if (free_slots_.empty()) return false;
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  slot_of_.emplace(seq_id, slot);
  state_end_[slot] = 0;  // a fresh state: the first round starts at position 0
  return true;
}

int32_t DraftModelProposer::state_slot(int64_t seq_id, int32_t& from) {
  auto it = slot_of_.find(seq_id);
  LOOM_CHECK(it != slot_of_.end());  // plan() follows a successful reserve()
  const int32_t end = state_end_[it->second];
  if (from > end || end - from > rollback_) from = 0;
  return it->second;
}

void DraftModelProposer::release(int64_t seq_id) {
  auto it = slot_of_.find(seq_id);
  if (it == slot_of_.end()) return;
  free_slots_.push_back(it->second);
  slot_of_.erase(it);
}

int32_t DraftModelProposer::propose(DraftSeq& s, int32_t j, const float* row) {
  // A padded draft vocabulary's last rows are no tokens of the target: never proposed (the
  // target's verify could not even embed them).
  const int32_t n_propose = std::min(model_->config().n_vocab, target_vocab_);
  std::span<float> q_row;
  if (s.sampling)
    q_row = {s.draft_probs + static_cast<size_t>(j) * target_vocab_,
             static_cast<size_t>(target_vocab_)};
  return propose_from_logits(sampler_, {row, static_cast<size_t>(n_propose)}, s.sampling, s.rng,
                             q_row);
}

Status DraftModelProposer::fill(std::span<DraftSeq> seqs) {
  if (seqs.empty()) return Status::ok();
  const int32_t n_vocab = model_->config().n_vocab;
  // The rows' tokens the draft may propose (propose()), over which --spec-draft-p-min judges it.
  const size_t n_propose = static_cast<size_t>(std::min(n_vocab, target_vocab_));
  const bool recurrent = rollback_ > 0;
  std::vector<int32_t>& slots = slots_;
  slots.assign(seqs.size(), -1);
  auto add_sequence = [&](size_t i, int32_t n_past, int32_t n_new) {
    const DraftSeq& s = seqs[i];
    BatchSequence bs;
    bs.block_table = s.block_table;
    bs.n_blocks = s.n_blocks;
    bs.n_past = n_past;
    bs.n_new = n_new;
    bs.row_begin = batch_.n_rows();
    if (recurrent) {
      bs.state_slot = slots[i];
      state_end_[slots[i]] = n_past + n_new;
    }
    batch_.sequences.push_back(bs);
  };
  // Step 1: every token without draft K/V, the last known one included; its logits give the
  // first proposal.
  batch_.clear();
  for (const DraftSeq& s : seqs) {
    const int32_t len = static_cast<int32_t>(s.tokens.size());
    int32_t from = std::min(*s.draft_computed, len - 1);
    if (recurrent) slots[&s - seqs.data()] = state_slot(s.seq_id, from);
    add_sequence(&s - seqs.data(), from, len - from);
    const int32_t seq_index = static_cast<int32_t>(batch_.sequences.size()) - 1;
    for (int32_t p = from; p < len; ++p) {
      // A padded target's token past the draft's vocabulary: any valid id (the draft's guesses
      // after it may be worse; the verify keeps outputs exact).
      batch_.tokens.push_back(s.tokens[p] < n_vocab ? s.tokens[p] : 0);
      batch_.pos.push_back(p);
      batch_.seq.push_back(seq_index);
    }
    batch_.logits_rows.push_back(batch_.n_rows() - 1);
  }
  LOOM_RETURN_IF_ERROR(run(logits_));
  int32_t k_max = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    DraftSeq& s = seqs[i];
    *s.draft_computed = static_cast<int32_t>(s.tokens.size());
    const float* row = logits_.data() + i * n_vocab;
    if (unsure({row, n_propose}))
      s.draft->clear();
    else
      (*s.draft)[0] = propose(s, 0, row);
    k_max = std::max(k_max, static_cast<int32_t>(s.draft->size()));
  }
  // Steps 2..k: one token per sequence that still proposes, at the positions after the last
  // known token (lookahead slots; their K/V are rolled back with the target's).
  std::vector<size_t> live;
  for (int32_t j = 1; j < k_max; ++j) {
    batch_.clear();
    live.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const DraftSeq& s = seqs[i];
      if (static_cast<int32_t>(s.draft->size()) <= j) continue;
      const int32_t pos = static_cast<int32_t>(s.tokens.size()) - 1 + j;
      add_sequence(i, pos, 1);
      batch_.tokens.push_back((*s.draft)[j - 1]);
      batch_.pos.push_back(pos);
      batch_.seq.push_back(static_cast<int32_t>(batch_.sequences.size()) - 1);
      batch_.logits_rows.push_back(batch_.n_rows() - 1);
      live.push_back(i);
    }
    LOOM_RETURN_IF_ERROR(run(logits_));
    for (size_t r = 0; r < live.size(); ++r) {
      DraftSeq& s = seqs[live[r]];
      const float* row = logits_.data() + r * n_vocab;
      if (unsure({row, n_propose}))
        s.draft->resize(j);  // the proposals before this row stand
      else
        (*s.draft)[j] = propose(s, j, row);
    }
  }
  return Status::ok();
}

}  // namespace loom::spec
