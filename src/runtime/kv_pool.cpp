#include "runtime/kv_pool.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "quant/quant.h"
#include "util/error.h"

namespace strata {

KvPool::KvPool(const ModelHParams& hp, int64_t n_pages, int64_t page_size, GgmlType type,
               const std::vector<bool>& layers_with_kv)
    : type_(type),
      page_size_(page_size),
      n_layer_(hp.n_layer),
      n_kv_heads_(hp.n_head_kv),
      head_dim_(hp.head_dim) {
  STRATA_CHECK(type == GgmlType::F16 || type == GgmlType::Q8_0,
               "KV cache type {} is not supported (expected F16 or Q8_0)", ggml_type_name(type));
  STRATA_CHECK(page_size > 0, "KV page size must be positive, got {}", page_size);
  STRATA_CHECK(n_pages > 0 && n_pages <= std::numeric_limits<int32_t>::max(),
               "KV page count must be in 1..{}, got {}", std::numeric_limits<int32_t>::max(),
               n_pages);
  const int64_t block = quant::traits(type).block_elems;
  STRATA_CHECK(hp.head_dim % block == 0, "head size {} is not a multiple of the {} block size {}",
               hp.head_dim, ggml_type_name(type), block);
  STRATA_CHECK(layers_with_kv.empty() || static_cast<int64_t>(layers_with_kv.size()) == n_layer_,
               "{} KV-layer flags for {} layers", layers_with_kv.size(), n_layer_);
  for (int64_t il = 0; il < n_layer_; ++il) {
    const bool kv = layers_with_kv.empty() || layers_with_kv[static_cast<size_t>(il)];
    slot_of_layer_.push_back(kv ? n_stored_++ : -1);
  }
  row_bytes_ = quant::row_bytes(type, hp.head_dim);
  layer_bytes_ = n_pages * page_size * n_kv_heads_ * row_bytes_;
  bytes_ = 2 * layer_bytes_ * n_stored_;
  storage_.reset(new uint8_t[static_cast<size_t>(bytes_)]);
  refcount_.assign(static_cast<size_t>(n_pages), 0);
  // Taken from the back: low pages first, which keeps a lightly used pool compact.
  for (int64_t p = n_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

int32_t KvPool::allocate() {
  if (free_.empty()) return -1;
  const int32_t page = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(page)] = 1;
  return page;
}

void KvPool::release(int32_t page) {
  int32_t& count = refcount_[static_cast<size_t>(page)];
  if (--count == 0) free_.push_back(page);
}

void KvPool::copy_page(int32_t from, int32_t to, int64_t n_positions) {
  const int64_t page_bytes = page_size_ * n_kv_heads_ * row_bytes_;
  const size_t count = static_cast<size_t>(n_positions * n_kv_heads_ * row_bytes_);
  for (int64_t half = 0; half < 2 * n_stored_; ++half) {  // keys and values of every layer
    uint8_t* base = storage_.get() + half * layer_bytes_;
    std::memcpy(base + to * page_bytes, base + from * page_bytes, count);
  }
  if (copy_listener_) {
    copy_listener_->kv_slots_copied(storage_.get(), from * page_size_, to * page_size_,
                                    n_positions);
  }
}

ops::KvLayerView KvPool::layer_view(int64_t layer, const int32_t* pages, int64_t capacity) const {
  const int64_t slot = slot_of_layer_[static_cast<size_t>(layer)];
  uint8_t* k = slot >= 0 ? storage_.get() + 2 * slot * layer_bytes_ : nullptr;
  ops::KvLayerView view{type_,       k,         k ? k + layer_bytes_ : nullptr,
                        n_kv_heads_, head_dim_, row_bytes_};
  view.page_size = page_size_;
  view.pages = pages;
  view.capacity = capacity;
  return view;
}

}  // namespace strata
