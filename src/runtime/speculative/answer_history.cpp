#include "runtime/speculative/answer_history.h"

#include <algorithm>

namespace strata {

AnswerHistory::AnswerHistory(size_t capacity, int min_ngram, int max_ngram)
    : capacity_(capacity), index_(min_ngram, max_ngram) {}

void AnswerHistory::add(std::span<const int32_t> opening, std::span<const int32_t> answer) {
  if (answer.empty() || capacity_ < 2) return;
  opening = opening.last(std::min(opening.size(), kOpeningTokens));
  // An answer longer than the whole history keeps its end.
  if (opening.size() + answer.size() + 1 > capacity_) {
    if (answer.size() + 1 > capacity_) {
      answer = answer.last(capacity_ - 1);
      opening = {};
    } else {
      opening = opening.last(capacity_ - 1 - answer.size());
    }
  }
  const size_t start = tokens_.size();
  tokens_.insert(tokens_.end(), opening.begin(), opening.end());
  tokens_.insert(tokens_.end(), answer.begin(), answer.end());
  tokens_.push_back(kSeparator);
  // N-grams that end before the separator: a token follows each.
  index_.add(tokens_, start, tokens_.size() - 2);
  if (tokens_.size() > capacity_) drop_oldest();
}

void AnswerHistory::drop_oldest() {
  // Whole entries go, the oldest first, until the rest fit in half the capacity (the newest
  // stays): a rebuild every capacity / 2 tokens added or so, O(1) amortized per token.
  size_t from = 0;
  while (tokens_.size() - from > capacity_ / 2) {
    const auto sep =
        std::find(tokens_.begin() + static_cast<std::ptrdiff_t>(from), tokens_.end(), kSeparator);
    if (sep + 1 == tokens_.end()) break;
    from = static_cast<size_t>(sep - tokens_.begin()) + 1;
  }
  tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(from));
  index_.clear();
  size_t entry = 0;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] != kSeparator) continue;
    if (i >= entry + 2) index_.add(tokens_, entry, i - 1);
    entry = i + 1;
  }
}

std::vector<int32_t> AnswerHistory::continuation(std::span<const int32_t> context,
                                                 int64_t max_tokens, int64_t max_match,
                                                 int64_t* match) const {
  *match = 0;
  if (tokens_.empty() || max_tokens <= 0) return {};
  const auto hit = index_.find(tokens_, context, max_match);
  if (!hit) return {};
  std::vector<int32_t> draft;
  for (size_t i = hit->end + 1;
       i < tokens_.size() && tokens_[i] != kSeparator && std::ssize(draft) < max_tokens; ++i)
    draft.push_back(tokens_[i]);
  if (!draft.empty()) *match = hit->length;
  return draft;
}

}  // namespace strata
