// AVX-512 (F/BW/VL/DQ) kernels of the float formats: F32, F16 and BF16 dot products and F16 / BF16
// conversion both ways. Partial vectors (the row's end, and in the dot products the elements
// before the weights' alignment) use masked loads and stores. The BF16 dot product with the
// AVX512_BF16 instruction lives in float_avx512bf16.cpp.

#include <immintrin.h>

#include <cstdint>

#include "quant/float_common.h"
#include "quant/kernel_table.h"
#include "quant/multi_dot.h"

namespace strata::quant {
namespace {

__mmask16 tail_mask16(int64_t count) {
  return static_cast<__mmask16>((1u << count) - 1u);
}
__mmask32 tail_mask32(int64_t count) {
  return static_cast<__mmask32>((uint64_t{1} << count) - 1u);
}

// Elements before the weight pointer reaches a kAlign-byte boundary: the dot products start with
// them (masked) so that the weight loads, which stream from memory, do not split cache lines
// (split loads cost about a third of the bandwidth). 0 when the pointer is not aligned to its
// element size or the row is that short.
template <int kAlign, typename T>
int64_t lead_to_alignment(const T* p, int64_t n) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  if (addr % sizeof(T) != 0) return 0;
  const auto lead = static_cast<int64_t>((kAlign - addr % kAlign) % kAlign / sizeof(T));
  return lead < n ? lead : 0;
}

// ---- F32 ------------------------------------------------------------------------------------

// The F32 dot products' vectors (MultiF32, float_common.h): the lead goes through masked loads.
struct F32x16 {
  using Vec = __m512;
  static constexpr int64_t kLanes = 16;
  static constexpr int kLeadAccumulator = 1;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load_part(const float* p, int64_t count) {
    return _mm512_maskz_loadu_ps(tail_mask16(count), p);
  }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(Vec v) { return _mm512_reduce_add_ps(v); }
  static int64_t lead(const float* w, int64_t n) { return lead_to_alignment<64>(w, n); }
};
using MultiF32x16 = MultiF32<F32x16>;

// ---- F16 ------------------------------------------------------------------------------------

__m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
__m512 load_f16x16(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(dst + i, load_f16x16(h + i));
    _mm512_storeu_ps(dst + i + 16, load_f16x16(h + i + 16));
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_f16x16(h + i));
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load_f16x16(h + i, m));
  }
}

__m256i to_f16x16(__m512 v) {
  return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), to_f16x16(_mm512_loadu_ps(src + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm256_mask_storeu_epi16(h + i, m, to_f16x16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

float vec_dot_f16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const uint16_t*>(weights);
  const auto* a = static_cast<const uint16_t*>(activations);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = lead_to_alignment<32>(w, n);  // 32-byte loads
  if (i > 0) {
    const __mmask16 m = tail_mask16(i);
    acc1 = _mm512_mul_ps(load_f16x16(w, m), load_f16x16(a, m));
  }
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(load_f16x16(w + i), load_f16x16(a + i), acc0);
    acc1 = _mm512_fmadd_ps(load_f16x16(w + i + 16), load_f16x16(a + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load_f16x16(w + i + 32), load_f16x16(a + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load_f16x16(w + i + 48), load_f16x16(a + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(load_f16x16(w + i), load_f16x16(a + i), acc0);
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    acc1 = _mm512_fmadd_ps(load_f16x16(w + i, m), load_f16x16(a + i, m), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// ---- BF16 -----------------------------------------------------------------------------------

__m512 widen_bf16x16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i,
                     widen_bf16x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, widen_bf16x16(_mm256_maskz_loadu_epi16(m, h + i)));
  }
}

// Round to nearest even; NaN becomes a quiet NaN (as f32_to_bf16).
__m256i to_bf16x16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i bias =
      _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
  __m512i out = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  out = _mm512_mask_or_epi32(out, is_nan, high, _mm512_set1_epi32(64));
  return _mm512_cvtepi32_epi16(out);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), to_bf16x16(_mm512_loadu_ps(src + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm256_mask_storeu_epi16(h + i, m, to_bf16x16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

// 32 bf16 values per load, widened by interleaving with zeros: lanes come out permuted, but the
// same way for both operands, which a dot product does not see.
float vec_dot_bf16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const uint16_t*>(weights);
  const auto* a = static_cast<const uint16_t*>(activations);
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  auto step = [&](__m512i wv, __m512i av, __m512& lo_acc, __m512& hi_acc) {
    lo_acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, wv)),
                             _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, av)), lo_acc);
    hi_acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, wv)),
                             _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, av)), hi_acc);
  };
  int64_t i = lead_to_alignment<64>(w, n);
  if (i > 0) {
    const __mmask32 m = tail_mask32(i);
    step(_mm512_maskz_loadu_epi16(m, w), _mm512_maskz_loadu_epi16(m, a), acc2, acc3);
  }
  for (; i + 64 <= n; i += 64) {
    step(_mm512_loadu_si512(w + i), _mm512_loadu_si512(a + i), acc0, acc1);
    step(_mm512_loadu_si512(w + i + 32), _mm512_loadu_si512(a + i + 32), acc2, acc3);
  }
  for (; i + 32 <= n; i += 32)
    step(_mm512_loadu_si512(w + i), _mm512_loadu_si512(a + i), acc0, acc1);
  if (i < n) {
    const __mmask32 m = tail_mask32(n - i);
    step(_mm512_maskz_loadu_epi16(m, w + i), _mm512_maskz_loadu_epi16(m, a + i), acc2, acc3);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace

void fill_float_avx512(KernelTable& table) {
  table[GgmlType::F32].vec_dot = vec_dot_of<MultiF32x16>;
  // Four columns: 16 accumulators and 4 weight vectors in registers.
  table[GgmlType::F32].vec_dot_multi = vec_dot_multi_of<MultiF32x16, 4>;
  table[GgmlType::F16] = {dequantize_f16, quantize_f16, vec_dot_f16};
  table[GgmlType::BF16] = {dequantize_bf16, quantize_bf16, vec_dot_bf16};
}

}  // namespace strata::quant
