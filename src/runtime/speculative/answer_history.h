#pragma once
// The answers a server wrote lately, for drafts across requests: a coding model opens most
// answers alike (an empty thinking block, a code fence and its language, `def` or `class`),
// closes them alike, and repeats its own phrases and idioms from one request to the next, none
// of which the new request's prompt holds. Prompt lookup finds nothing there; looking the
// context's last tokens up in earlier answers often does (HistoryDrafter).
//
// Each answer is kept with the last few tokens of its prompt (the turn's opening, so that the
// first tokens of the next answer can be looked up too), entries apart by a separator no token
// equals, up to a capacity in tokens; the oldest go first. Used on the scheduler thread only.
//
// Drafts from other requests change no output (every drafted token is checked), but how fast an
// answer comes tells a little about what others were answered lately: a server shared by people
// who must not learn of each other's requests runs with `--spec-history 0`.

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/speculative/ngram_index.h"

namespace strata {

class AnswerHistory {
 public:
  // The prompt tokens kept before each answer.
  static constexpr size_t kOpeningTokens = 4;
  static constexpr int32_t kSeparator = -1;

  // capacity: tokens kept (separators included); 0 (or 1) keeps nothing.
  explicit AnswerHistory(size_t capacity, int min_ngram = 2, int max_ngram = 5);

  // Keeps an answer: `opening` (the prompt's last tokens; only the last kOpeningTokens are kept)
  // then `answer`. An empty answer is not kept.
  void add(std::span<const int32_t> opening, std::span<const int32_t> answer);

  // Up to max_tokens tokens that followed, in an earlier answer, the latest occurrence of the
  // longest suffix of `context` (2..5 tokens), never across two answers; empty when none.
  // *match: how many tokens before the context's end agree with that occurrence (up to
  // max_match).
  std::vector<int32_t> continuation(std::span<const int32_t> context, int64_t max_tokens,
                                    int64_t max_match, int64_t* match) const;

  size_t size() const { return tokens_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  // Keeps the newest entries within capacity / 2 (the newest at least) and indexes them anew.
  void drop_oldest();

  size_t capacity_;
  std::vector<int32_t> tokens_;  // entries, each ending in kSeparator
  NgramIndex index_;
};

}  // namespace strata
