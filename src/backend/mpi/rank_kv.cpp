#include "backend/mpi/rank_kv.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace strata::mpi {

RankKvStores::RankKvStores(std::vector<bool> layers_with_kv, int64_t n_kv_heads, int64_t head_dim)
    : layers_with_kv_(std::move(layers_with_kv)), n_kv_heads_(n_kv_heads), head_dim_(head_dim) {}

void RankKvStores::grow(Store& store, int64_t slots) const {
  if (slots <= store.slots) return;
  const int64_t target = std::max(slots, 2 * store.slots);  // doubling: few copies over a session
  const auto bytes = static_cast<size_t>(target * n_kv_heads_ * store.row_bytes);
  for (size_t il = 0; il < layers_with_kv_.size(); ++il) {
    if (!layers_with_kv_[il]) continue;
    store.k[il].resize(bytes);  // keeps the slots already written
    store.v[il].resize(bytes);
  }
  store.slots = target;
}

const std::vector<ops::KvLayerView>& RankKvStores::views(const KvDescription& kv,
                                                         int64_t max_position) {
  STRATA_CHECK(kv.type == GgmlType::F16 || kv.type == GgmlType::Q8_0,
               "rank 0 names a KV cache of type {}, not F16 or Q8_0", ggml_type_name(kv.type));
  STRATA_CHECK(kv.head_row_bytes > 0 && kv.page_size >= 0 && kv.capacity >= 0,
               "rank 0 names a KV cache of row {} bytes, page {} and capacity {}",
               kv.head_row_bytes, kv.page_size, kv.capacity);
  Store& store = stores_[kv.key];
  if (store.k.empty() || store.type != kv.type || store.row_bytes != kv.head_row_bytes) {
    // A new cache at this address (or a reused address of another type): nothing to keep.
    store = Store{};
    store.type = kv.type;
    store.row_bytes = kv.head_row_bytes;
    store.k.resize(layers_with_kv_.size());
    store.v.resize(layers_with_kv_.size());
  }
  int64_t slots = max_position + 1;
  if (kv.page_size > 0) {
    STRATA_CHECK(static_cast<int64_t>(kv.pages.size()) * kv.page_size >= kv.capacity,
                 "rank 0's page table of {} pages does not cover its {} positions", kv.pages.size(),
                 kv.capacity);
    for (const int32_t page : kv.pages) {
      STRATA_CHECK(page >= 0, "rank 0's page table names page {}", page);
      slots = std::max(slots, (int64_t{page} + 1) * kv.page_size);
    }
  }
  grow(store, slots);
  views_.assign(layers_with_kv_.size(), ops::KvLayerView{});
  for (size_t il = 0; il < layers_with_kv_.size(); ++il) {
    ops::KvLayerView& view = views_[il];
    view.type = kv.type;
    view.n_kv_heads = n_kv_heads_;
    view.head_dim = head_dim_;
    view.head_row_bytes = kv.head_row_bytes;
    view.page_size = kv.page_size;
    view.pages = kv.page_size > 0 ? kv.pages.data() : nullptr;
    view.capacity = kv.capacity;
    if (layers_with_kv_[il]) {
      view.k = store.k[il].data();
      view.v = store.v[il].data();
    }
  }
  return views_;
}

void RankKvStores::copy_slots(uint64_t key, int64_t from, int64_t to, int64_t n) {
  const auto it = stores_.find(key);
  if (it == stores_.end()) return;
  Store& store = it->second;
  // Slots past what this rank holds were never written here: nothing to copy from them.
  grow(store, to + n);
  const int64_t copied = std::min(n, store.slots - from);
  if (copied <= 0) return;
  const auto stride = static_cast<size_t>(n_kv_heads_ * store.row_bytes);
  for (size_t il = 0; il < layers_with_kv_.size(); ++il) {
    if (!layers_with_kv_[il]) continue;
    for (std::vector<uint8_t>* part : {&store.k[il], &store.v[il]}) {
      std::memmove(part->data() + static_cast<size_t>(to) * stride,
                   part->data() + static_cast<size_t>(from) * stride,
                   static_cast<size_t>(copied) * stride);
    }
  }
}

uint64_t RankKvStores::bytes() const {
  uint64_t total = 0;
  for (const auto& [key, store] : stores_)
    for (size_t il = 0; il < store.k.size(); ++il) total += store.k[il].size() + store.v[il].size();
  return total;
}

}  // namespace strata::mpi
