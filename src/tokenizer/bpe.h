#pragma once
// Byte-level BPE: a word's bytes become their mapped characters, then adjacent symbols merge by
// rank (lowest first, leftmost on ties) until no listed merge applies.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace strata {

class BpeEncoder {
 public:
  explicit BpeEncoder(const Vocab& vocab);
  // Appends the token ids of one pre-tokenized word (raw UTF-8 bytes).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  void merge(std::vector<int32_t>& symbols) const;

  const Vocab& vocab_;
  int32_t byte_ids_[256];  // the single-character token of each byte (-1 if absent)
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // frequent words
};

}  // namespace strata
