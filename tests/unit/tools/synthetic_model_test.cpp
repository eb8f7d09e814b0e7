// The synthetic model generator writes files strata loads and runs, with the requested shapes,
// type mix and router skew.

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "synthetic_model.h"

namespace strata::tools {
namespace {

std::vector<float> run_tokens(Model& model, int n, ForwardStats* stats = nullptr) {
  ThreadPool pool(2);
  Session session(model, n, GgmlType::F16, pool);
  if (stats)
    session.stats().expert_counts.assign(
        static_cast<size_t>(model.hparams().n_layer * model.hparams().n_expert), 0);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    tokens[static_cast<size_t>(i)] = (i * 37 + 11) % static_cast<int32_t>(model.hparams().n_vocab);
  std::vector<float> logits;
  session.eval(tokens, true, logits);
  if (stats) *stats = session.stats();
  return logits;
}

TEST(SyntheticModel, EveryArchitectureLoadsAndRuns) {
  for (const char* arch : {"qwen3moe", "qwen3", "llama"}) {
    for (const char* ftype : {"Q4_K_M", "Q8_0", "IQ4_XS"}) {
      SCOPED_TRACE(std::string(arch) + " " + ftype);
      SyntheticModelSpec s;
      s.arch = arch;
      s.ftype = ftype;
      s.n_layer = 3;
      const auto path = (test::temp_dir() / "m.gguf").string();
      write_synthetic_model(s, path);
      auto model = Model::load(path);
      EXPECT_EQ(model->hparams().arch, arch);
      EXPECT_EQ(model->hparams().n_layer, 3);
      const auto logits = run_tokens(*model, 12);
      ASSERT_EQ(logits.size(), 12u * 512);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v));
      const GgufFile f = GgufFile::open(path);
      if (std::string(ftype) == "Q4_K_M") {
        EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q6_K);
        EXPECT_EQ(f.find_tensor("blk.1.attn_q.weight")->type, GgmlType::Q4_K);
      } else {
        EXPECT_EQ(f.find_tensor("blk.1.attn_q.weight")->type, *ggml_type_from_name(ftype));
      }
    }
  }
}

TEST(SyntheticModel, Qwen35MoeHybridLoadsAndRuns) {
  for (const char* ftype : {"Q4_K_M", "Q8_0"}) {
    SCOPED_TRACE(ftype);
    SyntheticModelSpec s;
    s.arch = "qwen35moe";
    s.ftype = ftype;
    s.n_layer = 5;  // GDN, GDN, GDN, attention, GDN
    const auto path = (test::temp_dir() / "hybrid.gguf").string();
    write_synthetic_model(s, path);
    auto model = Model::load(path);
    EXPECT_EQ(model->hparams().arch, "qwen35moe");
    EXPECT_EQ(model->kv_layers(), (std::vector<bool>{false, false, false, true, false}));
    EXPECT_GT(model->recurrent_state_floats(), 0);
    const auto logits = run_tokens(*model, 12);
    ASSERT_EQ(logits.size(), 12u * 512);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.find_tensor("blk.3.attn_q.weight")->shape, (std::vector<int64_t>{256, 2 * 4 * 64}));
    EXPECT_EQ(f.find_tensor("blk.0.ssm_conv1d.weight")->shape, (std::vector<int64_t>{4, 512}));
  }
}

// The Qwen3.5-35B-A3B preset's shapes, checked on the metadata and the tensor table (one
// layer of each kind; the file is ~0.4 GB per GDN layer, so only 4 layers).
TEST(SyntheticModel, Qwen35_35B_Shape) {
  SyntheticModelSpec s = qwen35_35b_a3b_spec(4);
  s.n_vocab = 512;  // the shapes that matter are the layers'
  const auto path = (test::temp_dir() / "q35.gguf").string();
  write_synthetic_model(s, path);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_int("qwen35moe.ssm.inner_size"), 4096);
  EXPECT_EQ(f.get_int("qwen35moe.ssm.group_count"), 16);
  EXPECT_EQ(f.get_int("qwen35moe.ssm.time_step_rank"), 32);
  EXPECT_EQ(f.get_int("qwen35moe.rope.dimension_count"), 64);
  EXPECT_EQ(f.find_tensor("blk.0.attn_qkv.weight")->shape, (std::vector<int64_t>{2048, 8192}));
  EXPECT_EQ(f.find_tensor("blk.3.attn_q.weight")->shape, (std::vector<int64_t>{2048, 8192}));
  EXPECT_EQ(f.find_tensor("blk.3.attn_k.weight")->shape, (std::vector<int64_t>{2048, 512}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up_exps.weight")->shape,
            (std::vector<int64_t>{2048, 512, 256}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down_shexp.weight")->shape, (std::vector<int64_t>{512, 2048}));
  auto model = Model::load(path);
  // Per sequence: 3 GDN layers x (conv 3 x 8192 + S 32 x 128 x 128) floats, plus the header.
  EXPECT_EQ(model->recurrent_state_floats(), 16 + 3 * (3 * 8192 + 32 * 128 * 128));
  const auto logits = run_tokens(*model, 3);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(SyntheticModel, Qwen3_30B_Shape) {
  const SyntheticModelSpec s = qwen3_30b_a3b_spec(8);
  EXPECT_EQ(s.n_embd, 2048);
  EXPECT_EQ(s.n_head, 32);
  EXPECT_EQ(s.n_head_kv, 4);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.n_expert, 128);
  EXPECT_EQ(s.n_expert_used, 8);
  EXPECT_EQ(s.n_ff_exp, 768);
  EXPECT_EQ(s.n_vocab, 151936);
  EXPECT_EQ(s.n_layer, 8);
}

TEST(SyntheticModel, SkewedRouterMakesHotExperts) {
  SyntheticModelSpec s;
  s.n_layer = 2;
  s.n_expert = 16;
  s.n_expert_used = 2;
  s.hot_fraction = 0.25;  // 4 hot experts of 16
  const auto path = (test::temp_dir() / "skewed.gguf").string();
  write_synthetic_model(s, path);
  auto model = Model::load(path);
  ForwardStats stats;
  run_tokens(*model, 200, &stats);
  // Hot experts are those with (e * hot) % n < hot, as the generator spreads them.
  uint64_t hot = 0, all = 0;
  for (int64_t layer = 0; layer < 2; ++layer) {
    for (int64_t e = 0; e < 16; ++e) {
      const uint64_t c = stats.expert_counts[static_cast<size_t>(layer * 16 + e)];
      all += c;
      if ((e * 4) % 16 < 4) hot += c;
    }
  }
  EXPECT_EQ(all, 200u * 2 * 2);
  EXPECT_GT(static_cast<double>(hot) / static_cast<double>(all), 0.5)
      << "4 of 16 experts should take well over their uniform 25% share";
}

TEST(SyntheticModel, CopiesAVocabularyPaddedToTheModelsSize) {
  SyntheticModelSpec s;
  s.n_layer = 1;
  s.n_vocab = 151936;  // Qwen3-30B-A3B's embedding rows; the tokenizer has 151,669 tokens
  s.ftype = "Q8_0";
  s.n_embd = 64;
  s.n_head = 1;
  s.n_head_kv = 1;
  s.vocab_from = (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string();
  const auto path = (test::temp_dir() / "vocab.gguf").string();
  write_synthetic_model(s, path);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").items.size(), 151936u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.token_type").items.size(), 151936u);
  EXPECT_EQ(*f.get_array("tokenizer.ggml.tokens").items[151935].as_string(), "[PAD151935]");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_TRUE(f.find_string("tokenizer.chat_template").has_value());
  EXPECT_EQ(f.get_array("tokenizer.ggml.merges").items.size(), 151387u);
  s.n_vocab = 1000;  // smaller than the tokenizer: refused
  EXPECT_ANY_THROW(write_synthetic_model(s, path));
}

TEST(SyntheticModel, RejectsBadSpecs) {
  SyntheticModelSpec s;
  s.arch = "gpt2";
  EXPECT_ANY_THROW(write_synthetic_model(s, (test::temp_dir() / "x.gguf").string()));
  s = SyntheticModelSpec{};
  s.ftype = "IQ2_XXS";
  EXPECT_ANY_THROW(write_synthetic_model(s, (test::temp_dir() / "y.gguf").string()));
  s = SyntheticModelSpec{};
  s.n_expert_used = 9;
  EXPECT_ANY_THROW(write_synthetic_model(s, (test::temp_dir() / "z.gguf").string()));
}

}  // namespace
}  // namespace strata::tools
