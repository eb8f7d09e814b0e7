#include "model/tensor_role.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(TensorRole, ClassifiesRealTensorNames) {
  EXPECT_EQ(classify_tensor("blk.0.ffn_up_exps.weight"), TensorRole::routed_experts);
  EXPECT_EQ(classify_tensor("blk.12.ffn_gate_up_exps.weight"), TensorRole::routed_experts);
  EXPECT_EQ(classify_tensor("blk.3.ffn_down_shexp.weight"), TensorRole::shared_experts);
  EXPECT_EQ(classify_tensor("blk.3.ffn_gate_inp_shexp.weight"), TensorRole::shared_experts);
  EXPECT_EQ(classify_tensor("blk.3.ffn_gate_inp.weight"), TensorRole::router);
  EXPECT_EQ(classify_tensor("blk.3.ffn_gate.weight"), TensorRole::dense_ffn);
  EXPECT_EQ(classify_tensor("blk.3.attn_q.weight"), TensorRole::attention);
  EXPECT_EQ(classify_tensor("blk.3.attn_output.weight"), TensorRole::attention);
  EXPECT_EQ(classify_tensor("blk.3.attn_q_norm.weight"), TensorRole::norms);
  EXPECT_EQ(classify_tensor("blk.0.ssm_conv1d.weight"), TensorRole::recurrent);
  EXPECT_EQ(classify_tensor("blk.0.ssm_dt.bias"), TensorRole::recurrent);
  EXPECT_EQ(classify_tensor("token_embd.weight"), TensorRole::embeddings);
  EXPECT_EQ(classify_tensor("output.weight"), TensorRole::output);
  EXPECT_EQ(classify_tensor("output_norm.weight"), TensorRole::norms);
  EXPECT_EQ(classify_tensor("rope_freqs.weight"), TensorRole::other);
}

TEST(TensorRole, ClassifiesGptOssGlmQwen3NextTensors) {
  EXPECT_EQ(classify_tensor("blk.0.attn_q.bias"), TensorRole::attention);
  EXPECT_EQ(classify_tensor("blk.0.attn_output.bias"), TensorRole::attention);
  EXPECT_EQ(classify_tensor("blk.0.attn_sinks.weight"), TensorRole::attention);
  EXPECT_EQ(classify_tensor("blk.0.ffn_gate_inp.bias"), TensorRole::router);
  EXPECT_EQ(classify_tensor("blk.1.exp_probs_b.bias"), TensorRole::router);
  EXPECT_EQ(classify_tensor("blk.0.ffn_gate_exps.bias"), TensorRole::routed_experts);
  EXPECT_EQ(classify_tensor("blk.0.ffn_down_exps.bias"), TensorRole::routed_experts);
  EXPECT_EQ(classify_tensor("blk.0.ssm_ba.weight"), TensorRole::recurrent);
  EXPECT_EQ(classify_tensor("blk.0.ssm_in.weight"), TensorRole::recurrent);
  EXPECT_EQ(classify_tensor("blk.0.ssm_a"), TensorRole::recurrent);
  EXPECT_EQ(classify_tensor("blk.0.attn_gate.weight"), TensorRole::attention);
  EXPECT_EQ(classify_tensor("blk.0.ffn_up.weight"), TensorRole::dense_ffn);
  EXPECT_EQ(classify_tensor("blk.46.nextn.eh_proj.weight"), TensorRole::other);
}

TEST(TensorRole, LayerIndex) {
  EXPECT_EQ(tensor_layer("blk.0.attn_q.weight"), 0);
  EXPECT_EQ(tensor_layer("blk.47.ffn_up_exps.weight"), 47);
  EXPECT_EQ(tensor_layer("token_embd.weight"), std::nullopt);
  EXPECT_EQ(tensor_layer("blk.x.attn_q.weight"), std::nullopt);
  EXPECT_EQ(tensor_layer("blk.12"), std::nullopt);
}

}  // namespace
}  // namespace strata
