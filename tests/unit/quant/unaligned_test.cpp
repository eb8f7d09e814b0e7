// Every kernel of every level gives the same bits whatever address its blocks start at. A row
// inside a GGUF file, a column of a multi-row activation, a GPU staging buffer or a 17-byte
// MXFP4 block can start at any byte, so no kernel may assume its block structs are aligned: here
// weights and activations are placed at offsets 1, 2 and 3 of a buffer and compared with the same
// data at offset 0. Float rows (F32, F16, BF16) are arrays of their element type and always start
// at a multiple of its size; they move by that size, and since their dot products start with the
// elements before a vector boundary (float_avx2.cpp), their sums may round differently: those
// agree to float rounding instead of bit for bit. Built with the asan preset, UBSan also stops
// on any misaligned access inside the kernels, which is what this test exists to catch.

#include <gtest/gtest.h>

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

using test_helpers::type_level_name;
using test_helpers::TypeLevel;

// A copy of `bytes` that starts `offset` bytes into a buffer allocated by new (16-aligned).
class Placed {
 public:
  Placed(const std::vector<uint8_t>& bytes, int64_t offset)
      : buffer_(bytes.size() + static_cast<size_t>(offset) + 64), offset_(offset) {
    std::memcpy(data(), bytes.data(), bytes.size());
  }
  uint8_t* data() { return buffer_.data() + offset_; }

 private:
  std::vector<uint8_t> buffer_;
  int64_t offset_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool within_rounding(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > 1e-5f * (1.0f + std::fabs(b[i]))) return false;
  }
  return true;
}

// Offsets to try: every byte for block formats, multiples of the element size for float rows.
std::vector<int64_t> offsets_of(const TypeTraits& t) {
  if (t.block_elems > 1) return {1, 2, 3};
  return {t.block_bytes, 3 * t.block_bytes};
}

// Every (type, level) with at least one kernel of its own.
std::vector<TypeLevel> levels_with_any_kernel() {
  std::vector<TypeLevel> out;
  for (GgmlType type : supported_types()) {
    for (Isa isa : available_isas()) {
      const TypeKernels k = kernels_exact(type, isa);
      if (k.dequantize_row || k.quantize_row || k.vec_dot || k.vec_dot_multi || k.gemm)
        out.push_back({type, isa});
    }
  }
  return out;
}

class Unaligned : public testing::TestWithParam<TypeLevel> {
 protected:
  void SetUp() override {
    type_ = GetParam().type;
    k_ = kernels_exact(type_, GetParam().isa);
    const TypeTraits& t = traits(type_);
    n_ = 7 * t.block_elems * (t.block_elems > 1 ? 1 : 32);  // odd block counts: tails too
    w_stride_ = row_bytes(type_, n_);
    const auto w = test::random_floats(static_cast<size_t>(n_ * kRows), 41);
    weights_ = test_helpers::quantize_ref(type_, w);
    if (!traits(t.activation_type).kernels.quantize_row) return;
    a_stride_ = row_bytes(t.activation_type, n_);
    for (int c = 0; c < kCols; ++c) {
      const auto a = test::random_floats(static_cast<size_t>(n_), 50 + static_cast<uint32_t>(c));
      const auto q = test_helpers::quantize_ref(t.activation_type, a);
      activations_.insert(activations_.end(), q.begin(), q.end());
    }
  }

  // Every kernel's outputs for weights and activations placed at `offset`.
  std::vector<float> outputs_at(int64_t offset) {
    std::vector<float> out;
    Placed w(weights_, offset);
    if (k_.dequantize_row) {
      std::vector<float> x(static_cast<size_t>(n_));
      k_.dequantize_row(w.data(), x.data(), n_);
      out.insert(out.end(), x.begin(), x.end());
    }
    if (k_.quantize_row) {
      const auto x = test::random_floats(static_cast<size_t>(n_), 60);
      Placed q(std::vector<uint8_t>(static_cast<size_t>(w_stride_)), offset);
      k_.quantize_row(x.data(), q.data(), n_);
      for (int64_t i = 0; i < w_stride_; ++i) out.push_back(q.data()[i]);
    }
    if (activations_.empty()) return out;
    Placed a(activations_, offset);
    if (k_.vec_dot) {
      for (int r = 0; r < kRows; ++r)
        out.push_back(k_.vec_dot(n_, w.data() + r * w_stride_, a.data()));
    }
    if (k_.vec_dot_multi) {
      float results[kMaxMultiDot];
      k_.vec_dot_multi(n_, w.data() + w_stride_, a.data(), a_stride_, kCols, results);
      out.insert(out.end(), results, results + kCols);
    }
    if (k_.gemm) {
      std::vector<const uint8_t*> act;
      for (int c = 0; c < kCols; ++c) act.push_back(a.data() + c * a_stride_);
      std::vector<float> g(static_cast<size_t>(kCols * kRows));
      k_.gemm(n_, w.data(), w_stride_, kRows, act.data(), kCols, g.data(), kRows);
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  }

  static constexpr int kRows = 9;  // a short last tile in the tile GEMMs
  static constexpr int kCols = 5;
  GgmlType type_{};
  TypeKernels k_;
  int64_t n_ = 0, w_stride_ = 0, a_stride_ = 0;
  std::vector<uint8_t> weights_, activations_;
};

TEST_P(Unaligned, EveryKernelGivesTheSameBitsAtAnyAddress) {
  const auto aligned = outputs_at(0);
  ASSERT_FALSE(aligned.empty());
  const bool blocks = traits(type_).block_elems > 1;
  for (int64_t offset : offsets_of(traits(type_))) {
    const auto moved = outputs_at(offset);
    EXPECT_TRUE(blocks ? same_bits(moved, aligned) : within_rounding(moved, aligned))
        << "offset " << offset;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Unaligned, testing::ValuesIn(levels_with_any_kernel()),
                         type_level_name);

}  // namespace
}  // namespace strata::quant
