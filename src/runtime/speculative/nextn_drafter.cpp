#include "runtime/speculative/nextn_drafter.h"

#include <algorithm>

#include "runtime/sampler.h"
#include "util/error.h"

namespace strata {
namespace {

// The head's cache: one attention layer of the model's shape.
ModelHParams one_layer(ModelHParams hp) {
  hp.n_layer = 1;
  return hp;
}

}  // namespace

NextnDrafter::NextnDrafter(const NextnHead& head, int64_t n_ctx, ThreadPool& pool)
    : head_(head),
      pool_(pool),
      n_embd_(head.hparams().n_embd),
      cache_(one_layer(head.hparams()), n_ctx, GgmlType::F16) {}

void NextnDrafter::reset(int64_t origin) {
  origin_ = origin;
  waiting_at_ = -1;
}

void NextnDrafter::run(std::span<const int32_t> tokens, const float* hidden, int64_t position,
                       float* logits) {
  const int64_t local = position - origin_;
  STRATA_CHECK(local >= 0 && local + std::ssize(tokens) <= cache_.capacity(),
               "NextN draft positions {}..{} outside the head's cache of {}", local,
               local + std::ssize(tokens), cache_.capacity());
  out_.resize(tokens.size() * static_cast<size_t>(n_embd_));
  head_.forward(tokens, hidden, local, cache_.layers()[0], out_.data(), logits, ws_, pool_);
  rows_run_ += std::ssize(tokens);
}

void NextnDrafter::observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) {
  const auto n = std::ssize(tokens);
  if (n == 0) return;
  // Where the head's exact rows end: the waiting state's position, or the next one when a
  // proposal ran it. A restated position (a rolled-back step run again) rewinds to it; a gap
  // (positions the head was never shown) starts the head over.
  if (origin_ < 0 || position < origin_) {
    reset(position);
  } else if (waiting_at_ >= 0 && position == waiting_at_ + 1) {
    run(tokens.first(1), waiting_.data(), waiting_at_, nullptr);
  } else if (waiting_at_ >= 0 ? position > waiting_at_ + 1 : position > exact_end_) {
    reset(position);
  }
  // Every row but the last has its next token here.
  if (n > 1) run(tokens.subspan(1), hidden, position, nullptr);
  waiting_.assign(hidden + (n - 1) * n_embd_, hidden + n * n_embd_);
  waiting_at_ = position + n - 1;
  exact_end_ = waiting_at_;
}

std::vector<int32_t> NextnDrafter::propose(std::span<const int32_t> context, int64_t max_tokens) {
  // The trunk ran every token but the last: its state at the one before is what the head reads.
  const auto last = std::ssize(context) - 1;
  if (max_tokens <= 0 || last < 1 || waiting_at_ != last - 1) return {};
  // Room in the head's cache for the guesses' rows (the exact row and one per further guess).
  max_tokens = std::min(max_tokens, cache_.capacity() - (last - 1 - origin_));
  if (max_tokens <= 0) return {};
  logits_.resize(static_cast<size_t>(head_.hparams().n_vocab));
  std::vector<int32_t> draft;
  // The exact row (the trunk's state, the drawn token), then rows fed the head's own output.
  run(context.subspan(static_cast<size_t>(last), 1), waiting_.data(), last - 1, logits_.data());
  waiting_at_ = -1;
  exact_end_ = last;
  draft.push_back(argmax(logits_));
  for (int64_t k = 1; k < max_tokens; ++k) {
    chained_ = out_;
    run(std::span<const int32_t>(&draft.back(), 1), chained_.data(), last - 1 + k, logits_.data());
    draft.push_back(argmax(logits_));
  }
  return draft;
}

}  // namespace strata
