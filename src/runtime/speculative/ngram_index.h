#pragma once
// Where each short run of tokens (an n-gram of min_n..max_n tokens) last occurred in a text that
// only grows: what prompt-lookup drafts search. Looking up a query's suffix gives the latest
// occurrence of its longest indexed suffix and how far back the query and the text keep agreeing
// before it (the match's length: a copy followed for 40 tokens goes on more surely than a 2-token
// echo). Hits are checked against the text itself, so a hash collision never gives a false one.

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace strata {

class NgramIndex {
 public:
  // How far back a match is counted at most (the drafters' evidence: past this, a copy is as sure
  // as it gets).
  static constexpr int64_t kMaxMatch = 64;

  // Throws std::invalid_argument unless 1 <= min_n <= max_n.
  NgramIndex(int min_n, int max_n);

  // Indexes the n-grams of `text` that end at positions [from, to) (to <= text.size()); the
  // latest one indexed of equal n-grams wins. `text` is the text later lookups pass.
  void add(std::span<const int32_t> text, size_t from, size_t to);
  void clear();

  struct Hit {
    size_t end = 0;      // the position in the text of the occurrence's last token
    int64_t length = 0;  // how many tokens before query's end agree (n, and on back; <= max_length)
  };
  // The latest indexed occurrence in `text` of the longest suffix of `query` (max_n tokens down
  // to min_n), or none.
  std::optional<Hit> find(std::span<const int32_t> text, std::span<const int32_t> query,
                          int64_t max_length) const;

 private:
  int min_n_, max_n_;
  // ends_[n - min_n]: n-gram hash -> the position of its latest indexed occurrence's last token.
  std::vector<std::unordered_map<uint64_t, size_t>> ends_;
};

// Up to max_tokens tokens of `text` from position `from` on (from < text.size()), copied on past
// its end into the result itself (as LZ77 copies overlap): a text that repeats with a period
// shorter than a draft is drafted in full.
std::vector<int32_t> copy_on(std::span<const int32_t> text, size_t from, int64_t max_tokens);

}  // namespace strata
