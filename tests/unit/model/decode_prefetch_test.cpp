// The load-time prefetch measurement runs on the file's largest weight matrix: the one decode
// streams the most of, never a norm vector or a tensor no GEMV can read.

#include "model/decode_prefetch.h"

#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "ops/matmul.h"
#include "quant/quant.h"

namespace strata {
namespace {

std::vector<uint8_t> zeros(GgmlType type, int64_t cols, int64_t rows) {
  return std::vector<uint8_t>(static_cast<size_t>(quant::row_bytes(type, cols) * rows));
}

// A norm vector, a Q8_0 matrix and a larger Q4_K one.
std::vector<uint8_t> three_tensor_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("blk.0.attn_norm.weight", GgmlType::F32, {100000}, zeros(GgmlType::F32, 100000, 1));
  w.add_tensor("blk.0.ffn_up.weight", GgmlType::Q8_0, {512, 96}, zeros(GgmlType::Q8_0, 512, 96));
  w.add_tensor("output.weight", GgmlType::Q4_K, {1024, 160}, zeros(GgmlType::Q4_K, 1024, 160));
  return w.to_bytes();
}

TEST(DecodePrefetch, MeasuresOnTheLargestWeightMatrix) {
  const std::vector<uint8_t> bytes = three_tensor_file();
  const GgufFile file = GgufFile::parse("prefetch.gguf", bytes);

  ops::GemvPrefetchOptions options;
  options.min_bytes = 0;
  const ops::GemvPrefetchResult r = tune_decode_prefetch(file, options);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.bytes, quant::row_bytes(GgmlType::Q4_K, 1024) * 160);  // not the 400 KB norm
  EXPECT_EQ(r.prefetch, r.best_without_ms > ops::kMinPrefetchGain * r.best_with_ms);

  // At the default threshold (tens of MiB) a file this small is not measured: prefetch stays off.
  const ops::GemvPrefetchResult small = tune_decode_prefetch(file);
  EXPECT_FALSE(small.measured);
  EXPECT_FALSE(small.prefetch);
}

// What decides where the tile GEMM starts: the bytes of the matrices CPU products read (norm
// vectors left out; a rank's own tensors only when `held` says which).
TEST(DecodePrefetch, WeightMatrixBytesCountTheMatricesHeld) {
  const std::vector<uint8_t> bytes = three_tensor_file();
  const GgufFile file = GgufFile::parse("sizes.gguf", bytes);
  const int64_t up = quant::row_bytes(GgmlType::Q8_0, 512) * 96;
  const int64_t output = quant::row_bytes(GgmlType::Q4_K, 1024) * 160;
  EXPECT_EQ(weight_matrix_bytes(file), up + output);
  EXPECT_EQ(
      weight_matrix_bytes(file, [](const GgufTensorInfo& t) { return t.name != "output.weight"; }),
      up);
  EXPECT_EQ(ops::tile_min_tokens(weight_matrix_bytes(file)), ops::kTileMinTokensResident);
}

}  // namespace
}  // namespace strata
