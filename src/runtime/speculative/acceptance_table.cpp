#include "runtime/speculative/acceptance_table.h"

#include <algorithm>

namespace strata {

int AcceptanceTable::bucket_of(int64_t evidence) {
  constexpr int64_t kUpTo[kBuckets - 2] = {2, 3, 5, 9, 19, 39};
  if (evidence <= 0) return 0;
  const auto* it = std::lower_bound(std::begin(kUpTo), std::end(kUpTo), evidence);
  return 1 + static_cast<int>(it - std::begin(kUpTo));
}

void AcceptanceTable::record(int bucket, int64_t kept, bool rejected) {
  Counts& c = counts_[static_cast<size_t>(std::clamp(bucket, 0, kBuckets - 1))];
  c.kept = c.kept * kFade + static_cast<double>(kept);
  c.rejections = c.rejections * kFade + (rejected ? 1.0 : 0.0);
}

}  // namespace strata
