#include "ops/rms_norm.h"

#include <immintrin.h>

#include <cmath>

#include "ops/transpose_avx2.h"
#include "util/cpu_features.h"

namespace strata::ops {
namespace {

// Each row: squares in float, summed in double in index order, the scale in float: the order other
// GGUF engines use, so results agree to the last bit (activation quantization downstream amplifies
// any difference). A row's sum is one chain of dependent double additions; the kernels below run
// several rows' chains side by side, which overlaps their latencies without changing any row's
// order.

// sums[r] for R rows of n values (row r at x + r * n).
template <int R>
void row_sums(const float* x, int64_t n, double* sums) {
  double sum[R] = {};
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < R; ++r) sum[r] += static_cast<double>(x[r * n + i] * x[r * n + i]);
  }
  for (int r = 0; r < R; ++r) sums[r] = sum[r];
}

// row_sums for 8 * G rows: 8 x 8 tiles transposed so that one vector holds a column of 8 rows,
// its squares widened to double and added lane by lane (lane m: row m's chain, in index order).
template <int G>
__attribute__((target("avx2"))) void row_sums_avx2(const float* x, int64_t n, double* sums) {
  __m256d acc[G][2];
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_pd();
  int64_t i0 = 0;
  for (; i0 + 8 <= n; i0 += 8) {
    for (int g = 0; g < G; ++g) {
      __m256 t[8];
      for (int m = 0; m < 8; ++m) t[m] = _mm256_loadu_ps(x + (g * 8 + m) * n + i0);
      transpose8x8(t);
      for (int c = 0; c < 8; ++c) {
        const __m256 squares = _mm256_mul_ps(t[c], t[c]);
        acc[g][0] = _mm256_add_pd(acc[g][0], _mm256_cvtps_pd(_mm256_castps256_ps128(squares)));
        acc[g][1] = _mm256_add_pd(acc[g][1], _mm256_cvtps_pd(_mm256_extractf128_ps(squares, 1)));
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    _mm256_storeu_pd(sums + g * 8, acc[g][0]);
    _mm256_storeu_pd(sums + g * 8 + 4, acc[g][1]);
  }
  for (int r = 0; r < 8 * G; ++r) {
    for (int64_t i = i0; i < n; ++i) sums[r] += static_cast<double>(x[r * n + i] * x[r * n + i]);
  }
}

// A row normed with its sum of squares.
void finish_row(const float* x, double sum, const float* weight, float* out, int64_t n, float eps) {
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (weight) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double sum = 0;
  row_sums<1>(x, n, &sum);
  finish_row(x, sum, weight, out, n, eps);
}

void rms_norm_rows(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                   float eps) {
  static const bool avx2 = cpu_features().has_avx2_level();
  double sums[16];
  for (int64_t r = 0; r < rows;) {
    const float* xr = x + r * n;
    const int64_t left = rows - r;
    const int64_t count = avx2 && left >= 16 ? 16 : avx2 && left >= 8 ? 8 : left >= 4 ? 4 : 1;
    switch (count) {
      case 16:
        row_sums_avx2<2>(xr, n, sums);
        break;
      case 8:
        row_sums_avx2<1>(xr, n, sums);
        break;
      case 4:
        row_sums<4>(xr, n, sums);
        break;
      default:
        row_sums<1>(xr, n, sums);
    }
    // Every sum is taken before any row is written: out may alias x.
    for (int64_t i = 0; i < count; ++i)
      finish_row(xr + i * n, sums[i], weight, out + (r + i) * n, n, eps);
    r += count;
  }
}

}  // namespace strata::ops
