#include "runtime/speculative/ngram_drafter.h"

namespace strata {

NgramDrafter::NgramDrafter(NgramDrafterOptions options, std::shared_ptr<CopyCursor> cursor)
    : index_(options.min_ngram, options.max_ngram), cursor_(std::move(cursor)) {}

void NgramDrafter::index(std::span<const int32_t> context) {
  const bool extends =
      context.size() >= indexed_ && (indexed_ == 0 || context[indexed_ - 1] == indexed_last_token_);
  if (!extends) {
    indexed_ = 0;
    index_.clear();
  }
  // An n-gram is worth indexing once a token follows it: ends up to context.size() - 2.
  const size_t first_new = indexed_ == 0 ? 0 : indexed_ - 1;
  if (context.size() > first_new + 1) index_.add(context, first_new, context.size() - 1);
  indexed_ = context.size();
  indexed_last_token_ = context.back();
}

std::vector<int32_t> NgramDrafter::propose(std::span<const int32_t> context, int64_t max_tokens) {
  last_match_ = 0;
  if (context.empty() || max_tokens <= 0) return {};
  index(context);
  const auto hit = index_.find(context, context, kMaxEvidence);
  if (!hit) return {};
  last_match_ = hit->length;
  if (cursor_ && hit->length >= kCopyMatch)
    cursor_->place(context.size(), hit->end + 1, context.back());
  return copy_on(context, hit->end + 1, max_tokens);  // what followed
}

}  // namespace strata
