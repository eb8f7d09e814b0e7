// AVX2 + FMA + F16C kernels of the float formats: F32, F16 and BF16 dot products, F16 / BF16
// conversion both ways. Rows may have any length: a partial vector goes through a zero-padded
// copy (the row's end, and in the dot products the elements before the weights' alignment).

#include <immintrin.h>

#include <cstdint>

#include "quant/float_common.h"
#include "quant/kernel_table.h"
#include "quant/multi_dot.h"

namespace strata::quant {
namespace {

// Elements before the weight pointer reaches a kAlign-byte boundary: the dot products start with
// them (through a padded copy) so that the weight loads, which stream from memory, do not split
// cache lines (split loads cost about a third of the bandwidth). 0 when the pointer is not
// aligned to its element size or the row is that short.
template <int kAlign, typename T>
int64_t lead_to_alignment(const T* p, int64_t n) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  if (addr % sizeof(T) != 0) return 0;
  const auto lead = static_cast<int64_t>((kAlign - addr % kAlign) % kAlign / sizeof(T));
  return lead < n ? lead : 0;
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- F32 ------------------------------------------------------------------------------------

// The F32 dot products' vectors (MultiF32, float_common.h): partial vectors through a padded
// copy.
struct F32x8 {
  using Vec = __m256;
  static constexpr int64_t kLanes = 8;
  static constexpr int kLeadAccumulator = 2;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load_part(const float* p, int64_t count) {
    const TailBuffer<float, 8> padded(p, count);
    return _mm256_load_ps(padded.values);
  }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(Vec v) { return hsum(v); }
  static int64_t lead(const float* w, int64_t n) { return lead_to_alignment<32>(w, n); }
};
using MultiF32x8 = MultiF32<F32x8>;

// ---- F16 ------------------------------------------------------------------------------------

__m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(dst + i, load_f16x8(h + i));
    _mm256_storeu_ps(dst + i + 8, load_f16x8(h + i + 8));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16x8(h + i));
  if (i < n) {
    const TailBuffer<uint16_t, 8> t(h + i, n - i);
    alignas(32) float out[8];
    _mm256_store_ps(out, load_f16x8(t.values));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

__m128i to_f16x8(__m256 v) {
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), to_f16x8(_mm256_loadu_ps(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i + 8), to_f16x8(_mm256_loadu_ps(src + i + 8)));
  }
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), to_f16x8(_mm256_loadu_ps(src + i)));
  }
  if (i < n) {
    const TailBuffer<float, 8> t(src + i, n - i);
    alignas(16) uint16_t out[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), to_f16x8(_mm256_load_ps(t.values)));
    std::memcpy(h + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

float vec_dot_f16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const uint16_t*>(weights);
  const auto* a = static_cast<const uint16_t*>(activations);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = lead_to_alignment<16>(w, n);  // 16-byte loads
  if (i > 0) {
    const TailBuffer<uint16_t, 8> tw(w, i), ta(a, i);
    acc2 = _mm256_mul_ps(load_f16x8(tw.values), load_f16x8(ta.values));
  }
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(load_f16x8(w + i), load_f16x8(a + i), acc0);
    acc1 = _mm256_fmadd_ps(load_f16x8(w + i + 8), load_f16x8(a + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(load_f16x8(w + i + 16), load_f16x8(a + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(load_f16x8(w + i + 24), load_f16x8(a + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load_f16x8(w + i), load_f16x8(a + i), acc0);
  if (i < n) {
    const TailBuffer<uint16_t, 8> tw(w + i, n - i), ta(a + i, n - i);
    acc1 = _mm256_fmadd_ps(load_f16x8(tw.values), load_f16x8(ta.values), acc1);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

// ---- BF16 -----------------------------------------------------------------------------------

__m256 load_bf16x8(const uint16_t* p) {
  const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(dst + i, load_bf16x8(h + i));
    _mm256_storeu_ps(dst + i + 8, load_bf16x8(h + i + 8));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16x8(h + i));
  if (i < n) {
    const TailBuffer<uint16_t, 8> t(h + i, n - i);
    alignas(32) float out[8];
    _mm256_store_ps(out, load_bf16x8(t.values));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// Round to nearest even in the upper 16 bits; NaN becomes a quiet NaN (as f32_to_bf16).
__m256i to_bf16_in_low_half(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd);
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(64));
  return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

__m256i to_bf16x16(__m256 lo, __m256 hi) {
  const __m256i packed = _mm256_packus_epi32(to_bf16_in_low_half(lo), to_bf16_in_low_half(hi));
  return _mm256_permute4x64_epi64(packed, 0xd8);  // undo the per-lane interleave of packus
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i),
                        to_bf16x16(_mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8)));
  }
  if (i < n) {
    const TailBuffer<float, 16> t(src + i, n - i);
    alignas(32) uint16_t out[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                       to_bf16x16(_mm256_load_ps(t.values), _mm256_load_ps(t.values + 8)));
    std::memcpy(h + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

// 16 bf16 values per load, widened by interleaving with zeros: lanes come out permuted, but the
// same way for both operands, which a dot product does not see.
float vec_dot_bf16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const uint16_t*>(weights);
  const auto* a = static_cast<const uint16_t*>(activations);
  const __m256i zero = _mm256_setzero_si256();
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  auto step = [&](const uint16_t* wp, const uint16_t* ap, __m256& lo_acc, __m256& hi_acc) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp));
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ap));
    lo_acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, wv)),
                             _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, av)), lo_acc);
    hi_acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, wv)),
                             _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, av)), hi_acc);
  };
  int64_t i = lead_to_alignment<32>(w, n);
  if (i > 0) {
    const TailBuffer<uint16_t, 16> tw(w, i), ta(a, i);
    step(tw.values, ta.values, acc2, acc3);
  }
  for (; i + 32 <= n; i += 32) {
    step(w + i, a + i, acc0, acc1);
    step(w + i + 16, a + i + 16, acc2, acc3);
  }
  for (; i + 16 <= n; i += 16) step(w + i, a + i, acc0, acc1);
  if (i < n) {
    const TailBuffer<uint16_t, 16> tw(w + i, n - i), ta(a + i, n - i);
    step(tw.values, ta.values, acc2, acc3);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

}  // namespace

void fill_float_avx2(KernelTable& table) {
  table[GgmlType::F32].vec_dot = vec_dot_of<MultiF32x8>;
  // Three columns: 12 accumulators and 4 weight vectors fill the 16 registers.
  table[GgmlType::F32].vec_dot_multi = vec_dot_multi_of<MultiF32x8, 3>;
  table[GgmlType::F16] = {dequantize_f16, quantize_f16, vec_dot_f16};
  table[GgmlType::BF16] = {dequantize_bf16, quantize_bf16, vec_dot_bf16};
}

}  // namespace strata::quant
