// TokenVocab: a model's tokens as bytes, sorted once for the grammar engine's vocabulary walks.
#include <algorithm>

#include "loom/tokenizer.h"
#include "structured/table_store.h"
#include "structured/vocab_index.h"

namespace loom::structured {

namespace {

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

}  // namespace

TokenVocab::~TokenVocab() = default;

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tokenizer,
                                                             int32_t n_vocab) {
  const int32_t n_tok = tokenizer.n_vocab();
  const int32_t n = std::max(n_vocab, n_tok);
  std::vector<std::string> bytes(n);
  std::vector<bool> special(n, false);
  std::vector<int32_t> eos;
  for (int32_t id = 0; id < n_tok; ++id) {
    if (tokenizer.is_control(id)) {
      special[id] = true;
      bytes[id] = tokenizer.token_text(id);
    } else {
      bytes[id] = tokenizer.token_piece(id, /*skip_special=*/false, /*at_start=*/false);
    }
    if (tokenizer.is_eog(id)) eos.push_back(id);
  }
  // Ids past the tokenizer (padding rows of the output layer) keep no bytes: never allowed.
  if (n_vocab < n_tok) {  // a model narrower than its tokenizer: the logits width wins
    bytes.resize(n_vocab);
    special.resize(n_vocab);
    std::erase_if(eos, [&](int32_t id) { return id >= n_vocab; });
  }
  auto vocab = from_tokens(std::move(bytes), std::move(special), std::move(eos));
  // A model's vocabulary is made once per process and nearly every constrained request is
  // JSON: build the JSON tables now rather than in the first request's time to first token.
  prewarm_json_tables(vocab);
  return vocab;
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokens(std::vector<std::string> bytes,
                                                          std::vector<bool> special,
                                                          std::vector<int32_t> eos) {
  std::shared_ptr<TokenVocab> v(new TokenVocab());
  v->impl_ = std::make_unique<Impl>();
  Impl& m = *v->impl_;
  const int32_t n = static_cast<int32_t>(bytes.size());
  m.bytes = std::move(bytes);
  m.special.assign(n, 0);
  m.eos.assign(n, 0);
  for (int32_t i = 0; i < n && i < static_cast<int32_t>(special.size()); ++i)
    m.special[i] = special[i];
  for (int32_t id : eos)
    if (id >= 0 && id < n && !m.eos[id]) {
      m.eos[id] = 1;
      m.eos_ids.push_back(id);
    }
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t i = 0; i < n; ++i) {
    const uint32_t len = static_cast<uint32_t>(m.bytes[i].size());
    const uint8_t flags = static_cast<uint8_t>(m.special[i] | (m.eos[i] << 1));
    h = fnv1a(h, &len, sizeof len);
    h = fnv1a(h, m.bytes[i].data(), len);
    h = fnv1a(h, &flags, 1);
  }
  m.fingerprint = h;

  for (int32_t i = 0; i < n; ++i) {
    if (m.eos[i] || m.bytes[i].empty()) continue;
    m.max_len = std::max<int32_t>(m.max_len, static_cast<int32_t>(m.bytes[i].size()));
    if (m.special[i])
      m.specials.push_back(i);
    else
      m.sorted.push_back(i);
  }
  std::sort(m.sorted.begin(), m.sorted.end(),
            [&](int32_t a, int32_t b) { return m.bytes[a] < m.bytes[b]; });
  m.lcp.assign(m.sorted.size(), 0);
  for (size_t i = 1; i < m.sorted.size(); ++i) {
    const std::string& a = m.bytes[m.sorted[i - 1]];
    const std::string& b = m.bytes[m.sorted[i]];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    m.lcp[i] = static_cast<uint16_t>(std::min<size_t>(k, 65535));
  }
  m.sorted_off.assign(1, 0);
  for (const int32_t id : m.sorted) {
    m.sorted_blob += m.bytes[id];
    m.sorted_off.push_back(static_cast<uint32_t>(m.sorted_blob.size()));
  }
  for (size_t i = 0; i < m.sorted.size(); ++i)
    m.first_end[static_cast<uint8_t>(m.bytes[m.sorted[i]][0])] = static_cast<uint32_t>(i + 1);
  for (int b = 1; b < 256; ++b) m.first_end[b] = std::max(m.first_end[b], m.first_end[b - 1]);
  m.rank.assign(n, -1);
  for (size_t i = 0; i < m.sorted.size(); ++i) m.rank[m.sorted[i]] = static_cast<int32_t>(i);
  m.by_len_desc.resize(m.sorted.size());
  for (size_t i = 0; i < m.sorted.size(); ++i) m.by_len_desc[i] = static_cast<int32_t>(i);
  auto len_at = [&](int32_t p) { return m.bytes[m.sorted[p]].size(); };
  std::stable_sort(m.by_len_desc.begin(), m.by_len_desc.end(),
                   [&](int32_t a, int32_t b) { return len_at(a) > len_at(b); });
  m.n_longer.assign(static_cast<size_t>(m.max_len) + 1, 0);
  for (const int32_t id : m.sorted)
    for (size_t L = 0; L < m.bytes[id].size() && L <= static_cast<size_t>(m.max_len); ++L)
      ++m.n_longer[L];
  m.tables = std::make_shared<TableStore>();
  m.profiles = std::make_shared<ProfileStore>();
  return v;
}

int32_t TokenVocab::size() const {
  return static_cast<int32_t>(impl_->bytes.size());
}
const std::string& TokenVocab::bytes(int32_t id) const {
  return impl_->bytes[id];
}
bool TokenVocab::is_special(int32_t id) const {
  return impl_->special[id] != 0;
}
bool TokenVocab::is_eos(int32_t id) const {
  return impl_->eos[id] != 0;
}
const std::vector<int32_t>& TokenVocab::eos_ids() const {
  return impl_->eos_ids;
}
uint64_t TokenVocab::fingerprint() const {
  return impl_->fingerprint;
}

}  // namespace loom::structured
