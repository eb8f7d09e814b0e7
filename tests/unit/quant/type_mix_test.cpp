// The mix rules where the oracle's files (all from 8-expert or dense models; see
// QuantizeCommand.MixesGiveEveryTensorTheTypeAnIndependentQuantizerGave) do not reach: models
// with many experts (Qwen3-30B-A3B's 128), grouped heads, layer positions, pure files.

#include "quant/type_mix.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace strata::quant {
namespace {

MatrixRole role(std::string name, int64_t layer, int64_t n_expert, int64_t n_gqa = 1) {
  return {.role = std::move(name),
          .layer = layer,
          .n_layer = 48,
          .cols = 2048,
          .n_expert = n_expert,
          .n_gqa = n_gqa};
}

TEST(TypeMix, OnlyEightExpertModelsGetEightBitKeysAndValues) {
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_k", 10, 8)), GgmlType::Q8_0);
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_v", 10, 8)), GgmlType::Q8_0);
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_output", 10, 8)), GgmlType::Q5_K);
  // 128 experts (Qwen3-30B-A3B): the dense rules.
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_k", 10, 128)), GgmlType::Q4_K);
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_v", 10, 128)), GgmlType::Q4_K);
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_v", 11, 128)), GgmlType::Q6_K);  // (11-6) % 3 == 2
  EXPECT_EQ(matrix_type("Q4_K_M", role("attn_output", 10, 128)), GgmlType::Q4_K);
}

TEST(TypeMix, LayerPositionsAndGroupedHeads) {
  // _M: the first and last eighth of 48 layers (0-5, 42-47) and every third between.
  for (int64_t l : {0, 5, 8, 11, 42, 47})
    EXPECT_EQ(matrix_type("Q5_K_M", role("ffn_down", l, 128)), GgmlType::Q6_K) << l;
  for (int64_t l : {6, 7, 9, 40})
    EXPECT_EQ(matrix_type("Q5_K_M", role("ffn_down", l, 128)), GgmlType::Q5_K) << l;
  EXPECT_EQ(matrix_type("Q3_K_M", role("ffn_down", 2, 0)), GgmlType::Q5_K);  // 2 < 48/16
  EXPECT_EQ(matrix_type("Q3_K_M", role("ffn_down", 3, 0)), GgmlType::Q4_K);
  EXPECT_EQ(matrix_type("Q3_K_M", role("attn_v", 1, 0)), GgmlType::Q5_K);
  EXPECT_EQ(matrix_type("Q3_K_M", role("attn_v", 2, 0)), GgmlType::Q4_K);
  EXPECT_EQ(matrix_type("Q3_K_S", role("attn_v", 2, 0)), GgmlType::Q3_K);
  EXPECT_EQ(matrix_type("Q4_K_S", role("attn_v", 3, 0)), GgmlType::Q5_K);
  EXPECT_EQ(matrix_type("Q4_K_S", role("attn_v", 4, 0)), GgmlType::Q4_K);
  // Q2_K's V: Q4_K with 4+ query heads per KV head, else Q3_K; IQ4's V: Q5_K with 4+.
  EXPECT_EQ(matrix_type("Q2_K", role("attn_v", 20, 0, 4)), GgmlType::Q4_K);
  EXPECT_EQ(matrix_type("Q2_K", role("attn_v", 20, 0, 2)), GgmlType::Q3_K);
  EXPECT_EQ(matrix_type("IQ4_XS", role("attn_v", 20, 0, 8)), GgmlType::Q5_K);
  EXPECT_EQ(matrix_type("IQ4_XS", role("attn_v", 20, 0, 2)), GgmlType::IQ4_XS);
  // The V index, where the file counts V-like matrices itself (hybrid models), wins.
  MatrixRole v = role("attn_qkv", 30, 0);
  v.v_index = 0;
  v.n_v = 12;
  EXPECT_EQ(matrix_type("Q4_K_M", v), GgmlType::Q6_K);
}

TEST(TypeMix, OutputTiedEmbeddingsPureFilesAndOddRows) {
  EXPECT_EQ(matrix_type("Q4_K_M", role("output", -1, 0)), GgmlType::Q6_K);
  EXPECT_EQ(matrix_type("Q8_0", role("output", -1, 0)), GgmlType::Q8_0);
  EXPECT_EQ(matrix_type("MXFP4_MOE", role("output", -1, 32)), GgmlType::Q8_0);
  MatrixRole embd = role("token_embd", -1, 0);
  EXPECT_EQ(matrix_type("Q4_K_M", embd), GgmlType::Q4_K);
  embd.tied_output = true;
  EXPECT_EQ(matrix_type("Q4_K_M", embd), GgmlType::Q6_K);
  EXPECT_EQ(matrix_type("Q4_K_M", role("ffn_down", 0, 128), /*pure=*/true), GgmlType::Q4_K);
  EXPECT_EQ(matrix_type("Q4_K", role("ffn_down", 0, 128)), GgmlType::Q6_K);  // Q4_K_M's alias
  MatrixRole odd = role("ffn_down", 19, 32);  // gpt-oss: rows of 2880 values
  odd.cols = 2880;
  EXPECT_EQ(matrix_type("Q4_K_M", odd), GgmlType::Q5_0);
  EXPECT_EQ(matrix_type("F16", odd), GgmlType::F16);
  EXPECT_EQ(gguf_file_type("Q5_K_S"), 16u);
  EXPECT_EQ(gguf_file_type("Q3_K"), 12u);
  EXPECT_THROW(matrix_type("Q7_K", role("ffn_down", 0, 0)), Error);
}

}  // namespace
}  // namespace strata::quant
