// One forward over tokens of several sequences in a shared paged KV pool gives each sequence the
// logits it gets alone. Matrix products and MoE compute every token row independently of the
// other rows (the same dot products, the same expert order in the weighted sum), and attention
// chunks positions identically for paged and contiguous caches, so the bound is tight; it is not
// an equality only because a matmul may tile a different number of rows differently.
// Each test runs on the CPU and, when built with Vulkan, with the whole model on the test device
// (lavapipe in CI), whose kernels also compute every token row on its own.

#include <gtest/gtest.h>

#include <vector>

#include "model/model.h"
#include "runtime/kv_pool.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "util/error.h"

#ifdef STRATA_HAVE_VULKAN
#include "backend/vulkan/gpu_model.h"
#include "unit/vulkan/gpu_test_device.h"
#endif

namespace strata {
namespace {

constexpr double kMaxNmse = 1e-6;

std::vector<int32_t> make_tokens(int n, int seed) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back((i * 131 + seed * 71 + 7) % 512);
  return tokens;
}

// Logits of every position of `tokens` when the sequence runs alone through a Session.
std::vector<float> alone(Model& model, const std::vector<int32_t>& tokens, ThreadPool& pool) {
  Session session(model, 128, GgmlType::F16, pool);
  std::vector<float> logits;
  session.eval(tokens, true, logits);
  return logits;
}

// Builds a multi-sequence batch a token at a time, then runs it.
class BatchBuilder {
 public:
  // Adds token `pos` of `tokens` for sequence `seq`; want_logits asks for its row.
  void add(int32_t seq, const std::vector<int32_t>& tokens, int64_t pos, bool want_logits) {
    if (want_logits) {
      logit_rows_.push_back(static_cast<int32_t>(tokens_.size()));
      wanted_.push_back({seq, pos});
    }
    tokens_.push_back(tokens[static_cast<size_t>(pos)]);
    sequences_.push_back(seq);
    positions_.push_back(pos);
  }
  ForwardBatch batch() const {
    ForwardBatch b;
    b.tokens = tokens_;
    b.sequences = sequences_;
    b.positions = positions_;
    b.logit_rows = logit_rows_;
    return b;
  }
  struct Wanted {
    int32_t seq;
    int64_t pos;
  };
  const std::vector<Wanted>& wanted() const { return wanted_; }

 private:
  std::vector<int32_t> tokens_, sequences_, logit_rows_;
  std::vector<int64_t> positions_;
  std::vector<Wanted> wanted_;
};

// The backends the tests run on: "cpu", and "vk" (the Vulkan test device) when built with it.
std::vector<std::string> backends() {
#ifdef STRATA_HAVE_VULKAN
  return {"cpu", "vk"};
#else
  return {"cpu"};
#endif
}

class MultiSequence : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
#ifdef STRATA_HAVE_VULKAN
    if (GetParam() == "vk") model_ = vk::load_gpu_model(path, vk::test::shared_test_device());
#endif
    if (!model_) model_ = Model::load(path);
    n_vocab_ = model_->hparams().n_vocab;
  }
  // A pool whose page copies the model hears of (a GPU model copies its own keys and values).
  std::unique_ptr<KvPool> make_pool(int64_t n_pages, int64_t page_size, GgmlType type) {
    auto pool = std::make_unique<KvPool>(model_->hparams(), n_pages, page_size, type);
    pool->set_copy_listener(model_.get());
    return pool;
  }
  // Runs the batch over the sequences (reserving their pages first) and returns its logits.
  std::vector<float> run(const BatchBuilder& builder, std::vector<KvSequence>& seqs) {
    const ForwardBatch batch = builder.batch();
    std::vector<int64_t> end(seqs.size(), 0);
    for (size_t t = 0; t < batch.tokens.size(); ++t) {
      int64_t& e = end[static_cast<size_t>(batch.sequences[t])];
      e = std::max(e, batch.positions[t] + 1);
    }
    for (size_t s = 0; s < seqs.size(); ++s) EXPECT_TRUE(seqs[s].reserve(end[s]));
    std::vector<SequenceKv> kv;
    for (const KvSequence& seq : seqs) kv.push_back(seq.layers());
    std::vector<float> logits(batch.logit_rows.size() * static_cast<size_t>(n_vocab_));
    model_->forward(batch, kv, logits.data(), pool_);
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (end[s] > seqs[s].length()) seqs[s].set_length(end[s]);
    }
    return logits;
  }
  // Checks each requested row against that sequence's position in `reference`.
  void expect_rows_match(const BatchBuilder& builder, const std::vector<float>& logits,
                         const std::vector<std::vector<float>>& reference) {
    for (size_t i = 0; i < builder.wanted().size(); ++i) {
      const auto [seq, pos] = builder.wanted()[i];
      const float* want = reference[static_cast<size_t>(seq)].data() + pos * n_vocab_;
      EXPECT_LT(test::nmse(logits.data() + i * n_vocab_, want, static_cast<size_t>(n_vocab_)),
                kMaxNmse)
          << "sequence " << seq << " position " << pos;
    }
  }

  std::unique_ptr<Model> model_;
  ThreadPool pool_{2};
  int64_t n_vocab_ = 0;
};

TEST_P(MultiSequence, MixedBatchEqualsSeparateRuns) {
  const std::vector<std::vector<int32_t>> tokens = {make_tokens(45, 1), make_tokens(27, 2),
                                                    make_tokens(9, 3)};
  std::vector<std::vector<float>> reference;
  for (const auto& t : tokens) reference.push_back(alone(*model_, t, pool_));

  auto pool_owner = make_pool(16, 16, GgmlType::F16);
  KvPool& kv_pool = *pool_owner;
  std::vector<KvSequence> seqs;
  for (int i = 0; i < 3; ++i) seqs.emplace_back(kv_pool);

  // Step 1: prefill of sequences 1 and 2 (their pages interleave in the pool).
  BatchBuilder step1;
  for (int64_t p = 0; p < 20; ++p) step1.add(1, tokens[1], p, p == 19);
  for (int64_t p = 0; p < 5; ++p) step1.add(2, tokens[2], p, p == 4);
  expect_rows_match(step1, run(step1, seqs), reference);

  // Steps 2-3: a prefill chunk of sequence 0 beside decode tokens of the others, in varying
  // row orders, asking for logits of several rows of the chunk too.
  BatchBuilder step2;
  step2.add(2, tokens[2], 5, true);
  for (int64_t p = 0; p < 24; ++p) step2.add(0, tokens[0], p, p % 7 == 0 || p == 23);
  step2.add(1, tokens[1], 20, true);
  expect_rows_match(step2, run(step2, seqs), reference);

  BatchBuilder step3;
  for (int64_t p = 24; p < 40; ++p) step3.add(0, tokens[0], p, p == 39 || p == 31);
  step3.add(1, tokens[1], 21, true);
  step3.add(1, tokens[1], 22, true);  // two tokens of one sequence: the second sees the first
  step3.add(2, tokens[2], 6, false);
  expect_rows_match(step3, run(step3, seqs), reference);

  // Decode steps for all three until each sequence ends.
  for (int64_t step = 0; step < 5; ++step) {
    BatchBuilder decode;
    const int64_t next[3] = {40 + step, 23 + step, 7 + step};
    for (int32_t s : {2, 0, 1}) {
      if (next[s] < static_cast<int64_t>(tokens[static_cast<size_t>(s)].size()))
        decode.add(s, tokens[static_cast<size_t>(s)], next[s], true);
    }
    expect_rows_match(decode, run(decode, seqs), reference);
  }
  seqs.clear();
  EXPECT_EQ(kv_pool.free_pages(), kv_pool.total_pages());
}

// A sequence sharing another's prefix and continuing with other tokens writes only its own
// copies of pages: the owner's next logits are unchanged.
TEST_P(MultiSequence, CopyOnWriteKeepsTheOtherSequenceIntact) {
  const std::vector<int32_t> a = make_tokens(40, 4);
  std::vector<int32_t> b(a.begin(), a.begin() + 20);  // a's first 20, then its own
  for (int32_t t : make_tokens(10, 5)) b.push_back(t);
  const std::vector<std::vector<float>> reference = {alone(*model_, a, pool_),
                                                     alone(*model_, b, pool_)};

  auto pool_owner = make_pool(12, 16, GgmlType::Q8_0);
  KvPool& kv_pool = *pool_owner;
  std::vector<KvSequence> seqs;
  seqs.emplace_back(kv_pool);
  seqs.emplace_back(kv_pool);
  BatchBuilder prefill;
  for (int64_t p = 0; p < 37; ++p) prefill.add(0, a, p, false);
  run(prefill, seqs);

  // Q8_0 caches: the reference is an F16 Session, so compare a against itself instead.
  std::vector<float> a_before;
  {
    KvSequence probe(kv_pool);
    ASSERT_TRUE(probe.share_prefix(seqs[0], 37));
    std::vector<KvSequence> only;
    only.push_back(std::move(probe));
    BatchBuilder next;
    next.add(0, a, 37, true);
    a_before = run(next, only);
  }

  const int64_t free_before = kv_pool.free_pages();
  ASSERT_TRUE(seqs[1].share_prefix(seqs[0], 37));  // 2 full pages shared, 1 copied
  EXPECT_EQ(kv_pool.free_pages(), free_before - 1);
  seqs[1].truncate(20);  // back into the shared second page
  EXPECT_EQ(kv_pool.free_pages(), free_before);
  BatchBuilder diverge;
  for (int64_t p = 20; p < 30; ++p) diverge.add(1, b, p, p == 29);
  const std::vector<float> b_last = run(diverge, seqs);  // copies page 1 before writing
  EXPECT_EQ(kv_pool.free_pages(), free_before - 1);
  {  // b reads positions 16-19 from its copy of page 1: like a fresh run of b
    auto fresh_owner = make_pool(4, 16, GgmlType::Q8_0);
    std::vector<KvSequence> fresh;
    fresh.emplace_back(*fresh_owner);
    BatchBuilder whole;
    for (int64_t p = 0; p < 30; ++p) whole.add(0, b, p, p == 29);
    const std::vector<float> b_fresh = run(whole, fresh);
    EXPECT_LT(test::nmse(b_last.data(), b_fresh.data(), b_fresh.size()), kMaxNmse);
  }

  BatchBuilder next;
  next.add(0, a, 37, true);
  const std::vector<float> a_after = run(next, seqs);
  EXPECT_EQ(a_after, a_before);
  seqs.clear();
  EXPECT_EQ(kv_pool.free_pages(), kv_pool.total_pages());
}

TEST_P(MultiSequence, SharedPrefixContinuesLikeAFreshRun) {
  const std::vector<int32_t> a = make_tokens(33, 6);
  std::vector<int32_t> b(a.begin(), a.begin() + 32);
  for (int32_t t : make_tokens(6, 7)) b.push_back(t);
  const std::vector<std::vector<float>> reference = {alone(*model_, a, pool_),
                                                     alone(*model_, b, pool_)};
  auto pool_owner = make_pool(8, 16, GgmlType::F16);
  KvPool& kv_pool = *pool_owner;
  std::vector<KvSequence> seqs;
  seqs.emplace_back(kv_pool);
  seqs.emplace_back(kv_pool);
  BatchBuilder prefill;
  for (int64_t p = 0; p < 33; ++p) prefill.add(0, a, p, p == 32);
  expect_rows_match(prefill, run(prefill, seqs), reference);
  ASSERT_TRUE(seqs[1].share_prefix(seqs[0], 32));  // page-aligned: both pages shared
  BatchBuilder rest;
  for (int64_t p = 32; p < 38; ++p) rest.add(1, b, p, true);
  expect_rows_match(rest, run(rest, seqs), reference);
}

TEST_P(MultiSequence, BadBatchesAreErrors) {
  auto pool_owner = make_pool(4, 16, GgmlType::F16);
  KvPool& kv_pool = *pool_owner;
  KvSequence seq(kv_pool);
  ASSERT_TRUE(seq.reserve(16));
  const std::vector<SequenceKv> kv = {seq.layers()};
  std::vector<float> logits(static_cast<size_t>(4 * n_vocab_));
  const std::vector<int32_t> tokens = {1, 2, 3};
  auto forward = [&](std::vector<int32_t> sequences, std::vector<int64_t> positions,
                     std::vector<int32_t> rows, std::span<const SequenceKv> caches) {
    ForwardBatch b;
    b.tokens = tokens;
    b.sequences = sequences;
    b.positions = positions;
    b.logit_rows = rows;
    model_->forward(b, caches, logits.data(), pool_);
  };
  auto expect_error = [&](auto&& call, const char* words) {
    try {
      call();
      ADD_FAILURE() << "expected an error mentioning '" << words << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error([&] { forward({0, 0}, {0, 1, 2}, {2}, kv); }, "sequence indices");
  expect_error([&] { forward({0, 0, 0}, {0, 1}, {2}, kv); }, "positions");
  expect_error([&] { forward({0, 0, 1}, {0, 1, 0}, {2}, kv); }, "sequence 1");
  expect_error([&] { forward({0, 0, -1}, {0, 1, 2}, {2}, kv); }, "sequence -1");
  expect_error([&] { forward({0, 0, 0}, {-1, 0, 1}, {2}, kv); }, "negative position");
  expect_error([&] { forward({0, 0, 0}, {0, 2, 3}, {2}, kv); }, "consecutive");
  expect_error([&] { forward({0, 0, 0}, {0, 1, 2}, {3}, kv); }, "logit row 3");
  expect_error([&] { forward({0, 0, 0}, {14, 15, 16}, {2}, kv); }, "holds 16 positions");
  expect_error([&] { forward({0, 0, 0}, {0, 1, 2}, {2}, {}); }, "at least one sequence");
  const SequenceKv short_kv = seq.layers().first(1);
  expect_error([&] { forward({0, 0, 0}, {0, 1, 2}, {2}, std::span(&short_kv, 1)); }, "layers");
  {
    const std::vector<int64_t> positions = {0, 1, 2};
    ForwardBatch b;
    b.tokens = tokens;
    b.positions = positions;
    expect_error([&] { model_->forward(b, kv, logits.data(), pool_); }, "per-token sequences");
  }
  {
    ForwardBatch b;
    expect_error([&] { model_->forward(b, kv, logits.data(), pool_); }, "at least one token");
  }
  {
    KvSequence empty(kv_pool);
    const std::vector<SequenceKv> none = {empty.layers()};
    ForwardBatch b;
    b.tokens = tokens;
    expect_error([&] { model_->forward(b, none, logits.data(), pool_); }, "holds 0 positions");
  }
  // After all of that the cache still works.
  forward({0, 0, 0}, {0, 1, 2}, {0, 1, 2}, kv);
}

INSTANTIATE_TEST_SUITE_P(Backends, MultiSequence, testing::ValuesIn(backends()));

}  // namespace
}  // namespace strata
