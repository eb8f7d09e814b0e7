#include "runtime/speculative/draft_model_drafter.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/sampler.h"

namespace strata {

std::string draft_vocabulary_mismatch(const Model& target, const Model& draft) {
  const int64_t a = target.hparams().n_vocab, b = draft.hparams().n_vocab;
  if (a != b) return fmt::format("its vocabulary has {} tokens, the model's {}", b, a);
  const GgufArray* ta = target.file().find_array("tokenizer.ggml.tokens");
  const GgufArray* tb = draft.file().find_array("tokenizer.ggml.tokens");
  if (ta && tb && !(*ta == *tb)) {
    const size_t n = std::min(ta->items.size(), tb->items.size());
    for (size_t i = 0; i < n; ++i) {
      if (!(ta->items[i] == tb->items[i])) {
        const std::string* sa = ta->items[i].as_string();
        const std::string* sb = tb->items[i].as_string();
        return fmt::format("token {} is '{}' there and '{}' in the model", i, sb ? *sb : "?",
                           sa ? *sa : "?");
      }
    }
    return fmt::format("it lists {} token texts, the model {}", tb->items.size(), ta->items.size());
  }
  return "";
}

DraftModelDrafter::DraftModelDrafter(Model& draft, int64_t n_ctx, ThreadPool& pool)
    : session_(draft, n_ctx, GgmlType::F16, pool) {
  if (draft.recurrent_state_floats() > 0)
    throw std::invalid_argument("a draft model with recurrent layers cannot rewind its guesses");
}

std::vector<int32_t> DraftModelDrafter::propose(std::span<const int32_t> context,
                                                int64_t max_tokens) {
  const auto n = std::ssize(context);
  max_tokens = std::min(max_tokens, session_.capacity() - n);
  if (n == 0 || max_tokens <= 0) return {};
  // Rewind to where the context and the cache part, keeping one token to read again: its logits
  // give the first guess.
  const auto parted =
      std::mismatch(held_.begin(), held_.end(), context.begin(), context.end()).first;
  const int64_t keep = std::min<int64_t>(parted - held_.begin(), n - 1);
  session_.truncate(keep);
  held_.resize(static_cast<size_t>(keep));
  session_.eval(context.subspan(static_cast<size_t>(keep)), false, logits_);
  held_.insert(held_.end(), context.begin() + keep, context.end());
  tokens_read_ += n - keep;

  std::vector<int32_t> draft;
  for (int64_t k = 0; k < max_tokens; ++k) {
    draft.push_back(argmax(logits_));
    if (k + 1 == max_tokens) break;
    session_.eval(std::span<const int32_t>(&draft.back(), 1), false, logits_);
    held_.push_back(draft.back());
    ++tokens_read_;
  }
  return draft;
}

}  // namespace strata
