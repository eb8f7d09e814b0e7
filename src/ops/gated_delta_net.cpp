#include "ops/gated_delta_net.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/rms_norm.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace strata::ops {
namespace {

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// ---- portable kernels -------------------------------------------------------------------

float dot_scalar(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// out[r] = rows[r] . x for 4 rows.
void dot4_scalar(const float* const rows[4], const float* x, int64_t n, float out[4]) {
  for (int r = 0; r < 4; ++r) out[r] = dot_scalar(rows[r], x, n);
}

void axpy_scalar(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void step_scalar(float* state, const float* q, const float* k, const float* v, float beta, float g,
                 int64_t d_k, int64_t d_v, float* out) {
  const float decay = std::exp(g);
  for (int64_t j = 0; j < d_v; ++j) {
    float* row = state + j * d_k;
    float m = 0;
    for (int64_t i = 0; i < d_k; ++i) {
      row[i] *= decay;
      m += row[i] * k[i];
    }
    const float delta = beta * (v[j] - m);
    float o = 0;
    for (int64_t i = 0; i < d_k; ++i) {
      row[i] += delta * k[i];
      o += row[i] * q[i];
    }
    out[j] = o;
  }
}

// ---- AVX2 + FMA kernels (d_k a multiple of 16) -------------------------------------------

__attribute__((target("avx2,fma"))) float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  return hsum_avx2(_mm256_add_ps(acc0, acc1));
}

__attribute__((target("avx2,fma"))) void dot4_avx2(const float* const rows[4], const float* x,
                                                   int64_t n, float out[4]) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < 4; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(rows[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < 4; ++r) out[r] = hsum_avx2(acc[r]);
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
}

__attribute__((target("avx2,fma"))) void step_avx2(float* state, const float* q, const float* k,
                                                   const float* v, float beta, float g, int64_t d_k,
                                                   int64_t d_v, float* out) {
  const __m256 decay = _mm256_set1_ps(std::exp(g));
  for (int64_t j = 0; j < d_v; ++j) {
    float* row = state + j * d_k;
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d_k; i += 16) {
      const __m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(row + i), decay);
      const __m256 r1 = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8), decay);
      _mm256_storeu_ps(row + i, r0);
      _mm256_storeu_ps(row + i + 8, r1);
      m0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(k + i), m0);
      m1 = _mm256_fmadd_ps(r1, _mm256_loadu_ps(k + i + 8), m1);
    }
    const __m256 delta = _mm256_set1_ps(beta * (v[j] - hsum_avx2(_mm256_add_ps(m0, m1))));
    __m256 o0 = _mm256_setzero_ps(), o1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d_k; i += 16) {
      const __m256 r0 = _mm256_fmadd_ps(delta, _mm256_loadu_ps(k + i), _mm256_loadu_ps(row + i));
      const __m256 r1 =
          _mm256_fmadd_ps(delta, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(row + i + 8));
      _mm256_storeu_ps(row + i, r0);
      _mm256_storeu_ps(row + i + 8, r1);
      o0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(q + i), o0);
      o1 = _mm256_fmadd_ps(r1, _mm256_loadu_ps(q + i + 8), o1);
    }
    out[j] = hsum_avx2(_mm256_add_ps(o0, o1));
  }
}

struct VectorKernels {
  float (*dot)(const float*, const float*, int64_t);
  void (*dot4)(const float* const[4], const float*, int64_t, float[4]);
  void (*axpy)(float, const float*, float*, int64_t);
  void (*step)(float*, const float*, const float*, const float*, float, float, int64_t, int64_t,
               float*);
};

// AVX2 when the CPU has it and both head sizes suit its 16-float steps.
const VectorKernels& kernels_for(int64_t d_k, int64_t d_v) {
  static const VectorKernels scalar{dot_scalar, dot4_scalar, axpy_scalar, step_scalar};
  static const VectorKernels avx2{dot_avx2, dot4_avx2, axpy_avx2, step_avx2};
  static const bool has_avx2 = cpu_features().has_avx2_level();
  return has_avx2 && d_k % 16 == 0 && d_v % 8 == 0 ? avx2 : scalar;
}

}  // namespace

void causal_conv1d_silu(const float* x, float* out, int64_t stride, int64_t n_tokens, int64_t c0,
                        int64_t c1, const float* weight, int64_t kernel, int64_t channels,
                        float* state) {
  STRATA_CHECK(kernel >= 1 && kernel <= kMaxConvKernel, "conv kernel {} is outside 1..{}", kernel,
               kMaxConvKernel);
  const int64_t hist = kernel - 1;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* src[kMaxConvKernel];
    for (int64_t j = 0; j < kernel; ++j) {
      const int64_t idx = t - hist + j;  // token index of this tap (negative: from the state)
      src[j] = idx >= 0 ? x + idx * stride : state + (hist + idx) * channels;
    }
    float* o = out + t * stride;
    for (int64_t c = c0; c < c1; ++c) {
      float acc = src[0][c] * weight[c];
      for (int64_t j = 1; j < kernel; ++j) acc += src[j][c] * weight[j * channels + c];
      o[c] = silu(acc);
    }
  }
  // New state: the last `hist` inputs. Row r reads from a later row or a token, so ascending
  // order never overwrites what is still to be read.
  for (int64_t r = 0; r < hist; ++r) {
    const int64_t idx = n_tokens - hist + r;
    const float* from = idx >= 0 ? x + idx * stride : state + (hist + idx) * channels;
    std::copy(from + c0, from + c1, state + r * channels + c0);
  }
}

void l2_norm(float* x, int64_t n, float eps, float scale) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float s = scale / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void delta_gates(const float* b, const float* a, const float* a_neg, const float* dt_bias,
                 int64_t n_heads, float* beta, float* g) {
  for (int64_t h = 0; h < n_heads; ++h) {
    beta[h] = sigmoid(b[h]);
    g[h] = softplus(a[h] + dt_bias[h]) * a_neg[h];
  }
}

void gated_rms_norm(float* x, const float* weight, const float* z, int64_t n, float eps) {
  rms_norm(x, weight, x, n, eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= silu(z[i]);
}

void delta_rule_sequential_reference(float* state, const DeltaRuleRun& r, int64_t d_k,
                                     int64_t d_v) {
  for (int64_t t = 0; t < r.n_tokens; ++t) {
    step_scalar(state, r.q + t * r.qk_stride, r.k + t * r.qk_stride, r.v + t * r.v_stride,
                r.beta[t * r.gate_stride], r.g[t * r.gate_stride], d_k, d_v,
                r.out + t * r.out_stride);
  }
}

void delta_rule_sequential(float* state, const DeltaRuleRun& r, int64_t d_k, int64_t d_v) {
  const VectorKernels& vk = kernels_for(d_k, d_v);
  for (int64_t t = 0; t < r.n_tokens; ++t) {
    vk.step(state, r.q + t * r.qk_stride, r.k + t * r.qk_stride, r.v + t * r.v_stride,
            r.beta[t * r.gate_stride], r.g[t * r.gate_stride], d_k, d_v, r.out + t * r.out_stride);
  }
}

void delta_rule_chunked(float* state, const DeltaRuleRun& r, int64_t d_k, int64_t d_v) {
  const VectorKernels& vk = kernels_for(d_k, d_v);
  if (d_v % 4 != 0) {
    delta_rule_sequential(state, r, d_k, d_v);
    return;
  }
  constexpr int64_t C = kDeltaChunk;
  static thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>(C + C * C + C * d_v + C * d_k + C * d_v));
  float* G = buffer.data();  // [C] cumulative log-decay within the chunk
  float* A = G + C;          // [C][C] strictly lower: beta_i (k_i . k_j) e^(G_i - G_j)
  float* U = A + C * C;      // [C][d_v] (I + A)^-1 beta V, then V' = U - W S
  float* W = U + C * d_v;    // [C][d_k] (I + A)^-1 beta e^G K
  float* SQ = W + C * d_k;   // [C][d_v] e^G_i S^T q_i
  for (int64_t c0 = 0; c0 < r.n_tokens; c0 += C) {
    const int64_t c = std::min(C, r.n_tokens - c0);
    auto q = [&](int64_t i) { return r.q + (c0 + i) * r.qk_stride; };
    auto k = [&](int64_t i) { return r.k + (c0 + i) * r.qk_stride; };
    auto v = [&](int64_t i) { return r.v + (c0 + i) * r.v_stride; };
    auto beta = [&](int64_t i) { return r.beta[(c0 + i) * r.gate_stride]; };
    float acc = 0;
    for (int64_t i = 0; i < c; ++i) {
      acc += r.g[(c0 + i) * r.gate_stride];
      G[i] = acc;
    }
    // Forward substitution: row i of U and W needs rows j < i.
    for (int64_t i = 0; i < c; ++i) {
      float* u = U + i * d_v;
      float* w = W + i * d_k;
      const float b = beta(i), eg = std::exp(G[i]);
      for (int64_t e = 0; e < d_v; ++e) u[e] = b * v(i)[e];
      for (int64_t e = 0; e < d_k; ++e) w[e] = b * eg * k(i)[e];
      for (int64_t j = 0; j < i; ++j) {
        const float a = b * vk.dot(k(i), k(j), d_k) * std::exp(G[i] - G[j]);
        A[i * C + j] = a;
        vk.axpy(-a, U + j * d_v, u, d_v);
        vk.axpy(-a, W + j * d_k, w, d_k);
      }
    }
    // Products with the state, four state rows (columns of S) at a time:
    //   V'_i[j] = U_i[j] - S_j . W_i;  SQ_i[j] = e^G_i S_j . q_i;
    //   S_j <- e^G_last S_j + sum_i V'_i[j] e^(G_last - G_i) k_i.
    const float last = G[c - 1];
    for (int64_t j0 = 0; j0 < d_v; j0 += 4) {
      float* rows[4];
      for (int64_t jj = 0; jj < 4; ++jj) rows[jj] = state + (j0 + jj) * d_k;
      float d4[4];
      for (int64_t i = 0; i < c; ++i) {
        vk.dot4(rows, W + i * d_k, d_k, d4);
        for (int64_t jj = 0; jj < 4; ++jj) U[i * d_v + j0 + jj] -= d4[jj];
        vk.dot4(rows, q(i), d_k, d4);
        const float eg = std::exp(G[i]);
        for (int64_t jj = 0; jj < 4; ++jj) SQ[i * d_v + j0 + jj] = eg * d4[jj];
      }
      const float decay = std::exp(last);
      for (int64_t jj = 0; jj < 4; ++jj) {
        float* row = rows[jj];
        for (int64_t e = 0; e < d_k; ++e) row[e] *= decay;
        for (int64_t i = 0; i < c; ++i) {
          vk.axpy(U[i * d_v + j0 + jj] * std::exp(last - G[i]), k(i), row, d_k);
        }
      }
    }
    // Outputs: O_i = SQ_i + sum_{l <= i} (q_i . k_l) e^(G_i - G_l) V'_l.
    for (int64_t i = 0; i < c; ++i) {
      float* o = r.out + (c0 + i) * r.out_stride;
      std::copy(SQ + i * d_v, SQ + (i + 1) * d_v, o);
      for (int64_t l = 0; l <= i; ++l) {
        vk.axpy(vk.dot(q(i), k(l), d_k) * std::exp(G[i] - G[l]), U + l * d_v, o, d_v);
      }
    }
  }
}

}  // namespace strata::ops
