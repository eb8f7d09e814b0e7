// Recurrent state of the hybrid (Gated DeltaNet) models: however the tokens of a sequence are
// batched, and whatever else shares the batch, the state and the logits are those of the plain
// sequence.
//
// Tolerance: the delta-rule recurrence runs one token at a time whatever the batch (the chunked
// form is not used, see ops/gated_delta_net.h), and convolution, norms and gates are per token,
// so the recurrent part is bit-identical across batchings. The matrix products are too (each
// output is one dot product of a weight row and that token's quantized activations, the same
// for any number of rows), and so are attention (chunks fixed from position 0) and MoE (each
// token's experts summed in expert order). The tests therefore demand equality, and report the
// largest difference if it ever fails.

#include <gtest/gtest.h>

#include <cmath>

#include "batched_run.h"
#include "model/model.h"
#include "runtime/kv_pool.h"
#include "runtime/session.h"
#include "support/test_support.h"

namespace strata {
namespace {

std::unique_ptr<Model> load(const char* name) {
  return Model::load((test::oracle_dir() / "gdn" / "models" / name).string());
}

std::vector<int32_t> make_tokens(int n, int seed) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back((i * 131 + seed * 71 + 7) % 512);
  return tokens;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

// Logits of every token, fed in batches of the given sizes.
std::vector<float> run(Model& model, const std::vector<int32_t>& tokens,
                       const std::vector<size_t>& batches, ThreadPool& pool) {
  return test::logits_in_batches(model, tokens, batches, GgmlType::F16, pool);
}

TEST(GdnState, ModelDeclaresItsState) {
  auto model = load("tiny-qwen35moe-Q8_0.gguf");
  // 3 GDN layers: conv state 3 x 512, S 4 heads x 64 x 64; plus the header.
  EXPECT_EQ(model->recurrent_state_floats(), 16 + 3 * (3 * 512 + 4 * 64 * 64));
  EXPECT_EQ(model->kv_layers(), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(model->recurrent_bytes_per_token(), 2 * 4 * 3 * (3 * 512 + 4 * 64 * 64));
  ThreadPool pool(1);
  Session session(*model, 100, GgmlType::F16, pool);
  // Only the attention layer has storage: 100 positions x 2 KV heads x 64 values x 2 (k, v).
  EXPECT_EQ(session.kv_cache().bytes(), 100 * 2 * 64 * 2 * 2);
}

TEST(GdnState, PrefillDecodeAndMicroBatchesAgree) {
  for (const char* name : {"tiny-qwen35moe-Q4_K_M.gguf", "tiny-qwen35moe-Q8_0.gguf"}) {
    SCOPED_TRACE(name);
    auto model = load(name);
    ThreadPool pool(2);
    const std::vector<int32_t> tokens = make_tokens(130, 1);
    const auto batched = run(*model, tokens, {130}, pool);
    const auto single = run(*model, tokens, std::vector<size_t>(130, 1), pool);
    const auto uneven = run(*model, tokens, {5, 1, 58, 2, 63, 1}, pool);
    EXPECT_EQ(batched, single) << "max abs diff " << max_abs_diff(batched, single);
    EXPECT_EQ(batched, uneven) << "max abs diff " << max_abs_diff(batched, uneven);
    // Prefill through Session's own batching (max_batch 64 splits 130 into 64 + 64 + 2).
    Session session(*model, 256, GgmlType::F16, pool);
    std::vector<float> logits;
    session.eval(tokens, true, logits, 64);
    EXPECT_EQ(logits, batched);
  }
}

TEST(GdnState, SnapshotContinueRestoreRegenerate) {
  auto model = load("tiny-qwen35moe-Q4_K_M.gguf");
  ThreadPool pool(2);
  const std::vector<int32_t> prefix = make_tokens(40, 2), a = make_tokens(12, 3),
                             b = make_tokens(30, 4);
  Session session(*model, 128, GgmlType::F16, pool);
  std::vector<float> logits, first, second, other;
  session.eval(prefix, false, logits);
  const SessionSnapshot snap = session.snapshot();
  EXPECT_EQ(snap.position, 40);
  EXPECT_EQ(static_cast<int64_t>(snap.recurrent.size()), model->recurrent_state_floats());
  session.eval(a, true, first);
  session.eval(b, true, other);  // wander off
  session.restore(snap);
  EXPECT_EQ(session.position(), 40);
  session.eval(a, true, second);
  EXPECT_EQ(first, second);
  // The same as a fresh sequence that never wandered.
  Session fresh(*model, 128, GgmlType::F16, pool);
  fresh.eval(prefix, false, logits);
  fresh.eval(a, true, logits);
  EXPECT_EQ(logits, first);
  // Restoring a snapshot from the future is refused.
  session.restore(snap);
  const SessionSnapshot later = [&] {
    session.eval(a, false, logits);
    return session.snapshot();
  }();
  session.restore(snap);
  EXPECT_THROW(session.restore(later), std::exception);
}

TEST(GdnState, TruncateNeedsASnapshot) {
  auto model = load("tiny-qwen35moe-Q8_0.gguf");
  ThreadPool pool(1);
  Session session(*model, 64, GgmlType::F16, pool);
  std::vector<float> logits, fresh_logits;
  const std::vector<int32_t> tokens = make_tokens(10, 5);
  session.eval(tokens, false, logits);
  try {
    session.truncate(5);
    FAIL() << "truncating a hybrid model's sequence must throw";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("snapshot"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.position(), 10);
  session.truncate(10);  // nothing to forget
  session.truncate(0);   // back to a fresh sequence: state zeroed
  session.eval(tokens, false, logits);
  Session fresh(*model, 64, GgmlType::F16, pool);
  fresh.eval(tokens, false, fresh_logits);
  EXPECT_EQ(logits, fresh_logits);
}

TEST(GdnState, ForwardChecksTheStateBuffers) {
  auto model = load("tiny-qwen35moe-Q8_0.gguf");
  ThreadPool pool(1);
  KvPool kv_pool(model->hparams(), 4, 16, GgmlType::F16, model->kv_layers());
  KvSequence seq(kv_pool);
  ASSERT_TRUE(seq.reserve(8));
  const std::vector<int32_t> tokens = make_tokens(8, 6);
  std::vector<float> logits(static_cast<size_t>(model->hparams().n_vocab));
  const SequenceKv kv = seq.layers();
  ForwardBatch batch;
  batch.tokens = tokens;
  EXPECT_THROW(model->forward(batch, std::span(&kv, 1), logits.data(), pool), std::exception)
      << "no recurrent state";
  std::vector<float> state(static_cast<size_t>(model->recurrent_state_floats()), 0.0f);
  float* const ptr = state.data();
  batch.recurrent = std::span<float* const>(&ptr, 1);
  batch.pos0 = 3;  // the state has consumed 0 tokens
  EXPECT_THROW(model->forward(batch, std::span(&kv, 1), logits.data(), pool), std::exception);
  batch.pos0 = 0;
  model->forward(batch, std::span(&kv, 1), logits.data(), pool);
  EXPECT_EQ(state[0], 8.0f);
}

// Two sequences interleaved in multi-sequence batches over a shared paged KV pool, each with
// its own state buffer: each gets exactly the logits it gets alone.
TEST(GdnState, InterleavedSequencesDoNotLeakState) {
  auto model = load("tiny-qwen35moe-Q4_K_M.gguf");
  ThreadPool pool(2);
  {
    KvPool kv_pool(model->hparams(), 16, 16, GgmlType::F16, model->kv_layers());
    EXPECT_EQ(kv_pool.bytes_per_position(), 2 * 2 * 64 * 2);  // the attention layer only
  }
  test::expect_interleaved_sequences_match_alone(*model, pool);
}

}  // namespace
}  // namespace strata
