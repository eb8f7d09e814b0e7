// Attention over a paged cache (positions scattered over shuffled pages) gives exactly what the
// same keys and values give in a contiguous cache: the softmax chunks do not depend on pages.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kv_test_cache.h"
#include "ops/attention.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::ops {
namespace {

using PagedCache = test_kv::Cache;

PagedCache make_paged(GgmlType type, int64_t heads, int64_t d, int64_t n, int64_t page_size,
                      uint32_t seed) {
  return test_kv::make_cache(type, heads, d, n, page_size, seed);
}

TEST(PagedAttention, EqualsContiguousForEveryPageSize) {
  const int64_t heads = 2, d = 128, n = 300, group = 4;
  const auto keys = test::random_floats(n * heads * d, 31);
  const auto values = test::random_floats(n * heads * d, 32);
  const auto q = test::random_floats(group * d, 33, 1.5f);
  for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0}) {
    const int64_t row_bytes = quant::row_bytes(type, d);
    std::vector<uint8_t> k(static_cast<size_t>(n * heads * row_bytes)), v(k.size());
    const KvLayerView flat{type, k.data(), v.data(), heads, d, row_bytes};
    for (int64_t pos = 0; pos < n; ++pos)
      kv_store(flat, pos, &keys[pos * heads * d], &values[pos * heads * d]);
    for (int64_t page_size : {16, 32, 48, 64, 128, 256}) {
      SCOPED_TRACE(testing::Message() << ggml_type_name(type) << " page " << page_size);
      PagedCache paged = make_paged(type, heads, d, n, page_size, 7);
      for (int64_t pos = 0; pos < n; ++pos)
        kv_store(paged.view, pos, &keys[pos * heads * d], &values[pos * heads * d]);
      for (int64_t len : {1, 15, 16, 17, 63, 64, 65, 200, 300}) {
        std::vector<float> want(static_cast<size_t>(group * d)), got(want.size());
        attend_group(flat, 1, q.data(), group, len, 0.1f, want.data());
        attend_group(paged.view, 1, q.data(), group, len, 0.1f, got.data());
        ASSERT_EQ(got, want) << "len " << len;
      }
    }
  }
}

TEST(PagedAttention, RowsLandInTheirPageSlots) {
  const int64_t heads = 3, d = 64, n = 40, page_size = 16;
  PagedCache paged = make_paged(GgmlType::F16, heads, d, n, page_size, 3);
  const KvLayerView& kv = paged.view;
  for (int64_t pos : {0, 15, 16, 39}) {
    const int64_t slot =
        paged.pages[static_cast<size_t>(pos / page_size)] * page_size + pos % page_size;
    EXPECT_EQ(kv.slot(pos), slot);
    EXPECT_EQ(kv.k_row(pos, 2), paged.k.data() + (slot * heads + 2) * kv.head_row_bytes);
    EXPECT_EQ(kv.v_row(pos, 1), paged.v.data() + (slot * heads + 1) * kv.head_row_bytes);
    EXPECT_EQ(kv.contiguous_from(pos), page_size - pos % page_size);
  }
  KvLayerView flat = kv;
  flat.pages = nullptr;
  EXPECT_EQ(flat.slot(37), 37);
}

}  // namespace
}  // namespace strata::ops
