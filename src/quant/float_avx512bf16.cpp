// BF16 x BF16 dot product with AVX512_BF16 (vdpbf16ps: pairs of bf16 products added into f32
// lanes, 32 elements per instruction). Registered only on CPUs that have the extension; the
// instruction treats bf16 subnormal inputs as zero, like the other engines' kernels built on it.

#include <immintrin.h>

#include <cstdint>

#include "quant/kernel_table.h"

namespace strata::quant {
namespace {

__m512bh as_bf16(__m512i v) {
  return (__m512bh)v;
}

float vec_dot_bf16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const uint16_t*>(weights);
  const auto* a = static_cast<const uint16_t*>(activations);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  auto dot = [](__m512 acc, const uint16_t* wp, const uint16_t* ap) {
    return _mm512_dpbf16_ps(acc, as_bf16(_mm512_loadu_si512(wp)), as_bf16(_mm512_loadu_si512(ap)));
  };
  // Start with the elements before the weights reach a 64-byte boundary, so that the weight loads
  // (streamed from memory) do not split cache lines.
  int64_t i = 0;
  if (reinterpret_cast<uintptr_t>(w) % 2 == 0) {
    i = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(w) % 64) % 64 / 2);
    if (i >= n) i = 0;
  }
  if (i > 0) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << i) - 1u);
    acc2 = _mm512_dpbf16_ps(acc2, as_bf16(_mm512_maskz_loadu_epi16(m, w)),
                            as_bf16(_mm512_maskz_loadu_epi16(m, a)));
  }
  for (; i + 128 <= n; i += 128) {
    acc0 = dot(acc0, w + i, a + i);
    acc1 = dot(acc1, w + i + 32, a + i + 32);
    acc2 = dot(acc2, w + i + 64, a + i + 64);
    acc3 = dot(acc3, w + i + 96, a + i + 96);
  }
  for (; i + 32 <= n; i += 32) acc0 = dot(acc0, w + i, a + i);
  if (i < n) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1u);
    acc1 = _mm512_dpbf16_ps(acc1, as_bf16(_mm512_maskz_loadu_epi16(m, w + i)),
                            as_bf16(_mm512_maskz_loadu_epi16(m, a + i)));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace

void fill_float_avx512bf16(KernelTable& table) {
  table[GgmlType::BF16].vec_dot = vec_dot_bf16;
}

}  // namespace strata::quant
