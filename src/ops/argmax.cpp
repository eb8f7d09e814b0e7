#include "ops/argmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "util/cpu_features.h"

namespace strata::ops {
namespace {

// The largest value, NaNs skipped: max(v, m) keeps m where v is NaN (maxps returns its second
// operand then), as std::max_element never moves to a NaN.
__attribute__((target("avx2"))) float largest_avx2(const float* x, int64_t n) {
  __m256 m[4];
  for (auto& v : m) v = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) m[k] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * k), m[k]);
  }
  for (; i + 8 <= n; i += 8) m[0] = _mm256_max_ps(_mm256_loadu_ps(x + i), m[0]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3])));
  float best = x[0];
  for (const float v : lanes) best = v > best ? v : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

__attribute__((target("avx2"))) int64_t first_equal_avx2(const float* x, int64_t n, float value) {
  const __m256 want = _mm256_set1_ps(value);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), want, _CMP_EQ_OQ));
    if (hits) return i + __builtin_ctz(static_cast<unsigned>(hits));
  }
  for (; i < n; ++i)
    if (x[i] == value) return i;
  return n;
}

}  // namespace

int64_t argmax(const float* x, int64_t n) {
  static const bool avx2 = cpu_features().has_avx2_level();
  if (!avx2 || std::isnan(x[0])) return std::max_element(x, x + n) - x;
  return first_equal_avx2(x, n, largest_avx2(x, n));
}

}  // namespace strata::ops
