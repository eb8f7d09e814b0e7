#pragma once
// KV caches for attention tests: contiguous, or in pages shuffled in memory so consecutive page
// table entries are never neighbours. Unwritten slots hold 0xff bytes (NaN in f16), so a read of
// one shows in the results.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::ops::test_kv {

struct Cache {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> pages;
  KvLayerView view;
};

// Room for n positions of `heads` heads of d values; page_size 0: contiguous.
inline Cache make_cache(GgmlType type, int64_t heads, int64_t d, int64_t n, int64_t page_size,
                        uint32_t seed) {
  Cache c;
  const int64_t row_bytes = quant::row_bytes(type, d);
  int64_t slots = n;
  if (page_size > 0) {
    const int64_t needed = (n + page_size - 1) / page_size, n_pages = needed + 2;
    std::vector<int32_t> order(static_cast<size_t>(n_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    c.pages.assign(order.begin(), order.begin() + needed);
    slots = n_pages * page_size;
  }
  c.k.assign(static_cast<size_t>(slots * heads * row_bytes), 0xff);
  c.v.assign(c.k.size(), 0xff);
  c.view = KvLayerView{type, c.k.data(), c.v.data(), heads, d, row_bytes};
  if (page_size > 0) {
    c.view.page_size = page_size;
    c.view.pages = c.pages.data();
    c.view.capacity = static_cast<int64_t>(c.pages.size()) * page_size;
  }
  return c;
}

// Stores random keys (seed) and values (seed + 1) at positions [0, n).
inline void store_random(const KvLayerView& kv, int64_t n, uint32_t seed) {
  const int64_t row = kv.n_kv_heads * kv.head_dim;
  const auto keys = test::random_floats(static_cast<size_t>(n * row), seed);
  const auto values = test::random_floats(static_cast<size_t>(n * row), seed + 1);
  for (int64_t pos = 0; pos < n; ++pos)
    kv_store(kv, pos, &keys[static_cast<size_t>(pos * row)],
             &values[static_cast<size_t>(pos * row)]);
}

// How far attention over a cache of `type` may be from an exact softmax over what the cache
// holds: float rounding; Q8_0 values are also weighed in int16 (ops/attention_q8_values.h: each
// weight moves by up to 2^-16 of its chunk's largest, well under what the values' codes round).
inline double exact_attention_tolerance(GgmlType type) {
  return type == GgmlType::Q8_0 ? 3e-4 : 1e-4;
}

// The definition, in doubles: softmax(q . K[first, length) * scale) V with the query and keys
// rounded to the cache's partner format as the kernels do, and an optional sink logit in the
// denominator only; over KV head `head`.
inline std::vector<double> exact_attention(const KvLayerView& kv, const float* q, int64_t first,
                                           int64_t length, double scale, const float* sink,
                                           int64_t head = 0) {
  const int64_t d = kv.head_dim;
  const quant::TypeTraits& cache = quant::traits(kv.type);
  const quant::TypeTraits& partner = quant::traits(cache.activation_type);
  std::vector<uint8_t> packed(static_cast<size_t>(quant::row_bytes(partner.type, d)));
  std::vector<float> qr(static_cast<size_t>(d)), kr(qr.size()), vr(qr.size());
  partner.kernels.quantize_row(q, packed.data(), d);
  partner.kernels.dequantize_row(packed.data(), qr.data(), d);
  std::vector<double> s, out(static_cast<size_t>(d), 0.0);
  double max = sink ? *sink : -1e300, sum = 0;
  for (int64_t p = first; p < length; ++p) {
    cache.kernels.dequantize_row(kv.k_row(p, head), kr.data(), d);
    double dot = 0;
    for (int64_t i = 0; i < d; ++i)
      dot += double(qr[static_cast<size_t>(i)]) * kr[static_cast<size_t>(i)];
    s.push_back(dot * scale);
    max = std::max(max, s.back());
  }
  for (auto& x : s) sum += (x = std::exp(x - max));
  if (sink) sum += std::exp(*sink - max);
  for (int64_t p = first; p < length; ++p) {
    cache.kernels.dequantize_row(kv.v_row(p, head), vr.data(), d);
    for (int64_t i = 0; i < d; ++i)
      out[static_cast<size_t>(i)] +=
          s[static_cast<size_t>(p - first)] / sum * vr[static_cast<size_t>(i)];
  }
  return out;
}

}  // namespace strata::ops::test_kv
