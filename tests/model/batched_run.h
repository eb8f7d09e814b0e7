#pragma once
// A prompt fed to a fresh Session in batches of given sizes, for the "any batching gives the same
// logits" tests.

#include <gtest/gtest.h>

#include <vector>

#include "runtime/kv_pool.h"
#include "runtime/session.h"

namespace strata::test {

// Logits after every token ([tokens][n_vocab]), the tokens fed in batches of the given sizes.
inline std::vector<float> logits_in_batches(Model& model, const std::vector<int32_t>& tokens,
                                            const std::vector<size_t>& batches, GgmlType kv_type,
                                            ThreadPool& pool, int64_t n_ctx = 256) {
  Session session(model, n_ctx, kv_type, pool);
  std::vector<float> all, logits;
  size_t done = 0;
  for (size_t count : batches) {
    session.eval(std::span<const int32_t>(tokens.data() + done, count), true, logits);
    all.insert(all.end(), logits.begin(), logits.end());
    done += count;
  }
  EXPECT_EQ(done, tokens.size());
  return all;
}

// Two sequences (90 and 50 tokens) run through one model in mixed batches: interleaved row by
// row, prefill chunks in either order, alternating runs, decode steps. Every row's logits must
// equal, bit for bit, those of its sequence run alone (the kernels compute each token's rows the
// same whatever shares the batch), and recurrent state (hybrid models) must not leak.
inline void expect_interleaved_sequences_match_alone(Model& model, ThreadPool& pool) {
  const int64_t n_vocab = model.hparams().n_vocab;
  const auto make_tokens = [](int n, int seed) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < n; ++i) tokens.push_back((i * 131 + seed * 71 + 7) % 512);
    return tokens;
  };
  const std::vector<std::vector<int32_t>> tokens = {make_tokens(90, 7), make_tokens(50, 8)};
  std::vector<std::vector<float>> alone;
  for (const auto& t : tokens)
    alone.push_back(logits_in_batches(model, t, {t.size()}, GgmlType::F16, pool));

  KvPool kv_pool(model.hparams(), 16, 16, GgmlType::F16, model.kv_layers());
  std::vector<KvSequence> seqs;
  seqs.emplace_back(kv_pool);
  seqs.emplace_back(kv_pool);
  std::vector<std::vector<float>> states(
      2, std::vector<float>(static_cast<size_t>(model.recurrent_state_floats()), 0.0f));
  std::vector<int64_t> next = {0, 0};

  // Each step: a list of (sequence, token count) in row order; the rows of one sequence may be
  // split by the other's (interleaved one by one when both counts are given as 1s).
  const std::vector<std::vector<std::pair<int32_t, int>>> steps = {
      {{0, 1}, {1, 1}, {0, 1}, {1, 1}, {0, 1}, {1, 1}},  // interleaved row by row
      {{1, 20}, {0, 40}},                                // prefill chunks, second first
      {{0, 3}, {1, 2}, {0, 4}, {1, 5}},                  // alternating runs
      {{0, 1}, {1, 1}},                                  // decode steps
      {{1, 1}, {0, 1}},
      {{0, 38}, {1, 18}},
  };
  for (size_t step = 0; step < steps.size(); ++step) {
    std::vector<int32_t> batch_tokens, sequences, logit_rows;
    std::vector<int64_t> positions;
    std::vector<std::pair<int32_t, int64_t>> wanted;
    for (const auto& [s, count] : steps[step]) {
      for (int i = 0; i < count; ++i) {
        const int64_t pos = next[static_cast<size_t>(s)]++;
        logit_rows.push_back(static_cast<int32_t>(batch_tokens.size()));
        wanted.push_back({s, pos});
        batch_tokens.push_back(tokens[static_cast<size_t>(s)][static_cast<size_t>(pos)]);
        sequences.push_back(s);
        positions.push_back(pos);
      }
    }
    std::vector<SequenceKv> kv;
    for (size_t s = 0; s < 2; ++s) {
      ASSERT_TRUE(seqs[s].reserve(next[s]));
      kv.push_back(seqs[s].layers());
    }
    float* const state_ptrs[2] = {states[0].data(), states[1].data()};
    ForwardBatch batch;
    batch.tokens = batch_tokens;
    batch.sequences = sequences;
    batch.positions = positions;
    batch.logit_rows = logit_rows;
    if (model.recurrent_state_floats() > 0) batch.recurrent = state_ptrs;
    std::vector<float> logits(logit_rows.size() * static_cast<size_t>(n_vocab));
    model.forward(batch, kv, logits.data(), pool);
    for (size_t s = 0; s < 2; ++s) seqs[s].set_length(next[s]);
    for (size_t i = 0; i < wanted.size(); ++i) {
      const auto [s, pos] = wanted[i];
      const float* want = alone[static_cast<size_t>(s)].data() + pos * n_vocab;
      const std::vector<float> got(logits.begin() + static_cast<int64_t>(i) * n_vocab,
                                   logits.begin() + static_cast<int64_t>(i + 1) * n_vocab);
      EXPECT_EQ(got, std::vector<float>(want, want + n_vocab))
          << "step " << step << " sequence " << s << " position " << pos;
    }
  }
  EXPECT_EQ(next[0], 90);
  EXPECT_EQ(next[1], 50);
}

}  // namespace strata::test
