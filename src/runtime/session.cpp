#include "runtime/session.h"

#include <algorithm>

#include "util/error.h"

namespace strata {

Session::Session(Model& model, int64_t n_ctx, GgmlType kv_type, ThreadPool& pool)
    : model_(model),
      kv_(model.hparams(), n_ctx, kv_type, model.kv_layers()),
      pool_(pool),
      recurrent_(static_cast<size_t>(model.recurrent_state_floats()), 0.0f) {
  if (!recurrent_.empty()) model_.recurrent_state_written(recurrent_.data());
}

Session::~Session() {
  if (!recurrent_.empty()) model_.recurrent_state_released(recurrent_.data());
}

void Session::reset() {
  position_ = 0;
  std::fill(recurrent_.begin(), recurrent_.end(), 0.0f);
  if (!recurrent_.empty()) model_.recurrent_state_written(recurrent_.data());
}

std::span<const float> Session::recurrent_state() const {
  if (!recurrent_.empty()) model_.recurrent_state_read(recurrent_.data());
  return recurrent_;
}

void Session::eval(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits,
                   int64_t max_batch) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = model_.hparams().n_vocab;
  STRATA_CHECK(n > 0, "nothing to evaluate: no tokens");
  STRATA_CHECK(max_batch > 0, "batch size must be positive, got {}", max_batch);
  if (position_ + n > kv_.capacity()) {
    fail("context overflow: {} tokens in the sequence + {} new exceed the context size {}",
         position_, n, kv_.capacity());
  }
  // Token ids are checked before anything runs: a recurrent state cannot be rolled back after
  // an earlier batch of this call advanced it.
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    STRATA_CHECK(id >= 0 && id < n_vocab,
                 "token id {} at position {} is outside the vocabulary (0..{})", id, t,
                 n_vocab - 1);
  }
  logits.resize(static_cast<size_t>((all_logits ? n : 1) * n_vocab));
  // All or nothing: a failing batch leaves the sequence where it was before this call.
  const int64_t start = position_;
  try {
    eval_batches(tokens, all_logits, logits, max_batch);
  } catch (...) {
    position_ = start;
    throw;
  }
}

void Session::eval_batches(std::span<const int32_t> tokens, bool all_logits,
                           std::vector<float>& logits, int64_t max_batch) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min(max_batch, n - done);
    const bool last_batch = done + count == n;
    float* out = all_logits ? logits.data() + done * n_vocab : logits.data();
    ForwardBatch batch;
    batch.tokens = tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(count));
    batch.pos0 = position_;
    batch.all_logits = all_logits;
    const SequenceKv kv = kv_.layers();
    float* const state = recurrent_.data();
    if (!recurrent_.empty()) batch.recurrent = std::span<float* const>(&state, 1);
    if (all_logits || last_batch) {
      model_.forward(batch, std::span(&kv, 1), out, pool_, &stats_);
    } else {
      // Intermediate batches only fill the cache; their last-token logits are discarded.
      std::vector<float> discard(static_cast<size_t>(n_vocab));
      model_.forward(batch, std::span(&kv, 1), discard.data(), pool_, &stats_);
    }
    position_ += count;
    done += count;
  }
}

void Session::truncate(int64_t position) {
  STRATA_CHECK(position >= 0 && position <= position_,
               "cannot truncate a sequence of {} tokens to {}", position_, position);
  if (position == position_) return;
  if (position == 0) {
    reset();
    return;
  }
  STRATA_CHECK(recurrent_.empty(),
               "cannot truncate a sequence of {} tokens to {}: {} keeps recurrent state that "
               "cannot be rewound (take a snapshot() at that position and restore() it)",
               position_, position, model_.hparams().arch);
  position_ = position;
}

SessionSnapshot Session::snapshot() const {
  if (!recurrent_.empty()) model_.recurrent_state_read(recurrent_.data());
  return {position_, recurrent_};
}

void Session::restore(const SessionSnapshot& snapshot) {
  STRATA_CHECK(snapshot.position >= 0 && snapshot.position <= position_,
               "cannot restore a snapshot at position {} in a sequence of {} tokens",
               snapshot.position, position_);
  STRATA_CHECK(snapshot.recurrent.size() == recurrent_.size(),
               "snapshot has {} floats of recurrent state, the model needs {}",
               snapshot.recurrent.size(), recurrent_.size());
  std::copy(snapshot.recurrent.begin(), snapshot.recurrent.end(), recurrent_.begin());
  if (!recurrent_.empty()) model_.recurrent_state_written(recurrent_.data());
  position_ = snapshot.position;
}

}  // namespace strata
