// The generator's gpt-oss, glm4moe, qwen3next and Mixtral models: they load, run, report the
// bytes a token reads, and the gpt-oss-20b / GLM-4.5-Air presets have the published shapes.

#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "synthetic_model.h"

namespace strata::tools {
namespace {

std::vector<float> run_tokens(Model& model, int n) {
  ThreadPool pool(2);
  Session session(model, n, GgmlType::F16, pool);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    tokens[static_cast<size_t>(i)] = (i * 37 + 11) % static_cast<int32_t>(model.hparams().n_vocab);
  std::vector<float> logits;
  session.eval(tokens, true, logits);
  return logits;
}

void expect_finite(const std::vector<float>& logits, size_t n) {
  ASSERT_EQ(logits.size(), n);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// What a single-token step reads outside the routed experts, from the file: every tensor but the
// routed experts (weights and biases) and the embedding table, plus one embedding row.
int64_t file_dense_bytes_per_token(const GgufFile& f) {
  int64_t total = 0;
  for (const auto& t : f.tensors()) {
    if (t.name.find("_exps.") != std::string::npos) continue;
    total += static_cast<int64_t>(t.name == "token_embd.weight" ? t.bytes / t.shape[1] : t.bytes);
  }
  return total;
}

SyntheticModelSpec tiny(const std::string& arch, const std::string& ftype) {
  SyntheticModelSpec s;
  s.arch = arch;
  s.ftype = ftype;
  s.n_layer = 4;
  s.sliding_window = 5;  // gpt-oss: 12 tokens run past it
  s.n_ff_exp = arch == "glm4moe" ? 128 : 256;
  return s;
}

TEST(SyntheticArchs, LoadRunAndCountTheirBytes) {
  const std::pair<const char*, const char*> cases[] = {
      {"gpt-oss", "Q4_K_M"}, {"gpt-oss", "MXFP4_MOE"}, {"gpt-oss", "Q8_0"},
      {"glm4moe", "Q4_K_M"}, {"glm4moe", "Q8_0"},      {"qwen3next", "Q4_K_M"},
      {"qwen3next", "Q8_0"}, {"mixtral", "Q4_K_M"},    {"mixtral", "Q8_0"}};
  for (const auto& [arch, ftype] : cases) {
    SCOPED_TRACE(std::string(arch) + " " + ftype);
    const SyntheticModelSpec s = tiny(arch, ftype);
    const auto path = (test::temp_dir() / "arch.gguf").string();
    write_synthetic_model(s, path);
    auto model = Model::load(path);
    EXPECT_EQ(model->hparams().arch, std::string(arch) == "mixtral" ? "llama" : arch);
    EXPECT_EQ(model->hparams().n_layer, 4);
    EXPECT_EQ(model->hparams().n_expert, 8);
    expect_finite(run_tokens(*model, 12), 12u * 512);

    const GgufFile f = GgufFile::open(path);
    const int64_t dense = file_dense_bytes_per_token(f);
    if (std::string(arch) == "qwen3next") {
      // The hybrid decoder's count leaves out its attention layers' q/k norms (a few bytes).
      EXPECT_NEAR(static_cast<double>(model->dense_bytes_per_token()), static_cast<double>(dense),
                  1e-3 * static_cast<double>(dense));
    } else {
      EXPECT_EQ(model->dense_bytes_per_token(), dense);
    }
    // One expert of the first MoE layer: gate, up and down, with their biases where the file
    // has them (gpt-oss).
    const std::string first = std::string(arch) == "glm4moe" ? "blk.1." : "blk.0.";
    int64_t experts = 0;
    for (const char* name : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
                             "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"}) {
      if (const auto* t = f.find_tensor(first + name)) experts += static_cast<int64_t>(t->bytes);
    }
    EXPECT_EQ(model->expert_bytes() * 8, experts);
    if (std::string(arch) == "gpt-oss") {
      EXPECT_TRUE(f.find_tensor(first + "ffn_down_exps.bias"));
    }
  }
}

TEST(SyntheticArchs, EachArchitectureHasItsOwnTensors) {
  std::string path;
  auto write = [&path](const std::string& arch, const std::string& ftype) {
    path = (test::temp_dir() / (arch + ".gguf")).string();
    write_synthetic_model(tiny(arch, ftype), path);
    return GgufFile::open(path);
  };
  {
    const GgufFile f = write("gpt-oss", "MXFP4_MOE");
    EXPECT_EQ(f.get_int("gpt-oss.attention.sliding_window"), 5);
    EXPECT_EQ(f.get_int("general.file_type"), 38);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_up_exps.weight")->type, GgmlType::MXFP4);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q8_0);
    EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q8_0);
    EXPECT_EQ(f.find_tensor("blk.0.attn_sinks.weight")->shape, (std::vector<int64_t>{4}));
    EXPECT_EQ(f.find_tensor("blk.0.ffn_down_exps.bias")->shape, (std::vector<int64_t>{256, 8}));
    EXPECT_TRUE(f.find_tensor("blk.1.attn_output.bias"));
    EXPECT_FALSE(f.find_tensor("blk.0.attn_q_norm.weight"));
  }
  {
    const GgufFile f = write("glm4moe", "Q8_0");
    EXPECT_TRUE(f.find_tensor("blk.0.ffn_gate.weight"));  // the leading dense layer
    EXPECT_FALSE(f.find_tensor("blk.0.ffn_gate_exps.weight"));
    EXPECT_TRUE(f.find_tensor("blk.1.exp_probs_b.bias"));
    EXPECT_FALSE(f.find_tensor("blk.1.ffn_gate_inp_shexp.weight"));  // ungated shared expert
    EXPECT_EQ(f.get_int("glm4moe.expert_shared_count"), 2);          // 256 of 128-wide experts
    EXPECT_TRUE(f.find_tensor("blk.1.attn_k.bias"));
  }
  {
    const GgufFile f = write("qwen3next", "Q8_0");
    EXPECT_EQ(f.find_tensor("blk.0.ssm_ba.weight")->shape, (std::vector<int64_t>{256, 8}));
    EXPECT_FALSE(f.find_tensor("blk.0.ssm_beta.weight"));
    EXPECT_FALSE(f.find("qwen3next.rope.dimension_sections"));
    auto model = Model::load(path);
    EXPECT_EQ(model->kv_layers(), (std::vector<bool>{false, false, false, true}));
  }
  {
    const GgufFile f = write("mixtral", "Q8_0");
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.feed_forward_length"), 256);  // the experts' width
    EXPECT_FALSE(f.find("llama.expert_feed_forward_length"));
    EXPECT_TRUE(f.find_tensor("blk.0.ffn_norm.weight"));
  }
}

TEST(SyntheticArchs, GptOss20bPresetShape) {
  const SyntheticModelSpec p = gpt_oss_20b_spec(24);
  EXPECT_EQ(p.n_layer, 24);
  EXPECT_EQ(p.n_embd, 2880);
  EXPECT_EQ(p.n_head, 64);
  EXPECT_EQ(p.n_head_kv, 8);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.n_expert, 32);
  EXPECT_EQ(p.n_expert_used, 4);
  EXPECT_EQ(p.n_ff_exp, 2880);
  EXPECT_EQ(p.n_vocab, 201088);
  EXPECT_EQ(p.sliding_window, 128);
  EXPECT_EQ(p.ftype, "MXFP4_MOE");
  // One layer of it (~0.45 GB, the experts in MXFP4) with a small vocabulary: written, loaded, run.
  SyntheticModelSpec s = gpt_oss_20b_spec(1);
  s.n_vocab = 512;
  const auto path = (test::temp_dir() / "gpt-oss-20b.gguf").string();
  write_synthetic_model(s, path);
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->shape, (std::vector<int64_t>{2880, 4096}));
    EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{2880, 512}));
    EXPECT_EQ(f.find_tensor("blk.0.attn_output.weight")->shape, (std::vector<int64_t>{4096, 2880}));
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->shape,
              (std::vector<int64_t>{2880, 2880, 32}));
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->type, GgmlType::MXFP4);
    EXPECT_EQ(f.find_tensor("blk.0.attn_sinks.weight")->shape, (std::vector<int64_t>{64}));
    EXPECT_EQ(f.get_string("gpt-oss.rope.scaling.type"), "yarn");
  }
  auto model = Model::load(path);
  EXPECT_EQ(model->hparams().sliding_window, 128);
  expect_finite(run_tokens(*model, 2), 2u * 512);
}

TEST(SyntheticArchs, Glm45AirPresetShape) {
  const SyntheticModelSpec p = glm_45_air_spec(46);
  EXPECT_EQ(p.n_layer, 46);
  EXPECT_EQ(p.n_embd, 4096);
  EXPECT_EQ(p.n_head, 96);
  EXPECT_EQ(p.n_head_kv, 8);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.n_rot, 64);
  EXPECT_EQ(p.n_ff, 10944);
  EXPECT_EQ(p.n_leading_dense, 1);
  EXPECT_EQ(p.n_expert, 128);
  EXPECT_EQ(p.n_expert_used, 8);
  EXPECT_EQ(p.n_ff_exp, 1408);
  EXPECT_EQ(p.n_ff_shexp, 1408);
  EXPECT_FALSE(p.qk_norm);
  EXPECT_EQ(p.n_vocab, 151552);
  // Its dense layer and one MoE layer with 8 of the 128 experts (the file stays ~0.3 GB).
  SyntheticModelSpec s = glm_45_air_spec(2);
  s.n_vocab = 512;
  s.n_expert = 8;
  const auto path = (test::temp_dir() / "glm-4.5-air.gguf").string();
  write_synthetic_model(s, path);
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->shape, (std::vector<int64_t>{4096, 12288}));
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias")->shape, (std::vector<int64_t>{12288}));
    EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->shape, (std::vector<int64_t>{4096, 10944}));
    EXPECT_EQ(f.find_tensor("blk.1.ffn_down_exps.weight")->shape,
              (std::vector<int64_t>{1408, 4096, 8}));
    EXPECT_EQ(f.find_tensor("blk.1.ffn_down_shexp.weight")->shape,
              (std::vector<int64_t>{1408, 4096}));
    // Rows of 1408 are no whole number of K-quant blocks: a 32-value type, as quantizers do.
    EXPECT_EQ(ggml_type_info(f.find_tensor("blk.1.ffn_down_exps.weight")->type).block_elems, 32);
    EXPECT_FALSE(f.find_tensor("blk.0.attn_q_norm.weight"));
    EXPECT_EQ(f.get_int("glm4moe.rope.dimension_count"), 64);
  }
  auto model = Model::load(path);
  expect_finite(run_tokens(*model, 2), 2u * 512);
}

}  // namespace
}  // namespace strata::tools
