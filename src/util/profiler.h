#pragma once
// Wall-time profile by named slot, for "where does a decode step go" (strata bench --profile).
// Off by default: a disabled Scope costs one relaxed load.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::profile {

struct Slot {
  explicit Slot(const char* name);  // registers the slot; declare as a function-local static
  const char* name;
  std::atomic<uint64_t> nanoseconds{0};
  std::atomic<uint64_t> calls{0};
};

void set_enabled(bool enabled);
bool enabled();
void reset();

struct Entry {
  std::string name;
  double seconds;
  uint64_t calls;
};
std::vector<Entry> snapshot();  // in registration order

class Scope {
 public:
  explicit Scope(Slot& slot) : slot_(enabled() ? &slot : nullptr) {
    if (slot_) start_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    if (!slot_) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count();
    slot_->nanoseconds.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
    slot_->calls.fetch_add(1, std::memory_order_relaxed);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Slot* slot_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace strata::profile

#define STRATA_PROFILE_CAT2(a, b) a##b
#define STRATA_PROFILE_CAT(a, b) STRATA_PROFILE_CAT2(a, b)
// Times the rest of the enclosing block under `name` (a string literal).
#define STRATA_PROFILE(name)                                                               \
  static ::strata::profile::Slot STRATA_PROFILE_CAT(strata_profile_slot_, __LINE__){name}; \
  ::strata::profile::Scope STRATA_PROFILE_CAT(                                             \
      strata_profile_scope_, __LINE__)(STRATA_PROFILE_CAT(strata_profile_slot_, __LINE__))
