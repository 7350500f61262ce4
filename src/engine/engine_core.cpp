#include "engine/engine_core.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "engine/kv_plan.h"
#include "engine/memory_plan.h"
#include "spec/mtp_proposer.h"
#include "spec/ngram_proposer.h"
#include "spec/spec_config.h"
#include "tools/model_spec.h"

namespace loom {
namespace {

// Request::accept_rng's streams: sequence i's is this plus i, apart from every rng stream.
constexpr uint64_t kAcceptanceStreams = uint64_t{1} << 63;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Result<std::unique_ptr<EngineCore>> EngineCore::create(std::unique_ptr<Model> model,
                                                       std::unique_ptr<Tokenizer> tokenizer,
                                                       const EngineConfig& config,
                                                       const std::string& model_spec) {
  if (!model) return invalid_argument("engine: no model");
  std::unique_ptr<EngineCore> e(new EngineCore());
  EngineConfig& c = e->config_;
  c = config;
  const ModelConfig& mc = model->config();
  LOOM_RETURN_IF_ERROR(resolve_engine_config(mc, c));
  LOOM_RETURN_IF_ERROR(spec::finalize_speculative_config(c.speculative, mc.n_mtp_layers));
  if (c.speculative.enabled())
    e->totals_.spec_accepted_per_pos.assign(c.speculative.num_speculative_tokens, 0);

  LOOM_ASSIGN_OR_RETURN(const KvPlan plan, plan_kv_cache(mc, c));
  if (!plan.warning.empty()) LOOM_LOG_WARN("%s", plan.warning.c_str());
  LOOM_ASSIGN_OR_RETURN(e->kv_, KvCache::create(mc, plan.layout, c.block_size, c.kv_dtype,
                                                model->weight_copies_made()));
  if (!c.commit_kv_in_background) e->kv_->wait_committed();
  e->kv_manager_ = std::make_unique<KvCoordinator>(plan.groups, c.block_size,
                                                   c.enable_prefix_caching, plan.states);
  if (c.speculative.method == SpeculativeConfig::Method::kDraftModel) {
    // The draft reads group 0's tables, which must cover every position (full attention).
    if (plan.groups[0].window != 0)
      return invalid_argument(
          "a draft model needs a target whose first KV group is full attention; this one "
          "slides a window there (use --disable-sliding-window)");
    std::unique_ptr<spec::DraftModelProposer> dm;
    if (draft_shares_target(model_spec, c.speculative)) {
      LOOM_ASSIGN_OR_RETURN(dm, spec::DraftModelProposer::create_sharing(
                                    *model, plan.groups[0].num_blocks, c.block_size, c.kv_dtype,
                                    c.max_num_seqs, c.speculative.num_speculative_tokens));
    } else {
      ModelLoadOptions lo;
      lo.n_threads = c.n_threads;
      lo.max_context = c.max_model_len;
      lo.thread_pool = &model->thread_pool();  // the draft runs between the target's steps
      LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Model> draft,
                            tools::load_model(c.speculative.model, lo));
      // Token texts compared as llama.cpp does where both models have a tokenizer.
      std::unique_ptr<Tokenizer> draft_tokenizer;
      if (tokenizer)
        if (auto t = tools::load_tokenizer(c.speculative.model); t.is_ok())
          draft_tokenizer = std::move(t).value();
      LOOM_RETURN_IF_ERROR(spec::check_draft_vocabulary(draft->config().n_vocab, mc.n_vocab,
                                                        draft_tokenizer.get(), tokenizer.get()));
      LOOM_ASSIGN_OR_RETURN(
          dm, spec::DraftModelProposer::create(
                  std::move(draft), mc.n_vocab, plan.groups[0].num_blocks, c.block_size, c.kv_dtype,
                  c.max_num_seqs, c.speculative.num_speculative_tokens));
    }
    e->draft_model_ = dm.get();
    e->proposer_ = std::move(dm);
    LOOM_LOG_INFO(
        "engine: draft model %s (%s, %d layers%s), its KV in the target's blocks: %.1f MiB",
        c.speculative.model.c_str(), e->draft_model_->model().config().arch.c_str(),
        e->draft_model_->model().config().n_layer,
        e->draft_model_->shares_target() ? ", the target itself: its weights shared" : "",
        static_cast<double>(e->draft_model_->kv_bytes()) / (1 << 20));
    // As vLLM: a draft with a shorter context proposes while it fits (propose_drafts).
    const int32_t draft_context = e->draft_model_->model().config().context_length;
    if (draft_context > 0 && draft_context < c.max_model_len) {
      e->draft_context_ = draft_context;
      LOOM_LOG_INFO(
          "engine: the draft model's context (%d) is shorter than max_model_len %d: no "
          "proposals for a sequence past it",
          draft_context, c.max_model_len);
    }
  } else if (c.speculative.method == SpeculativeConfig::Method::kMtp) {
    // The module's K/V follow group 0's tables, which must cover every position.
    if (plan.groups[0].window != 0)
      return invalid_argument(
          "MTP speculation needs a model whose first KV group is full attention");
    auto mtp =
        spec::MtpProposer::create(*model, plan.groups[0].num_blocks, c.block_size, c.kv_dtype);
    if (!mtp.is_ok())
      return Status(mtp.status().code(), "speculative method \"mtp\": " + mtp.status().message());
    LOOM_LOG_INFO(
        "engine: MTP proposer (the model's multi-token prediction layer 0 of %d), its "
        "KV in the target's blocks: %.1f MiB",
        mc.n_mtp_layers, static_cast<double>((*mtp)->kv_bytes()) / (1 << 20));
    e->proposer_ = std::move(*mtp);
  } else if (c.speculative.method == SpeculativeConfig::Method::kNgram) {
    e->proposer_ = std::make_unique<spec::NgramProposer>(c.speculative.prompt_lookup_min,
                                                         c.speculative.prompt_lookup_max);
    LOOM_LOG_INFO(
        "engine: n-gram proposer (prompt lookup of %d to %d tokens), up to %d proposals per "
        "step",
        c.speculative.prompt_lookup_min, c.speculative.prompt_lookup_max,
        c.speculative.num_speculative_tokens);
  }
  if (e->proposer_) e->proposer_->set_p_min(c.speculative.draft_p_min);
  if (e->proposer_ && e->proposer_->needs_hidden()) e->kv_manager_->set_hits_keep_last_block(false);
  // A draft model's or MTP module's K/V too: its pages would otherwise be committed during
  // the first steps, on the cores the forward passes run on.
  if (!c.commit_kv_in_background && e->proposer_) e->proposer_->wait_committed();
  e->scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{c.max_num_seqs, c.max_num_batched_tokens, c.shared_prefill_tokens,
                      kPromptLogprobsTokensPerStep, c.speculative.draft_min},
      *e->kv_manager_);

  // End of generation: the tokenizer's set (eos, eot/eom, <end_of_turn>, <|end|>, ...; see
  // tokenizer/end_of_generation.h) plus the model config's eos, so that <end_of_turn> stops
  // a Gemma chat turn although the file's EOS is <eos>.
  if (tokenizer) e->eog_ids_.assign(tokenizer->eog_ids().begin(), tokenizer->eog_ids().end());
  if (mc.eos_token >= 0) e->eog_ids_.push_back(mc.eos_token);
  std::sort(e->eog_ids_.begin(), e->eog_ids_.end());
  e->eog_ids_.erase(std::unique(e->eog_ids_.begin(), e->eog_ids_.end()), e->eog_ids_.end());
  e->model_ = std::move(model);
  e->tokenizer_ = std::move(tokenizer);
  // What one token costs in every layer's cache (a window's layers stop growing past it).
  const uint64_t kv_token_bytes =
      KvCache::bytes_per_block(mc, c.block_size, c.kv_dtype) / static_cast<uint64_t>(c.block_size);
  LOOM_LOG_INFO(
      "engine: KV cache %.1f MiB (%s, %llu bytes per token over %d layers), max_model_len %d, "
      "max_num_seqs %d, max_num_batched_tokens %d (prompts %d while shared), prefix caching %s",
      static_cast<double>(plan.bytes) / (1 << 20), std::string(dtype_name(c.kv_dtype)).c_str(),
      static_cast<unsigned long long>(kv_token_bytes), mc.n_layer, c.max_model_len, c.max_num_seqs,
      c.max_num_batched_tokens, c.shared_prefill_tokens, c.enable_prefix_caching ? "on" : "off");
  if (plan.states.num_slots > 0)
    LOOM_LOG_INFO(
        "engine: recurrent states: %.1f MiB per sequence, %d live slots + %d prefix snapshots "
        "(every %d blocks and at each sequence's newest block boundary) = %.1f MiB",
        static_cast<double>(plan.state_slot_bytes) / (1 << 20), c.max_num_seqs,
        plan.states.max_snapshots, plan.states.snapshot_every_blocks,
        static_cast<double>(plan.state_bytes) / (1 << 20));
  for (const KvGroupConfig& g : plan.groups) {
    if (g.latent)
      LOOM_LOG_INFO(
          "engine: KV group: %d MLA layers (one latent row of %d values per token), %d blocks "
          "of %d tokens",
          g.n_layers, mc.mla.latent_row(), g.num_blocks, c.block_size);
    else if (g.window == 0)
      LOOM_LOG_INFO("engine: KV group: %d full-attention layers, %d blocks of %d tokens",
                    g.n_layers, g.num_blocks, c.block_size);
    else
      LOOM_LOG_INFO(
          "engine: KV group: %d layers with a sliding window of %d tokens, %d blocks of %d "
          "tokens (blocks that fall out of a sequence's window are released as it grows)",
          g.n_layers, g.window, g.num_blocks, c.block_size);
  }
  return e;
}

Status EngineCore::validate(const GenerateRequest& req) const {
  if (req.request_id.empty()) return invalid_argument("request id must not be empty");
  const ModelConfig& mc = model_->config();
  if (req.prompt.empty()) return invalid_argument("the prompt must have at least one token");
  for (int32_t t : req.prompt)
    if (t < 0 || t >= mc.n_vocab)
      return invalid_argument("prompt token id " + std::to_string(t) +
                              " is outside the "
                              "vocabulary [0, " +
                              std::to_string(mc.n_vocab) + ")");
  if (req.pooling) return validate_pooling(req);
  LOOM_RETURN_IF_ERROR(req.params.validate(mc.n_vocab));
  if (req.params.grammar && req.params.grammar->vocab().size() != mc.n_vocab)
    return invalid_argument("the grammar was compiled for a vocabulary of " +
                            std::to_string(req.params.grammar->vocab().size()) +
                            " tokens, but the model has " + std::to_string(mc.n_vocab));
  if (!req.params.stop.empty() && !tokenizer_)
    return invalid_argument("stop strings need a tokenizer, and this model has none");
  const int64_t prompt_len = static_cast<int64_t>(req.prompt.size());
  const int64_t total = prompt_len + req.params.max_tokens;
  if (total > config_.max_model_len)
    return invalid_argument("prompt (" + std::to_string(prompt_len) + " tokens) + max_tokens (" +
                            std::to_string(req.params.max_tokens) + ") = " + std::to_string(total) +
                            " is over max_model_len " + std::to_string(config_.max_model_len) +
                            "; shorten the prompt or lower max_tokens");
  // The last sampled token is never run through the model, so it needs no KV slot.
  if (!kv_manager_->fits(total - 1, config_.max_num_batched_tokens))
    return invalid_argument(
        "prompt + max_tokens needs " + std::to_string(kv_manager_->blocks_for(total - 1)) +
        " KV blocks but the whole cache has " + std::to_string(kv_manager_->num_blocks()) +
        "; raise --kv-cache-memory or lower max_tokens");
  return Status::ok();
}

Status EngineCore::add_request(GenerateRequest req) {
  LOOM_RETURN_IF_ERROR(validate(req));
  if (groups_.count(req.request_id))
    return invalid_argument("request id '" + req.request_id + "' is already in use");
  const int64_t prompt_len = static_cast<int64_t>(req.prompt.size());
  auto g = std::make_unique<RequestGroup>();
  g->id = req.request_id;
  g->params = std::move(req.params);
  g->num_prompt_tokens = static_cast<int32_t>(prompt_len);
  g->priority = req.priority;
  g->arrival = std::chrono::steady_clock::now();
  const int32_t n = g->params.n;
  g->text.resize(n);
  g->pending.resize(n);
  g->dirty.assign(n, false);
  for (int32_t i = 0; i < n; ++i) {
    g->text[i] = std::make_unique<SeqTextState>(tokenizer_.get(), g->params);
    g->pending[i].index = i;
  }
  if (req.pooling) {
    g->pooling = std::move(req.pooling);
    g->pooler = std::make_unique<SeqPooler>(*g->pooling, model_->config().n_embd);
  }
  auto r = std::make_unique<Request>();
  // A cached position is never computed: mean / CLS pooling and prompt logprobs need them all.
  const bool prompt_logprobs = g->params.prompt_logprobs >= 0;
  r->skip_prefix_cache =
      prompt_logprobs || (g->pooling && g->pooling->mode != PoolingParams::Mode::kLast);
  r->prompt_needs_logits = prompt_logprobs;
  r->seq_id = next_seq_id_++;
  r->group = g.get();
  r->index = 0;
  r->tokens = std::move(req.prompt);
  r->num_prompt_tokens = g->num_prompt_tokens;
  r->priority = req.priority;
  r->cache_salt = req.cache_salt;
  r->arrival_order = next_arrival_++;
  r->rng = Rng::for_request(g->params.seed, 0);
  r->accept_rng = Rng::for_request(g->params.seed, kAcceptanceStreams);
  if (g->params.has_penalties()) r->penalties.add_prompt(r->tokens);
  if (g->params.grammar)
    r->matcher = std::make_unique<structured::GrammarMatcher>(g->params.grammar);
  scheduler_->add_waiting(r.get());
  g->seqs.push_back(std::move(r));
  totals_.prompt_tokens += prompt_len;
  groups_.emplace(g->id, std::move(g));
  return Status::ok();
}

void EngineCore::abort(const std::string& request_id) {
  auto it = groups_.find(request_id);
  if (it == groups_.end() || it->second->aborted) return;
  RequestGroup& g = *it->second;
  g.aborted = true;
  for (auto& r : g.seqs)
    if (!r->finished()) finish_seq(*r, FinishReason::kAbort);
  aborted_.push_back(request_id);
}

void EngineCore::finish_seq(Request& r, FinishReason reason) {
  RequestGroup& g = *r.group;
  if (defer_frees_) {
    scheduler_->remove(&r, /*free_blocks=*/false);
    deferred_frees_.push_back(r.seq_id);
  } else {
    scheduler_->remove(&r);  // frees its blocks now
    if (proposer_) proposer_->release(r.seq_id);
  }
  r.status = RequestStatus::kFinished;
  g.text[r.index]->flush();  // no-op after a stop string, which already fixed the text
  CompletionOutput& out = g.pending[r.index];
  out.finish_reason = reason;
  g.dirty[r.index] = true;
  ++g.num_finished;
  ++totals_.num_finished;
}

void EngineCore::build_batch(const SchedulerOutput& so) {
  batch_.clear();
  snapshots_.clear();
  for (const StateRestore& c : kv_manager_->take_state_restores())
    batch_.state_restores.push_back({c.src, c.dst});
  sample_seqs_.clear();
  sample_drafts_.clear();
  hidden_owner_.clear();
  pooling_logits_seqs_.clear();
  pooling_logits_batch_rows_.clear();
  prompt_lp_rows_.clear();
  for (const ScheduledSeq& s : so.seqs) {
    Request& r = *s.req;
    const std::vector<int32_t>& table = kv_manager_->block_table(r.seq_id);
    BatchSequence bs;
    bs.block_table = table.data();
    bs.n_blocks = static_cast<int32_t>(table.size());
    for (int g = 1; g < kv_manager_->num_groups(); ++g)
      bs.group_tables[g - 1] = kv_manager_->block_table(r.seq_id, g).data();
    bs.n_past = r.num_computed_tokens;
    bs.n_new = s.num_new + s.num_draft;
    bs.row_begin = batch_.n_rows();
    const int32_t seq_index = static_cast<int32_t>(batch_.sequences.size());
    if (kv_manager_->recurrent()) {
      bs.state_slot = kv_manager_->state_slot(r.seq_id);
      const size_t first = snapshots_.size();
      kv_manager_->plan_snapshots(r.seq_id, r.num_computed_tokens, s.num_new, r.num_tokens(),
                                  snapshots_);
      if (s.num_draft > 0)
        kv_manager_->plan_draft_snapshots(r.seq_id, std::span<const int32_t>(r.tokens),
                                          std::span<const int32_t>(r.draft.data(), s.num_draft),
                                          r.cache_salt, snapshots_);
      for (size_t k = first; k < snapshots_.size(); ++k)
        batch_.state_snapshots.push_back({seq_index, snapshots_[k].n_tokens, snapshots_[k].slot});
    }
    for (int32_t i = 0; i < s.num_new + s.num_draft; ++i) {
      const int32_t p = r.num_computed_tokens + i;
      batch_.tokens.push_back(i < s.num_new ? r.tokens[p] : r.draft[i - s.num_new]);
      batch_.pos.push_back(p);
      batch_.seq.push_back(seq_index);
    }
    batch_.sequences.push_back(bs);
    if (r.group->pooling) {
      add_pooling_rows(r, s.num_new);
      continue;
    }
    add_prompt_logprob_rows(r, bs.row_begin, s.num_new);
    // Only a sequence whose last known token runs now needs logits (one row, plus one per
    // proposal it verifies); a prompt chunk that stops short of the end needs none.
    if (r.num_computed_tokens + s.num_new == r.num_tokens()) {
      for (int32_t j = s.num_draft; j >= 0; --j)
        batch_.logits_rows.push_back(batch_.n_rows() - 1 - j);
      sample_seqs_.push_back(&r);
      sample_drafts_.push_back(s.num_draft);
    }
  }
  append_prompt_logprob_rows();
  append_pooling_logits_rows();  // last: collect_pooling counts them from the end
}

void EngineCore::start_masks() {
  mask_jobs_.clear();
  row_masks_.assign(sample_seqs_.size(), {});
  const size_t words = structured::bitmask_words(model_->config().n_vocab);
  size_t constrained = 0;
  for (const Request* r : sample_seqs_) constrained += r->matcher != nullptr;
  if (constrained == 0) return;
  if (masks_.size() < constrained * words) masks_.resize(constrained * words);
  size_t k = 0;
  for (size_t i = 0; i < sample_seqs_.size(); ++i) {
    Request& r = *sample_seqs_[i];
    if (!r.matcher) continue;
    std::span<uint32_t> m(masks_.data() + k++ * words, words);
    mask_jobs_.push_back({r.matcher.get(), m});
    row_masks_[i] = m;
  }
  mask_worker_.start(&mask_jobs_);
}

void EngineCore::accept_token(Request& r, const SampleOutput& s) {
  RequestGroup& g = *r.group;
  const SamplingParams& p = g.params;
  const int32_t token = s.token;
  r.tokens.push_back(token);
  if (p.has_penalties()) r.penalties.add_output(token);
  ++totals_.generation_tokens;
  CompletionOutput& out = g.pending[r.index];
  out.token_ids.push_back(token);
  if (s.has_logprobs) out.logprobs.push_back(s.logprobs);
  out.num_output_tokens = r.num_output_tokens();
  g.dirty[r.index] = true;
  if (r.matcher && !r.matcher->accept_token(token)) {
    // Cannot happen when the token was sampled under the matcher's own mask.
    LOOM_LOG_ERROR("request %s: token %d is outside its grammar", g.id.c_str(), token);
    finish_seq(r, FinishReason::kAbort);
    return;
  }

  // vLLM: token stops count from min_tokens outputs on, stop strings only after them.
  const bool past_min = r.num_output_tokens() >= p.min_tokens;
  const bool is_eog = !p.ignore_eos && std::binary_search(eog_ids_.begin(), eog_ids_.end(), token);
  if (past_min && is_eog) {
    out.stop_token = token;
    finish_seq(r, FinishReason::kStop);
    return;
  }
  if (past_min && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
                      p.stop_token_ids.end()) {
    out.stop_token = token;
    out.stop_reason = std::to_string(token);
    finish_seq(r, FinishReason::kStop);
    return;
  }
  if (auto stop = g.text[r.index]->add_token(token, r.num_output_tokens() > p.min_tokens)) {
    out.stop_reason = *stop;
    finish_seq(r, FinishReason::kStop);
    return;
  }
  // A complete document that nothing can extend: stop here, without waiting for EOS.
  if (r.matcher && r.matcher->is_terminated()) {
    finish_seq(r, FinishReason::kStop);
    return;
  }
  if (r.num_output_tokens() >= p.max_tokens || r.num_tokens() >= config_.max_model_len)
    finish_seq(r, FinishReason::kLength);
}

void EngineCore::fork_samples(Request& parent) {
  // The other samples share the prompt's full blocks (ref counts) and recompute only the
  // partial tail, which keeps one sequence's KV writes from touching another's blocks.
  RequestGroup& g = *parent.group;
  g.forked = true;
  const int32_t shared = (g.num_prompt_tokens - 1) / config_.block_size;
  for (int32_t i = 1; i < g.params.n; ++i) {
    auto c = std::make_unique<Request>();
    c->seq_id = next_seq_id_++;
    c->group = &g;
    c->index = i;
    c->tokens.assign(parent.tokens.begin(), parent.tokens.begin() + g.num_prompt_tokens);
    c->num_prompt_tokens = g.num_prompt_tokens;
    c->priority = parent.priority;
    c->cache_salt = parent.cache_salt;
    c->arrival_order = parent.arrival_order;
    c->ever_scheduled = true;
    c->num_cached_tokens = parent.num_cached_tokens;
    c->rng = Rng::for_request(g.params.seed, static_cast<uint64_t>(i));
    c->accept_rng = Rng::for_request(g.params.seed, kAcceptanceStreams + static_cast<uint64_t>(i));
    if (g.params.has_penalties()) c->penalties.add_prompt(c->tokens);
    if (g.params.grammar)
      c->matcher = std::make_unique<structured::GrammarMatcher>(g.params.grammar);
    const bool has_blocks =
        kv_manager_->has_blocks(parent.seq_id) &&
        static_cast<int32_t>(kv_manager_->block_table(parent.seq_id).size()) >= shared;
    // A sliding window may already have released a block the sample's first step reads; it
    // then starts over as a new sequence (its prompt mostly a prefix-cache hit).
    if (has_blocks && shared > 0 && kv_manager_->fork(parent.seq_id, c->seq_id, shared)) {
      c->num_computed_tokens = shared * config_.block_size;
      scheduler_->add_running(c.get());
    } else {
      scheduler_->add_waiting(c.get());
    }
    g.seqs.push_back(std::move(c));
  }
}

RequestOutput EngineCore::make_output(RequestGroup& g) {
  RequestOutput o;
  o.request_id = g.id;
  o.num_prompt_tokens = g.num_prompt_tokens;
  o.num_cached_tokens = g.seqs.front()->num_cached_tokens;
  o.finished = g.num_finished == g.params.n || g.aborted;
  o.queue_time_s = std::max(0.0, g.queue_time_s);
  o.time_to_first_token_s = g.ttft_s;
  o.elapsed_s = seconds_since(g.arrival);
  if (o.finished && !g.aborted) o.pooled = std::move(g.pooled);
  if (!g.aborted) take_prompt_logprobs(g, o);
  for (size_t i = 0; i < g.pending.size(); ++i) {
    if (!g.dirty[i]) continue;
    CompletionOutput& c = g.pending[i];
    c.text = g.text[i]->take_delta();
    o.outputs.push_back(std::move(c));
    c = CompletionOutput();
    c.index = static_cast<int32_t>(i);
    c.num_output_tokens = o.outputs.back().num_output_tokens;
    g.dirty[i] = false;
  }
  return o;
}

Result<std::vector<RequestOutput>> EngineCore::step() {
  std::vector<RequestOutput> outputs;
  for (const std::string& id : aborted_) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    outputs.push_back(make_output(*it->second));
    groups_.erase(it);
  }
  aborted_.clear();
  if (scheduler_->empty()) return outputs;

  const auto step_start = std::chrono::steady_clock::now();
  propose_drafts();
  totals_.spec_proposer_seconds += seconds_since(step_start);
  SchedulerOutput so = scheduler_->schedule();
  // A preempted sequence's proposer state goes with its blocks (a draft's state slot).
  if (proposer_)
    for (Request* r : so.preempted) proposer_->release(r->seq_id);
  if (so.seqs.empty()) return outputs;
  ++totals_.num_steps;
  bool runs_prompt = false;
  decoding_in_step_ = 0;
  for (const ScheduledSeq& s : so.seqs) {
    RequestGroup& g = *s.req->group;
    if (g.queue_time_s < 0) g.queue_time_s = seconds_since(g.arrival);
    const int32_t prompt_left = s.req->num_prompt_tokens - s.req->num_computed_tokens;
    if (prompt_left > 0) totals_.prompt_tokens_computed += std::min(prompt_left, s.num_new);
    runs_prompt = runs_prompt || prompt_left > 0;
    decoding_in_step_ += prompt_left <= 0;
  }
  const auto fill_start = std::chrono::steady_clock::now();
  Status ds = fill_drafts(so);
  totals_.spec_proposer_seconds += seconds_since(fill_start);
  if (!ds.is_ok()) {
    for (const ScheduledSeq& s : so.seqs)
      if (!s.req->group->aborted) abort(s.req->group->id);
    return Status(ds.code(), "speculative proposer failed: " + ds.message());
  }
  shorten_cut_drafts(so);
  build_batch(so);

  const int32_t n_vocab = model_->config().n_vocab;
  const size_t need = batch_.logits_rows.size() * static_cast<size_t>(n_vocab);
  if (logits_.size() < need) logits_.resize(need);
  const size_t need_hidden =
      batch_.hidden_rows.size() * static_cast<size_t>(model_->config().n_embd);
  if (hidden_.size() < need_hidden) hidden_.resize(need_hidden);
  const bool observes = proposer_ && proposer_->needs_hidden();
  if (observes && residual_.size() < static_cast<size_t>(batch_.n_rows()) * model_->config().n_embd)
    residual_.resize(static_cast<size_t>(batch_.n_rows()) * model_->config().n_embd);
  start_masks();  // overlaps the forward pass
  const auto forward_start = std::chrono::steady_clock::now();
  Status st = model_->forward(batch_, *kv_, logits_.data(), hidden_.data(),
                              observes ? residual_.data() : nullptr);
  totals_.forward_seconds += seconds_since(forward_start);
  mask_worker_.wait();
  if (!st.is_ok()) {
    kv_manager_->drop_snapshots(snapshots_);  // never written
    // Nothing sensible can continue for these sequences: fail them, free their blocks.
    for (const ScheduledSeq& s : so.seqs) {
      RequestGroup& g = *s.req->group;
      if (!g.aborted) abort(g.id);
    }
    return Status(st.code(), "forward pass failed: " + st.message());
  }
  for (const ScheduledSeq& s : so.seqs) s.req->num_computed_tokens += s.num_new;

  if (keep_logits_) {
    last_logits_.clear();
    last_drafts_.clear();
  }
  std::vector<RequestGroup*> touched;
  collect_pooling(so, touched);
  collect_prompt_logprobs();
  int32_t row = 0;
  int64_t emitted = 0;
  defer_frees_ = observes;
  for (size_t i = 0; i < sample_seqs_.size(); ++i) {
    Request& r = *sample_seqs_[i];
    const int32_t first_row = row;
    row += sample_drafts_[i] + 1;
    if (r.finished()) continue;  // its group was aborted earlier in this loop
    const int32_t had = r.num_output_tokens();
    if (keep_logits_ && sample_drafts_[i] > 0)
      last_drafts_.emplace_back(
          r.group->id, std::vector<int32_t>(r.draft.begin(), r.draft.begin() + sample_drafts_[i]));
    const int32_t kept = sample_rows(r, i, first_row, sample_drafts_[i]);
    emitted += r.num_output_tokens() - had;
    if (sample_drafts_[i] > 0) {
      // The proposals' K/V up to the last kept one stay; the rest is rolled back.
      r.draft.clear();
      r.draft_probs = {};
      if (!r.finished()) {
        r.num_computed_tokens += kept;
        kv_manager_->truncate(r.seq_id, r.num_computed_tokens);
      }
    }
    RequestGroup& g = *r.group;
    if (std::find(touched.begin(), touched.end(), &g) == touched.end()) touched.push_back(&g);
  }
  settle_draft_snapshots(so);
  if (observes) {
    const auto observe_start = std::chrono::steady_clock::now();
    Status os = observe_rows(so);
    totals_.spec_proposer_seconds += seconds_since(observe_start);
    defer_frees_ = false;
    for (const int64_t seq : deferred_frees_) {
      kv_manager_->free(seq);
      proposer_->release(seq);
    }
    deferred_frees_.clear();
    if (!os.is_ok()) {
      for (const ScheduledSeq& s : so.seqs)
        if (!s.req->group->aborted) abort(s.req->group->id);
      return Status(os.code(), "speculative proposer failed: " + os.message());
    }
  }
  if (!runs_prompt) {
    // The whole step, the proposers' own forward passes included: what proposals cost.
    const double step_s = seconds_since(step_start);
    step_cost_.observe(batch_.n_rows(), step_s);
    totals_.decode_step_seconds += step_s;
    totals_.decode_step_tokens += emitted;
  }
  for (RequestGroup* g : touched) {
    if (g->aborted) continue;  // its final output goes out with the aborts next step
    outputs.push_back(make_output(*g));
    if (outputs.back().finished) groups_.erase(g->id);
  }
  return outputs;
}

Status EngineCore::sample_row(Request& r, std::span<const float> row, int32_t j,
                              std::span<const int32_t> suppressed, std::span<const uint32_t> mask,
                              SampleOutput* out, bool* kept) {
  const SamplingParams& params = r.group->params;
  const PenaltyState* penalties = params.has_penalties() ? &r.penalties : nullptr;
  const size_t n_vocab = row.size();
  *kept = false;
  if (j < 0 || r.draft_probs.size() < (static_cast<size_t>(j) + 1) * n_vocab) {
    // A point-mass proposal is kept when the token sampled for its position is that proposal:
    // the rejection rule itself for q(d) = 1 (spec/rejection.h), the sampled token replacing a
    // rejected one.
    LOOM_RETURN_IF_ERROR(sampler_.sample(row, params, penalties, suppressed, r.rng, out, mask));
    *kept = j >= 0 && out->token == r.draft[j];
    return Status::ok();
  }
  LOOM_RETURN_IF_ERROR(
      sampler_.distribution(row, params, penalties, suppressed, &target_probs_, mask));
  const spec::Verdict v = accept_rule_(target_probs_, r.draft_probs.subspan(j * n_vocab, n_vocab),
                                       r.draft[j], r.accept_rng);
  if (v.token < 0 || (!v.accepted && !(target_probs_[v.token] > 0.0f)))
    return internal_error(
        "the rejection rule replaced a proposal with a token the target "
        "cannot sample");
  *kept = v.accepted;
  out->token = v.token;
  out->has_logprobs = params.logprobs >= 0;
  if (out->has_logprobs) sampler_.logprobs(row, v.token, params.logprobs, &out->logprobs);
  return Status::ok();
}

int32_t EngineCore::sample_rows(Request& r, size_t entry, int32_t first_row, int32_t num_draft) {
  RequestGroup& g = *r.group;
  const int32_t n_vocab = model_->config().n_vocab;
  int32_t kept = 0;
  bool last_kept = false;  // the loop ended on a kept proposal (the request finished there)
  for (int32_t j = 0; j <= num_draft && !r.finished(); ++j) {
    std::span<const float> row(logits_.data() + static_cast<size_t>(first_row + j) * n_vocab,
                               n_vocab);
    if (keep_logits_) last_logits_.emplace_back(g.id, std::vector<float>(row.begin(), row.end()));
    // The first row's mask was filled during the forward pass; a verify's later rows depend
    // on the tokens kept before them.
    std::span<const uint32_t> mask = row_masks_[entry];
    if (j > 0 && r.matcher) {
      verify_mask_.resize(structured::bitmask_words(n_vocab));
      r.matcher->fill_next_token_bitmask(verify_mask_);
      mask = verify_mask_;
    }
    min_tokens_suppressed_ids(g.params, eog_ids_, r.num_output_tokens(), &suppressed_);
    SampleOutput sample;
    bool draft_kept = false;
    Status ss = sample_row(r, row, j < num_draft ? j : -1, suppressed_, mask, &sample, &draft_kept);
    if (!ss.is_ok()) {
      LOOM_LOG_WARN("request %s: sampling failed: %s", g.id.c_str(), ss.message().c_str());
      abort(g.id);
      return kept;
    }
    if (g.ttft_s == 0.0) g.ttft_s = seconds_since(g.arrival);
    // Fork before accepting: the parent may finish on this token and free its blocks.
    if (r.num_output_tokens() == 0 && r.index == 0 && g.params.n > 1 && !g.forked) fork_samples(r);
    accept_token(r, sample);
    last_kept = false;
    if (j == num_draft || !draft_kept) break;
    ++kept;
    last_kept = true;
  }
  if (num_draft > 0) {
    // As vLLM counts them: what acceptance decided, before stop checks. A request that finished
    // on a kept proposal (a stop token or string) has its later proposals judged as well.
    const int32_t judged = last_kept ? judge_rest(r, entry, first_row, num_draft, kept) : kept;
    ++totals_.spec_num_drafts;
    totals_.spec_num_draft_tokens += num_draft;
    totals_.spec_num_accepted_tokens += judged;
    for (int32_t j = 0; j < judged; ++j) ++totals_.spec_accepted_per_pos[j];
    // The proposals' rows cost num_draft * row_share(n) of a step's tokens-worth of time in a
    // step of n decoding sequences (engine/step_cost.h): below that many kept tokens per
    // verify, proposing loses time.
    const float min_kept_avg =
        static_cast<float>(num_draft * step_cost_.row_share(std::max(decoding_in_step_, 1)));
    r.spec_kept_avg = r.spec_kept_avg < 0
                          ? static_cast<float>(kept)
                          : 0.7f * r.spec_kept_avg + 0.3f * static_cast<float>(kept);
    const double share = static_cast<double>(judged) / num_draft;
    spec_accepted_share_ =
        spec_accepted_share_ < 0 ? share : 0.95 * spec_accepted_share_ + 0.05 * share;
    if (r.spec_kept_avg < min_kept_avg && !config_.speculative.always_propose) {
      // While the proposals of all sequences do not pay either, straight to the longest pause.
      const bool none_pay = spec_accepted_share_ < min_kept_avg / num_draft;
      r.spec_backoff = none_pay ? kMaxSpecBackoff : r.spec_backoff_next;
      r.spec_backoff_next = std::min(2 * r.spec_backoff, kMaxSpecBackoff);
      r.spec_kept_avg = min_kept_avg;  // the next verify after the pause decides again
    } else {
      r.spec_backoff_next = 1;
    }
  }
  return kept;
}

EngineMetrics EngineCore::metrics() const {
  EngineMetrics m = totals_;
  m.num_running = scheduler_->num_running();
  m.num_waiting = scheduler_->num_waiting();
  m.kv_cache_usage = kv_manager_->usage();
  m.num_kv_blocks = kv_manager_->num_blocks();
  m.kv_cache_bytes = kv_->bytes();
  m.state_cache_bytes = kv_->state_bytes();
  for (int g = 0; g < kv_manager_->num_groups(); ++g) {
    const KvGroupManager& gm = kv_manager_->group(g);
    m.kv_groups.push_back(
        {gm.window(), gm.num_blocks(), gm.num_used_blocks(), gm.num_window_released_blocks()});
  }
  m.prefix_cache_queries = kv_manager_->prefix_query_tokens();
  m.prefix_cache_hits = kv_manager_->prefix_hit_tokens();
  m.num_preemptions = scheduler_->num_preemptions();
  m.num_state_slots_live = kv_manager_->states().num_live();
  m.num_state_snapshots = kv_manager_->states().num_snapshots();
  m.state_snapshots_taken = kv_manager_->states().num_snapshots_taken();
  if (proposer_) m.spec_draft_seconds = proposer_->seconds();
  return m;
}

std::string EngineCore::check_kv_drained() const {
  return kv_manager_->check_drained();
}

}  // namespace loom
