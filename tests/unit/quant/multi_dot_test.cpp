// Multi-row dot products (vec_dot_multi) agree with the same level's single-row vec_dot, column by
// column, for every type and level that has one: random data, odd block counts, 1..8 activation
// rows at an unaligned stride (the activation row size). Prefill goes through vec_dot_multi and
// decode through vec_dot, so the two must agree for prompt and generated tokens to see the same
// logits; the kernels are written to be bit-identical, and the test reports whether they are.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

using test_helpers::levels_with;
using test_helpers::type_level_name;
using test_helpers::TypeLevel;

// Checks multi against single for one weight row and `kMaxMultiDot` activation rows stored
// back to back at offset 1 of the buffer (so that rows start at odd addresses). Returns whether
// every column was bit-identical.
bool check(GgmlType type, VecDotFn single, VecDotMultiFn multi, int64_t blocks, uint32_t seed) {
  const TypeTraits& t = traits(type);
  const int64_t n = blocks * t.block_elems;
  const auto w = test::random_floats(static_cast<size_t>(n), seed);
  const auto wq = test_helpers::quantize_ref(type, w);
  const int64_t stride = row_bytes(t.activation_type, n);
  std::vector<float> a(static_cast<size_t>(n * kMaxMultiDot));
  std::vector<uint8_t> aq(static_cast<size_t>(stride * kMaxMultiDot + 1));
  for (int j = 0; j < kMaxMultiDot; ++j) {
    const auto col =
        test::random_floats(static_cast<size_t>(n), seed * 31 + 7 + static_cast<uint32_t>(j));
    std::memcpy(a.data() + j * n, col.data(), col.size() * sizeof(float));
    const auto q = test_helpers::quantize_ref(t.activation_type, col);
    std::memcpy(aq.data() + 1 + j * stride, q.data(), q.size());
  }
  // Aligned copies for the single-row reference.
  std::vector<std::vector<uint8_t>> cols(kMaxMultiDot);
  for (int j = 0; j < kMaxMultiDot; ++j) {
    cols[static_cast<size_t>(j)].assign(aq.begin() + 1 + j * stride,
                                        aq.begin() + 1 + (j + 1) * stride);
  }
  bool identical = true;
  for (int n_act = 1; n_act <= kMaxMultiDot; ++n_act) {
    float out[kMaxMultiDot + 1];
    for (float& v : out) v = -12345.0f;
    multi(n, wq.data(), aq.data() + 1, stride, n_act, out);
    EXPECT_EQ(out[n_act], -12345.0f) << "wrote past n_act=" << n_act;
    for (int j = 0; j < n_act; ++j) {
      const float expected = single(n, wq.data(), cols[static_cast<size_t>(j)].data());
      double magnitude = 0;
      for (int64_t i = 0; i < n; ++i)
        magnitude += std::fabs(w[static_cast<size_t>(i)] * a[static_cast<size_t>(j * n + i)]);
      EXPECT_NEAR(out[j], expected, 1e-6 * magnitude + 1e-6)
          << "blocks=" << blocks << " n_act=" << n_act << " column " << j;
      std::uint32_t eb, gb;
      std::memcpy(&eb, &expected, sizeof eb);
      std::memcpy(&gb, &out[j], sizeof gb);
      identical = identical && eb == gb;
    }
  }
  return identical;
}

class MultiDot : public testing::TestWithParam<TypeLevel> {};

TEST_P(MultiDot, MatchesSingleOfSameLevel) {
  const auto [type, isa] = GetParam();
  const TypeKernels k = kernels_exact(type, isa);
  ASSERT_NE(k.vec_dot, nullptr) << "a level with vec_dot_multi must have its own vec_dot";
  bool identical = true;
  for (int64_t blocks : {1, 3, 7, 33}) {
    identical =
        check(type, k.vec_dot, k.vec_dot_multi, blocks, 100 + static_cast<uint32_t>(blocks)) &&
        identical;
  }
  RecordProperty("bit_identical", identical ? "yes" : "no");
  std::printf("[ info     ] %s/%s vec_dot_multi bit-identical to vec_dot: %s\n",
              std::string(ggml_type_name(type)).c_str(), std::string(isa_name(isa)).c_str(),
              identical ? "yes" : "no");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MultiDot,
                         testing::ValuesIn(levels_with(&TypeKernels::vec_dot_multi)),
                         type_level_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MultiDot);

// F32 (a MoE router's product over a prompt) promises bits: at router lengths (the 64-wide loop,
// the 16-wide one and a masked tail) and with the weight row 0-3 floats past a 64-byte boundary
// (the lead the kernels take to align their weight loads), every column equals vec_dot.
TEST(MultiDot, F32ColumnsAreVecDotsBitForBit) {
  for (const TypeLevel& level : levels_with(&TypeKernels::vec_dot_multi)) {
    if (level.type != GgmlType::F32) continue;
    const TypeKernels k = kernels_exact(GgmlType::F32, level.isa);
    for (int64_t n : {64, 200, 2053}) {
      for (int64_t offset = 0; offset < 4; ++offset) {
        SCOPED_TRACE(testing::Message()
                     << isa_name(level.isa) << " n " << n << " offset " << offset);
        std::vector<float> storage(static_cast<size_t>(n + 32));
        const auto address = reinterpret_cast<uintptr_t>(storage.data());
        float* row = storage.data() + (64 - address % 64) % 64 / sizeof(float) + offset;
        const auto w = test::random_floats(static_cast<size_t>(n), 7 + static_cast<uint32_t>(n));
        std::copy(w.begin(), w.end(), row);
        std::vector<float> a(static_cast<size_t>(n * kMaxMultiDot));
        for (int j = 0; j < kMaxMultiDot; ++j) {
          const auto col =
              test::random_floats(static_cast<size_t>(n), 50 + static_cast<uint32_t>(j));
          std::copy(col.begin(), col.end(), a.begin() + j * n);
        }
        for (int n_act = 1; n_act <= kMaxMultiDot; ++n_act) {
          float out[kMaxMultiDot];
          k.vec_dot_multi(n, row, a.data(), n * 4, n_act, out);
          for (int j = 0; j < n_act; ++j) {
            const float expected = k.vec_dot(n, row, a.data() + j * n);
            EXPECT_EQ(std::bit_cast<uint32_t>(out[j]), std::bit_cast<uint32_t>(expected))
                << "n_act " << n_act << " column " << j;
          }
        }
      }
    }
  }
}

// What matmul sees: the dispatched kernels of the best level pair a multi-row kernel only with
// the single-row kernel of its own level, and the two agree.
TEST(MultiDot, DispatchedPairAgrees) {
  for (GgmlType type : supported_types()) {
    const TypeKernels k = kernels_at(type, best_isa());
    if (!k.vec_dot_multi) continue;
    ASSERT_NE(k.vec_dot, nullptr) << ggml_type_name(type);
    EXPECT_EQ(k.vec_dot, traits(type).kernels.vec_dot) << ggml_type_name(type);
    EXPECT_EQ(k.vec_dot_multi, traits(type).kernels.vec_dot_multi) << ggml_type_name(type);
    for (int64_t blocks : {1, 7})
      check(type, k.vec_dot, k.vec_dot_multi, blocks, 500 + static_cast<uint32_t>(blocks));
  }
}

}  // namespace
}  // namespace strata::quant
