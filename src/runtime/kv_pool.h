#pragma once
// Paged key/value storage shared by many sequences (continuous batching). The pool owns
// n_pages pages of page_size positions, each holding every layer's keys and values for those
// positions; a KvSequence maps its positions onto pages through a page table. Pages are
// refcounted so sequences can share a common prefix (agents resend the whole conversation each
// turn), and a sequence about to write into a page someone else also holds copies it first.
// Not thread-safe: one scheduler thread owns the pool and its sequences.

#include <cstdint>
#include <memory>
#include <vector>

#include "model/hparams.h"
#include "model/model.h"
#include "ops/attention.h"

namespace strata {

class KvPool {
 public:
  // type: F16 or Q8_0. Throws strata::Error for other types or non-positive sizes.
  // layers_with_kv: which layers keep keys and values (Model::kv_layers()); the recurrent layers
  // of hybrid models get no pages and views without storage. Empty: every layer.
  KvPool(const ModelHParams& hp, int64_t n_pages, int64_t page_size, GgmlType type,
         const std::vector<bool>& layers_with_kv = {});
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int64_t page_size() const { return page_size_; }
  int64_t total_pages() const { return static_cast<int64_t>(refcount_.size()); }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t bytes() const { return bytes_; }
  // Bytes one position takes (all layers, keys and values).
  int64_t bytes_per_position() const { return 2 * n_stored_ * n_kv_heads_ * row_bytes_; }
  GgmlType type() const { return type_; }
  int64_t n_layer() const { return n_layer_; }
  // A model that keeps the keys and values elsewhere (a GPU) is told of every page copy, so it
  // copies its own contents too. Null: nobody to tell.
  void set_copy_listener(Model* model) { copy_listener_ = model; }

 private:
  friend class KvSequence;

  int32_t allocate();  // a page with refcount 1; -1 when none is free
  void retain(int32_t page) { ++refcount_[static_cast<size_t>(page)]; }
  void release(int32_t page);
  int32_t refcount(int32_t page) const { return refcount_[static_cast<size_t>(page)]; }
  // Copies the first n_positions positions of page `from` into page `to`, in every layer.
  void copy_page(int32_t from, int32_t to, int64_t n_positions);
  ops::KvLayerView layer_view(int64_t layer, const int32_t* pages, int64_t capacity) const;

  GgmlType type_;
  int64_t page_size_;
  int64_t n_layer_, n_kv_heads_, head_dim_, row_bytes_;
  std::vector<int64_t> slot_of_layer_;  // [n_layer] storage slot, -1: the layer keeps no KV
  int64_t n_stored_ = 0;                // layers with storage
  int64_t layer_bytes_;                 // keys (or values) of one layer for all pages
  int64_t bytes_;
  // Left uninitialized: the OS commits a page of memory when a sequence first writes it, and
  // attention only reads positions that were written.
  std::unique_ptr<uint8_t[]> storage_;
  std::vector<int32_t> refcount_;  // [n_pages]
  std::vector<int32_t> free_;      // pages with refcount 0, taken from the back
  Model* copy_listener_ = nullptr;
};

// One sequence's page table in a pool. Movable, not copyable; returns its pages on destruction.
// Positions [0, length) hold valid keys and values; [length, capacity) have pages but no data.
// Before each forward that writes positions [length, n), call reserve(n), then set_length(n).
class KvSequence {
 public:
  explicit KvSequence(KvPool& pool);
  ~KvSequence() { release(); }
  KvSequence(KvSequence&& other) noexcept;
  KvSequence& operator=(KvSequence&& other) noexcept;
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  int64_t length() const { return length_; }
  // After a forward wrote positions [length, n); n <= capacity.
  void set_length(int64_t n);
  int64_t capacity() const;
  // Makes positions [length, n) writable: allocates pages, and gives this sequence its own copy
  // of any shared page that range touches. False, with nothing changed, when the pool has too
  // few free pages.
  bool reserve(int64_t n);
  // Forgets positions >= n (n <= length) and returns pages no longer needed.
  void truncate(int64_t n);
  // Becomes other's first n positions (n <= other.length()), both in the same pool: full pages
  // are shared, a partial last page is copied. Releases what this held before. False, with
  // nothing changed, when the pool has no free page for that copy.
  bool share_prefix(const KvSequence& other, int64_t n);
  // Length 0, every page returned to the pool.
  void release();
  int64_t pages_held() const { return static_cast<int64_t>(pages_.size()); }
  // A view per layer with this sequence's page table; valid until the next reserve, truncate,
  // share_prefix or release.
  SequenceKv layers() const { return views_; }

 private:
  void refresh_views();

  KvPool* pool_;
  std::vector<int32_t> pages_;  // page of positions [i * page_size, (i + 1) * page_size)
  int64_t length_ = 0;
  std::vector<ops::KvLayerView> views_;  // [n_layer]
};

}  // namespace strata
