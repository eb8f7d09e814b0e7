#include "ops/activations.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "ops/vector_exp.h"
#include "util/cpu_features.h"

namespace strata::ops {
namespace {

// SwiGLU on vectors: the exponential from vector_exp.h instead of one std::exp call per value
// (those were most of an expert's follow-up work). Every value gets the same arithmetic wherever
// it lies (the tail runs masked or padded, not as a scalar loop), so a token's result does not
// depend on how many rows share the call: verify steps give the decode step's bits. e^-x is taken
// at most e^88 (finite): below a gate of -88, silu is about -1e-36 instead of -0.
//   silu(g) = g / (1 + e^(-alpha g)) (alpha 1: SwiGLU; gpt-oss's clamped form sets it and clamps)
// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (_mm512_undefined_*; GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

struct SwigluShape {
  float alpha = 1.0f;
  float limit = 0.0f;  // 0: no clamping
};

__attribute__((target("avx512f"))) __m512 swiglu_avx512(__m512 g, __m512 u, SwigluShape s) {
  if (s.limit > 0) {
    g = _mm512_min_ps(g, _mm512_set1_ps(s.limit));
    u = _mm512_add_ps(
        _mm512_max_ps(_mm512_min_ps(u, _mm512_set1_ps(s.limit)), _mm512_set1_ps(-s.limit)),
        _mm512_set1_ps(1.0f));
  }
  const __m512 e =
      exp_avx512(_mm512_min_ps(_mm512_mul_ps(_mm512_set1_ps(-s.alpha), g), _mm512_set1_ps(88.0f)));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

__attribute__((target("avx512f"))) void swiglu_rows_avx512(const float* gate, const float* up,
                                                           float* out, int64_t n, SwigluShape s) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, swiglu_avx512(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i), s));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(
        out + i, m,
        swiglu_avx512(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i), s));
  }
}

__attribute__((target("avx2,fma"))) __m256 swiglu_avx2(__m256 g, __m256 u, SwigluShape s) {
  if (s.limit > 0) {
    g = _mm256_min_ps(g, _mm256_set1_ps(s.limit));
    u = _mm256_add_ps(
        _mm256_max_ps(_mm256_min_ps(u, _mm256_set1_ps(s.limit)), _mm256_set1_ps(-s.limit)),
        _mm256_set1_ps(1.0f));
  }
  const __m256 e =
      exp_avx2(_mm256_min_ps(_mm256_mul_ps(_mm256_set1_ps(-s.alpha), g), _mm256_set1_ps(88.0f)));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

__attribute__((target("avx2,fma"))) void swiglu_rows_avx2(const float* gate, const float* up,
                                                          float* out, int64_t n, SwigluShape s) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, swiglu_avx2(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), s));
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {}, o[8];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    _mm256_store_ps(o, swiglu_avx2(_mm256_load_ps(g), _mm256_load_ps(u), s));
    std::copy(o, o + (n - i), out + i);
  }
}

#pragma GCC diagnostic pop

// Without AVX2 and FMA: std::exp, value by value.
void swiglu_rows_scalar(const float* gate, const float* up, float* out, int64_t n, SwigluShape s) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i], u = up[i];
    if (s.limit > 0) {
      g = std::min(g, s.limit);
      u = std::clamp(u, -s.limit, s.limit) + 1.0f;
    }
    out[i] = g / (1.0f + std::exp(-s.alpha * g)) * u;
  }
}

void swiglu_rows(const float* gate, const float* up, float* out, int64_t n, SwigluShape s) {
  static const CpuFeatures& cpu = cpu_features();
  if (cpu.has_avx512_level()) {
    swiglu_rows_avx512(gate, up, out, n, s);
  } else if (cpu.has_avx2_level()) {
    swiglu_rows_avx2(gate, up, out, n, s);
  } else {
    swiglu_rows_scalar(gate, up, out, n, s);
  }
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  swiglu_rows(gate, up, out, n, {});
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit) {
  swiglu_rows(gate, up, out, n, {alpha, limit});
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace strata::ops
