#include "model/batch_layout.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace strata {
namespace {

void check_caches(std::span<const SequenceKv> kv, int64_t n_layer) {
  STRATA_CHECK(!kv.empty(), "forward needs at least one sequence's KV cache");
  for (size_t s = 0; s < kv.size(); ++s) {
    STRATA_CHECK(static_cast<int64_t>(kv[s].size()) == n_layer,
                 "KV cache of sequence {} has {} layers, the model {}", s, kv[s].size(), n_layer);
  }
}

// Tokens of one sequence must be consecutive positions in row order (each sees its
// predecessors), and every position must have storage in every layer.
void check_positions(const BatchLayout& layout, std::span<const SequenceKv> kv) {
  std::vector<int64_t> next(kv.size(), -1);  // position the sequence's next token must have
  for (size_t t = 0; t < layout.sequence.size(); ++t) {
    const int32_t s = layout.sequence[t];
    const int64_t pos = layout.position[t];
    STRATA_CHECK(s >= 0 && static_cast<size_t>(s) < kv.size(),
                 "token {} belongs to sequence {}, but the batch has {} KV caches", t, s,
                 kv.size());
    STRATA_CHECK(pos >= 0, "token {} has negative position {}", t, pos);
    int64_t& expected = next[static_cast<size_t>(s)];
    STRATA_CHECK(expected < 0 || pos == expected,
                 "token {} of sequence {} is at position {}, expected {} (a sequence's tokens "
                 "must be consecutive positions in order)",
                 t, s, pos, expected);
    expected = pos + 1;
    for (const ops::KvLayerView& view : kv[static_cast<size_t>(s)]) {
      STRATA_CHECK(pos < view.capacity,
                   "token {} is at position {} of sequence {}, whose KV cache holds {} positions",
                   t, pos, s, view.capacity);
    }
  }
}

}  // namespace

void BatchLayout::build(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                        int64_t n_layer) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  STRATA_CHECK(n > 0, "forward needs at least one token");
  check_caches(kv, n_layer);
  sequence.resize(static_cast<size_t>(n));
  position.resize(static_cast<size_t>(n));
  if (batch.sequences.empty()) {
    STRATA_CHECK(batch.positions.empty() && batch.logit_rows.empty(),
                 "positions and logit rows need per-token sequences");
    STRATA_CHECK(batch.pos0 >= 0, "batch starts at negative position {}", batch.pos0);
    std::fill(sequence.begin(), sequence.end(), 0);
    for (int64_t t = 0; t < n; ++t) position[static_cast<size_t>(t)] = batch.pos0 + t;
    logit_rows.clear();
    for (int64_t t = batch.all_logits ? 0 : n - 1; t < n; ++t)
      logit_rows.push_back(static_cast<int32_t>(t));
  } else {
    STRATA_CHECK(static_cast<int64_t>(batch.sequences.size()) == n &&
                     static_cast<int64_t>(batch.positions.size()) == n,
                 "batch of {} tokens has {} sequence indices and {} positions", n,
                 batch.sequences.size(), batch.positions.size());
    std::copy(batch.sequences.begin(), batch.sequences.end(), sequence.begin());
    std::copy(batch.positions.begin(), batch.positions.end(), position.begin());
    for (int32_t row : batch.logit_rows) {
      STRATA_CHECK(row >= 0 && row < n, "logit row {} is outside the batch of {} tokens", row, n);
    }
    logit_rows.assign(batch.logit_rows.begin(), batch.logit_rows.end());
  }
  check_positions(*this, kv);
}

void SequenceRuns::build(const ForwardBatch& batch, const BatchLayout& layout,
                         std::span<float* const> states, size_t n_sequences,
                         const std::string& arch) {
  STRATA_CHECK(states.size() == n_sequences,
               "{} keeps recurrent state: the batch has {} state buffers for {} sequences", arch,
               states.size(), n_sequences);
  for (size_t s = 0; s < states.size(); ++s) {
    STRATA_CHECK(states[s] != nullptr, "sequence {} has no recurrent state buffer", s);
  }
  const size_t n = layout.sequence.size();
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return layout.sequence[static_cast<size_t>(a)] < layout.sequence[static_cast<size_t>(b)];
  });
  tokens.resize(n);
  sequence.resize(n);
  position.resize(n);
  std::vector<int32_t> row_of(n);
  for (size_t i = 0; i < n; ++i) {
    const auto from = static_cast<size_t>(order[i]);
    tokens[i] = batch.tokens[from];
    sequence[i] = layout.sequence[from];
    position[i] = layout.position[from];
    row_of[from] = static_cast<int32_t>(i);
  }
  logit_rows.clear();
  for (int32_t row : layout.logit_rows) logit_rows.push_back(row_of[static_cast<size_t>(row)]);
  runs.clear();
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || sequence[i] != sequence[i - 1]) {
      runs.push_back({sequence[i], static_cast<int64_t>(i), 0});
    }
    runs.back().count++;
  }
  for (const Run& run : runs) {
    const float* state = states[static_cast<size_t>(run.sequence)];
    const auto consumed = static_cast<int64_t>(state[0]);
    const int64_t first = position[static_cast<size_t>(run.begin)];
    STRATA_CHECK(consumed == first,
                 "sequence {}: its recurrent state has consumed {} tokens, but the batch continues "
                 "it at position {} (a hybrid model's state cannot be rewound: restore a snapshot "
                 "taken at that position)",
                 run.sequence, consumed, first);
  }
}

void BatchRows::build(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t n_layer,
                      bool ordered, const std::string& arch) {
  layout_.build(batch, kv, n_layer);
  is_ordered_ = ordered;
  if (!ordered) {
    tokens_ = batch.tokens;
    return;
  }
  ordered_.build(batch, layout_, batch.recurrent, kv.size(), arch);
  tokens_ = ordered_.tokens;
}

std::span<const int32_t> BatchRows::sequence() const {
  return is_ordered_ ? std::span<const int32_t>(ordered_.sequence) : layout_.sequence;
}

std::span<const int64_t> BatchRows::position() const {
  return is_ordered_ ? std::span<const int64_t>(ordered_.position) : layout_.position;
}

std::span<const int32_t> BatchRows::logit_rows() const {
  return is_ordered_ ? std::span<const int32_t>(ordered_.logit_rows) : layout_.logit_rows;
}

std::span<const SequenceRuns::Run> BatchRows::runs() const {
  if (!is_ordered_) return {};
  return ordered_.runs;
}

void BatchRows::advance_states(std::span<float* const> states) const {
  for (const SequenceRuns::Run& run : runs()) {
    float* state = states[static_cast<size_t>(run.sequence)];
    state[0] = static_cast<float>(static_cast<int64_t>(state[0]) + run.count);
  }
}

}  // namespace strata
