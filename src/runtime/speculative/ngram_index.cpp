#include "runtime/speculative/ngram_index.h"

#include <algorithm>
#include <stdexcept>

namespace strata {
namespace {

// FNV-1a over the n tokens that end at `end` (inclusive).
uint64_t ngram_hash(std::span<const int32_t> tokens, size_t end, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = end + 1 - static_cast<size_t>(n); i <= end; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

// How many tokens ending at a_end in a and b_end in b are equal, counted back up to `most`.
int64_t agreeing(std::span<const int32_t> a, size_t a_end, std::span<const int32_t> b, size_t b_end,
                 int64_t most) {
  int64_t n = 0;
  while (n < most && static_cast<size_t>(n) <= a_end && static_cast<size_t>(n) <= b_end &&
         a[a_end - static_cast<size_t>(n)] == b[b_end - static_cast<size_t>(n)])
    ++n;
  return n;
}

}  // namespace

NgramIndex::NgramIndex(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n)
    throw std::invalid_argument("n-gram index: need 1 <= min_n <= max_n");
  ends_.resize(static_cast<size_t>(max_n - min_n + 1));
}

void NgramIndex::clear() {
  for (auto& m : ends_) m.clear();
}

void NgramIndex::add(std::span<const int32_t> text, size_t from, size_t to) {
  for (size_t end = from; end < to; ++end) {
    for (int n = min_n_; n <= max_n_ && static_cast<size_t>(n) <= end + 1; ++n)
      ends_[static_cast<size_t>(n - min_n_)][ngram_hash(text, end, n)] = end;
  }
}

std::optional<NgramIndex::Hit> NgramIndex::find(std::span<const int32_t> text,
                                                std::span<const int32_t> query,
                                                int64_t max_length) const {
  if (query.empty()) return std::nullopt;
  const size_t last = query.size() - 1;
  for (int n = std::min<int>(max_n_, static_cast<int>(query.size())); n >= min_n_; --n) {
    const auto& table = ends_[static_cast<size_t>(n - min_n_)];
    const auto it = table.find(ngram_hash(query, last, n));
    if (it == table.end()) continue;
    const int64_t length =
        agreeing(text, it->second, query, last, std::max<int64_t>(max_length, n));
    if (length < n) continue;  // a collision: the stored n-gram is another
    return Hit{it->second, length};
  }
  return std::nullopt;
}

std::vector<int32_t> copy_on(std::span<const int32_t> text, size_t from, int64_t max_tokens) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(0, max_tokens)));
  for (size_t i = from; std::ssize(out) < max_tokens; ++i)
    out.push_back(i < text.size() ? text[i] : out[i - text.size()]);
  return out;
}

}  // namespace strata
