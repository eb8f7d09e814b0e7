// Page bookkeeping of the shared KV pool: allocation, refcounted prefix sharing, copy-on-write
// and that every page comes back.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "runtime/kv_pool.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata {
namespace {

ModelHParams small_hparams() {
  ModelHParams hp;
  hp.n_layer = 2;
  hp.n_head_kv = 2;
  hp.head_dim = 64;
  return hp;
}

// Stores a recognizable key/value for `pos` in every layer: every element is tag + pos (exact
// in f16 below 2048).
void write_position(const KvSequence& seq, int64_t pos, float tag) {
  std::vector<float> row(2 * 64, tag + static_cast<float>(pos));
  for (const ops::KvLayerView& layer : seq.layers())
    ops::kv_store(layer, pos, row.data(), row.data());
}

float read_position(const KvSequence& seq, int64_t pos, int64_t layer = 1) {
  const ops::KvLayerView& view = seq.layers()[static_cast<size_t>(layer)];
  std::vector<float> out(64);
  quant::traits(view.type).kernels.dequantize_row(view.v_row(pos, 1), out.data(), 64);
  return out[5];
}

// Writes positions [length, n) tagged `tag` the way a forward pass would.
void append(KvSequence& seq, int64_t n, float tag) {
  ASSERT_TRUE(seq.reserve(n));
  for (int64_t pos = seq.length(); pos < n; ++pos) write_position(seq, pos, tag);
  seq.set_length(n);
}

TEST(KvPool, SizesAndTypes) {
  const ModelHParams hp = small_hparams();
  KvPool pool(hp, 10, 16, GgmlType::F16);
  EXPECT_EQ(pool.page_size(), 16);
  EXPECT_EQ(pool.total_pages(), 10);
  EXPECT_EQ(pool.free_pages(), 10);
  EXPECT_EQ(pool.bytes_per_position(), 2 * 2 * 2 * 64 * 2);  // k+v, layers, heads, f16 row
  EXPECT_EQ(pool.bytes(), pool.bytes_per_position() * 10 * 16);
  EXPECT_EQ(pool.type(), GgmlType::F16);
  KvPool q8(hp, 4, 32, GgmlType::Q8_0);
  EXPECT_EQ(q8.bytes_per_position(), 2 * 2 * 2 * quant::row_bytes(GgmlType::Q8_0, 64));
  EXPECT_THROW(KvPool(hp, 4, 16, GgmlType::Q4_K), Error);
  EXPECT_THROW(KvPool(hp, 0, 16, GgmlType::F16), Error);
  EXPECT_THROW(KvPool(hp, 4, 0, GgmlType::F16), Error);
}

TEST(KvSequence, ReserveFailsCleanlyWhenThePoolIsFull) {
  KvPool pool(small_hparams(), 4, 16, GgmlType::F16);
  KvSequence a(pool), b(pool);
  EXPECT_EQ(a.capacity(), 0);
  append(a, 40, 0);  // 3 pages
  EXPECT_EQ(a.pages_held(), 3);
  EXPECT_EQ(a.capacity(), 48);
  EXPECT_EQ(pool.free_pages(), 1);
  EXPECT_FALSE(b.reserve(17));  // needs 2
  EXPECT_EQ(b.pages_held(), 0);
  EXPECT_EQ(pool.free_pages(), 1);
  EXPECT_TRUE(b.reserve(16));
  EXPECT_EQ(pool.free_pages(), 0);
  EXPECT_FALSE(a.reserve(49));
  EXPECT_TRUE(a.reserve(48));  // inside its last page: no new page
  EXPECT_EQ(a.length(), 40);
  EXPECT_THROW(a.set_length(49), Error);
}

TEST(KvSequence, TruncateFreesPagesNoLongerNeeded) {
  KvPool pool(small_hparams(), 8, 16, GgmlType::F16);
  KvSequence a(pool);
  append(a, 70, 0);  // 5 pages
  EXPECT_EQ(pool.free_pages(), 3);
  a.truncate(33);
  EXPECT_EQ(a.length(), 33);
  EXPECT_EQ(a.pages_held(), 3);
  EXPECT_EQ(pool.free_pages(), 5);
  EXPECT_FLOAT_EQ(read_position(a, 32), 32.0f);
  a.truncate(32);
  EXPECT_EQ(a.pages_held(), 2);
  EXPECT_THROW(a.truncate(40), Error);
  a.truncate(0);
  EXPECT_EQ(pool.free_pages(), 8);
}

TEST(KvSequence, SharePrefixSharesFullPagesAndCopiesThePartialOne) {
  KvPool pool(small_hparams(), 10, 16, GgmlType::F16);
  KvSequence a(pool), b(pool), c(pool);
  append(a, 37, 0);  // pages: 16 + 16 + 5
  EXPECT_EQ(pool.free_pages(), 7);
  ASSERT_TRUE(b.share_prefix(a, 37));  // 2 shared, 1 copied
  EXPECT_EQ(b.length(), 37);
  EXPECT_EQ(b.pages_held(), 3);
  EXPECT_EQ(pool.free_pages(), 6);
  ASSERT_TRUE(c.share_prefix(a, 32));  // page-aligned: nothing copied
  EXPECT_EQ(pool.free_pages(), 6);
  for (int64_t pos : {0, 20, 36}) EXPECT_FLOAT_EQ(read_position(b, pos), float(pos));

  // b writes past the prefix into its own copy of the partial page: a is untouched.
  b.truncate(37);
  append(b, 40, 500);
  EXPECT_FLOAT_EQ(read_position(b, 37), 537.0f);
  append(a, 40, 600);
  EXPECT_FLOAT_EQ(read_position(a, 37), 637.0f);
  EXPECT_FLOAT_EQ(read_position(b, 37), 537.0f);

  // Cut b back into the shared second page: the next write copies it first.
  b.truncate(20);
  EXPECT_EQ(pool.free_pages(), 7);
  append(b, 24, 700);  // copy-on-write of page 1 (positions 16..19 kept)
  EXPECT_EQ(pool.free_pages(), 6);
  EXPECT_FLOAT_EQ(read_position(b, 19), 19.0f);
  EXPECT_FLOAT_EQ(read_position(b, 21), 721.0f);
  EXPECT_FLOAT_EQ(read_position(a, 21), 21.0f);
  EXPECT_FLOAT_EQ(read_position(c, 21), 21.0f);
  EXPECT_FLOAT_EQ(read_position(b, 3, 0), 3.0f);  // page 0 is still shared by all three

  a.release();
  b.release();
  c.release();
  EXPECT_EQ(pool.free_pages(), 10);
}

TEST(KvSequence, SharePrefixEdgeCases) {
  KvPool pool(small_hparams(), 4, 16, GgmlType::Q8_0);
  KvSequence a(pool), b(pool);
  append(a, 40, 0);
  ASSERT_TRUE(b.reserve(16));
  // No free page for the partial copy: b keeps what it had.
  EXPECT_FALSE(b.share_prefix(a, 20));
  EXPECT_EQ(b.pages_held(), 1);
  ASSERT_TRUE(b.share_prefix(a, 16));  // whole pages only: no free page needed
  EXPECT_EQ(pool.free_pages(), 1);     // b's old page came back
  EXPECT_THROW(b.share_prefix(a, 41), Error);
  // A sequence can become a prefix of itself.
  ASSERT_TRUE(a.share_prefix(a, 30));
  EXPECT_EQ(a.length(), 30);
  EXPECT_NEAR(read_position(a, 29), 29.0f, 0.1f);  // Q8_0 rounding
  KvPool other(small_hparams(), 4, 16, GgmlType::Q8_0);
  KvSequence stranger(other);
  EXPECT_THROW(stranger.share_prefix(a, 1), Error);
  a.release();
  b.release();
  EXPECT_EQ(pool.free_pages(), 4);
}

TEST(KvSequence, SetLengthRefusesWritesIntoSharedPages) {
  KvPool pool(small_hparams(), 4, 16, GgmlType::F16);
  KvSequence a(pool), b(pool);
  append(a, 32, 0);
  ASSERT_TRUE(b.share_prefix(a, 32));
  b.truncate(10);  // capacity still covers page 0, which a also holds
  EXPECT_THROW(b.set_length(12), Error);
  ASSERT_TRUE(b.reserve(12));
  b.set_length(12);
}

TEST(KvSequence, MovesAndDestructionReturnPages) {
  KvPool pool(small_hparams(), 6, 16, GgmlType::F16);
  {
    KvSequence a(pool);
    append(a, 20, 0);
    KvSequence moved(std::move(a));
    EXPECT_EQ(moved.length(), 20);
    EXPECT_EQ(a.pages_held(), 0);
    EXPECT_FLOAT_EQ(read_position(moved, 19), 19.0f);
    std::vector<KvSequence> many;
    for (int i = 0; i < 3; ++i) {
      many.emplace_back(pool);
      ASSERT_TRUE(many.back().reserve(16));
    }
    EXPECT_EQ(pool.free_pages(), 1);
    many[0] = std::move(moved);  // many[0]'s page comes back
    EXPECT_EQ(pool.free_pages(), 2);
    EXPECT_EQ(many[0].length(), 20);
  }
  EXPECT_EQ(pool.free_pages(), 6);
}

TEST(KvSequence, EmptySequenceViewsHaveNoRoom) {
  KvPool pool(small_hparams(), 2, 16, GgmlType::F16);
  KvSequence a(pool);
  ASSERT_EQ(a.layers().size(), 2u);
  for (const ops::KvLayerView& view : a.layers()) {
    EXPECT_NE(view.pages, nullptr);  // still paged: never mistaken for a contiguous cache
    EXPECT_EQ(view.capacity, 0);
  }
}

}  // namespace
}  // namespace strata
