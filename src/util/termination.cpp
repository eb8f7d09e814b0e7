#include "util/termination.h"

#include <atomic>

namespace strata {

namespace {
std::atomic<bool> terminating{false};
}

void request_termination() {
  terminating.store(true, std::memory_order_relaxed);
}
bool termination_requested() {
  return terminating.load(std::memory_order_relaxed);
}

}  // namespace strata
