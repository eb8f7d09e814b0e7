#pragma once
// KV caches for attention tests: contiguous, or in pages shuffled in memory so consecutive page
// table entries are never neighbours. Unwritten slots hold 0xff bytes (NaN in f16), so a read of
// one shows in the results.

#include <algorithm>
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

}  // namespace strata::ops::test_kv
