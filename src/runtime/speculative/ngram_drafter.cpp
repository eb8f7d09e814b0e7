#include "runtime/speculative/ngram_drafter.h"

#include <algorithm>
#include <stdexcept>

namespace strata {
namespace {

// The n tokens ending at `end` (inclusive).
uint64_t ngram_hash(std::span<const int32_t> tokens, size_t end, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = end + 1 - static_cast<size_t>(n); i <= end; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

bool same_ngram(std::span<const int32_t> tokens, size_t end_a, size_t end_b, int n) {
  for (int k = 0; k < n; ++k) {
    if (tokens[end_a - static_cast<size_t>(k)] != tokens[end_b - static_cast<size_t>(k)])
      return false;
  }
  return true;
}

}  // namespace

NgramDrafter::NgramDrafter(NgramDrafterOptions options) : options_(options) {
  if (options_.min_ngram < 1 || options_.max_ngram < options_.min_ngram)
    throw std::invalid_argument("n-gram drafter: need 1 <= min_ngram <= max_ngram");
  last_end_.resize(static_cast<size_t>(options_.max_ngram - options_.min_ngram + 1));
}

void NgramDrafter::index(std::span<const int32_t> context) {
  const bool extends =
      context.size() >= indexed_ && (indexed_ == 0 || context[indexed_ - 1] == indexed_last_token_);
  if (!extends) {
    indexed_ = 0;
    for (auto& m : last_end_) m.clear();
  }
  // An n-gram is worth indexing once a token follows it: ends up to context.size() - 2.
  const size_t first_new = indexed_ == 0 ? 0 : indexed_ - 1;
  for (size_t end = first_new; end + 1 < context.size(); ++end) {
    for (int n = options_.min_ngram; n <= options_.max_ngram; ++n) {
      if (end + 1 < static_cast<size_t>(n)) break;
      last_end_[static_cast<size_t>(n - options_.min_ngram)][ngram_hash(context, end, n)] = end;
    }
  }
  indexed_ = context.size();
  indexed_last_token_ = context.back();
}

std::vector<int32_t> NgramDrafter::propose(std::span<const int32_t> context, int64_t max_tokens) {
  last_match_ = 0;
  if (context.empty() || max_tokens <= 0) return {};
  index(context);
  const size_t last = context.size() - 1;
  for (int n = std::min<int>(options_.max_ngram, static_cast<int>(context.size()));
       n >= options_.min_ngram; --n) {
    const auto& table = last_end_[static_cast<size_t>(n - options_.min_ngram)];
    const auto it = table.find(ngram_hash(context, last, n));
    if (it == table.end() || !same_ngram(context, it->second, last, n)) continue;
    // What followed, copied on past the context's end into the draft itself (as LZ77 copies
    // overlap): a text that repeats with a period shorter than a draft is drafted in full.
    const size_t end = it->second;
    int64_t match = n;
    while (match < kMaxEvidence && end >= static_cast<size_t>(match) &&
           context[end - static_cast<size_t>(match)] == context[last - static_cast<size_t>(match)])
      ++match;
    last_match_ = match;
    std::vector<int32_t> draft;
    draft.reserve(static_cast<size_t>(max_tokens));
    for (size_t i = it->second + 1; std::ssize(draft) < max_tokens; ++i)
      draft.push_back(i < context.size() ? context[i] : draft[i - context.size()]);
    return draft;
  }
  return {};
}

}  // namespace strata
