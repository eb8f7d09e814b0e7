#pragma once
// e^x on vectors of floats for x <= 88: 2^n * e^r with n = round(x / ln2), |r| <= ln2/2 and a
// degree-6 polynomial, relative error ~2e-7. x below -87 is taken as -87 (about 1.6e-38). The
// AVX-512 and AVX2 versions run the same operations, so they give the same bits (attention's
// portable loop, STRATA_EXP_BODY, compiles to them too for AVX2 with FMA: r = fnmadd(n, ln2_lo,
// fnmadd(n, ln2_hi, x)), the polynomial by fmadd). Internal linkage
// on purpose, as transpose_avx512.h: callers carry the target and check the CPU.

#include <immintrin.h>

namespace strata::ops {
namespace {

// The polynomial's coefficients, highest degree first.
constexpr float kExpPolynomial[7] = {
    1.38888889e-3f, 8.33333333e-3f, 4.16666667e-2f, 1.66666667e-1f, 0.5f, 1.0f, 1.0f};

__attribute__((target("avx512f"))) inline __m512 exp_avx512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-06f), r);
  __m512 p = _mm512_set1_ps(kExpPolynomial[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPolynomial[i]));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-06f), r);
  __m256 p = _mm256_set1_ps(kExpPolynomial[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPolynomial[i]));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

}  // namespace
}  // namespace strata::ops
