#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/byte_unicode.h"
#include "util/error.h"

namespace strata {

BpeEncoder::BpeEncoder(const Vocab& vocab) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    const auto id = vocab.find(byte_to_token_char(static_cast<uint8_t>(b)));
    byte_ids_[b] = id ? *id : -1;
  }
}

void BpeEncoder::merge(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  // Symbols form a linked list; candidate merges wait in a heap ordered by (rank, position).
  std::vector<int> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int left;
    int32_t left_id, right_id, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    const int right = next[left];
    const auto it = vocab_.merges.find(Vocab::pair_key(symbols[left], symbols[right]));
    if (it != vocab_.merges.end()) {
      heap.push({it->second.first, left, symbols[left], symbols[right], it->second.second});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int right = next[c.left];
    // Stale: one side was merged away since this candidate was queued.
    if (symbols[c.left] != c.left_id || right < 0 || symbols[right] != c.right_id) continue;
    symbols[c.left] = c.merged;
    symbols[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (symbols[i] >= 0) symbols[out++] = symbols[i];
  }
  symbols.resize(out);
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= 64;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) {
      if (vocab_.unk < 0) {
        fail("the vocabulary has no token for byte 0x{:02x} and no unknown token",
             static_cast<uint8_t>(c));
      }
      symbols.push_back(vocab_.unk);
      continue;
    }
    symbols.push_back(id);
  }
  merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() > 200000) cache_.clear();
    cache_.emplace(std::string(word), std::move(symbols));
  }
}

}  // namespace strata
