#include <utility>

#include "runtime/kv_pool.h"
#include "util/error.h"

namespace strata {
namespace {

// Stands in for the page table of a sequence without pages, so its views stay paged (with
// capacity 0) rather than turning into contiguous views of the pool's first positions.
constexpr int32_t kNoPages[1] = {0};

int64_t pages_for(int64_t positions, int64_t page_size) {
  return (positions + page_size - 1) / page_size;
}

}  // namespace

KvSequence::KvSequence(KvPool& pool) : pool_(&pool) {
  refresh_views();
}

KvSequence::KvSequence(KvSequence&& other) noexcept
    : pool_(other.pool_),
      pages_(std::move(other.pages_)),
      length_(std::exchange(other.length_, 0)),
      views_(std::move(other.views_)) {
  other.pages_.clear();
  other.views_.clear();
}

KvSequence& KvSequence::operator=(KvSequence&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    pages_ = std::move(other.pages_);
    length_ = std::exchange(other.length_, 0);
    views_ = std::move(other.views_);
    other.pages_.clear();
    other.views_.clear();
  }
  return *this;
}

int64_t KvSequence::capacity() const {
  return pages_held() * pool_->page_size();
}

void KvSequence::set_length(int64_t n) {
  STRATA_CHECK(n >= 0 && n <= capacity(), "sequence length {} is outside 0..{} (its capacity)", n,
               capacity());
  const int64_t ps = pool_->page_size();
  for (int64_t i = length_ / ps; n > length_ && i < pages_for(n, ps); ++i) {
    STRATA_CHECK(pool_->refcount(pages_[static_cast<size_t>(i)]) == 1,
                 "positions up to {} were written into a shared page: reserve first", n);
  }
  length_ = n;
}

bool KvSequence::reserve(int64_t n) {
  STRATA_CHECK(n >= 0, "cannot reserve {} positions", n);
  if (n <= length_) return true;
  const int64_t ps = pool_->page_size();
  const int64_t first = length_ / ps, end = pages_for(n, ps);  // pages the writes touch
  int64_t needed = std::max<int64_t>(0, end - pages_held());
  for (int64_t i = first; i < std::min(end, pages_held()); ++i) {
    if (pool_->refcount(pages_[static_cast<size_t>(i)]) > 1) ++needed;
  }
  if (needed > pool_->free_pages()) return false;
  for (int64_t i = first; i < std::min(end, pages_held()); ++i) {
    int32_t& page = pages_[static_cast<size_t>(i)];
    if (pool_->refcount(page) == 1) continue;
    // Copy-on-write: the other holders keep the original.
    const int32_t own = pool_->allocate();
    pool_->copy_page(page, own, std::clamp(length_ - i * ps, int64_t{0}, ps));
    pool_->release(page);
    page = own;
  }
  while (pages_held() < end) pages_.push_back(pool_->allocate());
  refresh_views();
  return true;
}

void KvSequence::truncate(int64_t n) {
  STRATA_CHECK(n >= 0 && n <= length_, "cannot truncate a sequence of {} positions to {}", length_,
               n);
  length_ = n;
  const int64_t keep = pages_for(n, pool_->page_size());
  while (pages_held() > keep) {
    pool_->release(pages_.back());
    pages_.pop_back();
  }
  refresh_views();
}

bool KvSequence::share_prefix(const KvSequence& other, int64_t n) {
  STRATA_CHECK(other.pool_ == pool_, "sequences in different KV pools cannot share pages");
  STRATA_CHECK(n >= 0 && n <= other.length_,
               "cannot share {} positions of a sequence of {} positions", n, other.length_);
  const int64_t ps = pool_->page_size();
  const int64_t full = n / ps, partial = n % ps;
  if (partial > 0 && pool_->free_pages() == 0) return false;
  // Built beside the old table, so sharing from this sequence itself works too.
  std::vector<int32_t> pages(other.pages_.begin(), other.pages_.begin() + full);
  for (int32_t page : pages) pool_->retain(page);
  if (partial > 0) {
    const int32_t own = pool_->allocate();
    pool_->copy_page(other.pages_[static_cast<size_t>(full)], own, partial);
    pages.push_back(own);
  }
  for (int32_t page : pages_) pool_->release(page);
  pages_ = std::move(pages);
  length_ = n;
  refresh_views();
  return true;
}

void KvSequence::release() {
  if (!pool_) return;
  for (int32_t page : pages_) pool_->release(page);
  pages_.clear();
  length_ = 0;
  refresh_views();
}

void KvSequence::refresh_views() {
  views_.clear();
  if (!pool_) return;
  const int32_t* table = pages_.empty() ? kNoPages : pages_.data();
  for (int64_t il = 0; il < pool_->n_layer(); ++il)
    views_.push_back(pool_->layer_view(il, table, capacity()));
}

}  // namespace strata
