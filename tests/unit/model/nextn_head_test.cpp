// The multi-token-prediction block against an independent engine: llama.cpp's qwen35moe_mtp
// graph (tests/data/README.md says how the reference was made) on a generated Qwen3.5-style
// hybrid with an MTP block. The reference holds the trunk's hidden state after each prompt token
// as llama.cpp's MTP drafting reads it (its "pre-norm" buffer, which holds the rows after the
// output norm) and the MTP block's logits for rows (h[k-1], token k) at position k (h[-1] = 0),
// as that drafting feeds them. strata's trunk must export the same states, and its NextnHead, fed
// the reference's states, give the same logits.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "model/model.h"
#include "model/nextn_head.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "support/test_support.h"

namespace strata {
namespace {

struct MtpReference {
  int64_t n_vocab = 0, n_embd = 0;
  std::vector<int32_t> prompt;
  std::vector<float> hidden;  // [n][n_embd]
  std::vector<float> logits;  // [n][n_vocab]
};

MtpReference read_reference(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  uint32_t h[5] = {};
  f.read(reinterpret_cast<char*>(h), sizeof h);
  EXPECT_EQ(h[0], 0x5054544du) << path;  // "MTTP"
  MtpReference r;
  r.n_vocab = h[2];
  r.n_embd = h[4];
  r.prompt.resize(h[3]);
  r.hidden.resize(static_cast<size_t>(h[3] * r.n_embd));
  r.logits.resize(static_cast<size_t>(h[3] * r.n_vocab));
  f.read(reinterpret_cast<char*>(r.prompt.data()), std::ssize(r.prompt) * 4);
  f.read(reinterpret_cast<char*>(r.hidden.data()), std::ssize(r.hidden) * 4);
  f.read(reinterpret_cast<char*>(r.logits.data()), std::ssize(r.logits) * 4);
  EXPECT_TRUE(f) << path << " is short";
  return r;
}

// Normalized mean squared error of `got` against `want` over n values.
double nmse(const float* got, const float* want, int64_t n) {
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (got[i] - want[i]) * double(got[i] - want[i]);
    norm += want[i] * double(want[i]);
  }
  return err / norm;
}

class NextnHeadOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Model::load((test::test_data_dir() / "tiny-qwen35moe-mtp-Q8_0.gguf").string());
    ref_ = read_reference(test::test_data_dir() / "tiny-qwen35moe-mtp.llama.mtp");
    ASSERT_NE(model_->nextn_head(), nullptr);
    ASSERT_EQ(ref_.n_embd, model_->hparams().n_embd);
    ASSERT_EQ(ref_.n_vocab, model_->hparams().n_vocab);
  }
  std::unique_ptr<Model> model_;
  MtpReference ref_;
  ThreadPool pool_{2};
};

TEST_F(NextnHeadOracle, TheTrunkGivesTheReferencesHiddenStates) {
  const int64_t d = ref_.n_embd, n = std::ssize(ref_.prompt);
  KvCache cache(model_->hparams(), 64, GgmlType::F16, model_->kv_layers());
  const SequenceKv kv = cache.layers();
  std::vector<float> state(static_cast<size_t>(model_->recurrent_state_floats()), 0.0f);
  float* states[] = {state.data()};
  std::vector<float> hidden(static_cast<size_t>(n * d)), logits(static_cast<size_t>(ref_.n_vocab));
  ForwardBatch batch;
  batch.tokens = ref_.prompt;
  batch.hidden = hidden.data();
  batch.recurrent = states;
  model_->forward(batch, std::span<const SequenceKv>(&kv, 1), logits.data(), pool_);
  // As the hybrid's logits are held against the oracle (tests/model/gdn_oracle_test.cpp): the
  // first row to rounding, at most 2 rows where a router near-tie flips an expert, and the rest
  // within what activation quantization and another summation order give.
  EXPECT_LT(nmse(hidden.data(), ref_.hidden.data(), d), 1e-5) << "first row";
  int flipped = 0;
  double err = 0, norm = 0;
  for (int64_t k = 0; k < n; ++k) {
    const float* got = hidden.data() + k * d;
    const float* want = ref_.hidden.data() + k * d;
    if (nmse(got, want, d) > 1e-2) {
      ++flipped;
      continue;
    }
    for (int64_t i = 0; i < d; ++i) {
      err += (got[i] - want[i]) * double(got[i] - want[i]);
      norm += want[i] * double(want[i]);
    }
  }
  EXPECT_LE(flipped, 2) << "rows over 1e-2";
  EXPECT_LT(err / norm, 1e-3) << "NMSE over the other rows";
  std::fprintf(stderr, "trunk hidden vs llama.cpp: NMSE %.2e over %lld rows, %d rows over 1e-2\n",
               err / norm, static_cast<long long>(n - flipped), flipped);
}

TEST_F(NextnHeadOracle, TheHeadGivesTheReferencesLogits) {
  const int64_t d = ref_.n_embd, v = ref_.n_vocab, n = std::ssize(ref_.prompt);
  ModelHParams one = model_->hparams();
  one.n_layer = 1;
  KvCache cache(one, 64, GgmlType::F16);
  NextnWorkspace ws;
  const std::vector<float> zero(static_cast<size_t>(d), 0.0f);
  std::vector<float> out(static_cast<size_t>(d)), logits(static_cast<size_t>(n * v));
  // Row by row, as drafting runs it (each row attends over the ones before it in the cache).
  for (int64_t k = 0; k < n; ++k) {
    const float* h = k == 0 ? zero.data() : ref_.hidden.data() + (k - 1) * d;
    model_->nextn_head()->forward(std::span<const int32_t>(ref_.prompt).subspan(k, 1), h, k,
                                  cache.layers()[0], out.data(), logits.data() + k * v, ws, pool_);
  }
  double worst = 0;
  int same_argmax = 0;
  for (int64_t k = 0; k < n; ++k) {
    const std::span<const float> got(logits.data() + k * v, static_cast<size_t>(v));
    const std::span<const float> want(ref_.logits.data() + k * v, static_cast<size_t>(v));
    worst = std::max(worst, nmse(got.data(), want.data(), v));
    same_argmax += argmax(got) == argmax(want);
  }
  EXPECT_LT(worst, 1e-3) << "worst row's logit NMSE";
  EXPECT_GE(same_argmax, n - 1) << "rows whose top token agrees, of " << n;
  std::fprintf(stderr, "MTP head vs llama.cpp: worst row NMSE %.2e, top token %d of %lld rows\n",
               worst, same_argmax, static_cast<long long>(n));
}

}  // namespace
}  // namespace strata
