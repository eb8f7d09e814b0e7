#include "util/profiler.h"

#include <mutex>

namespace strata::profile {
namespace {

std::atomic<bool> g_enabled{false};

struct Registry {
  std::mutex mutex;
  std::vector<Slot*> slots;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

Slot::Slot(const char* n) : name(n) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.slots.push_back(this);
}

void set_enabled(bool e) {
  g_enabled.store(e, std::memory_order_relaxed);
}
bool enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}

void reset() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (Slot* s : r.slots) {
    s->nanoseconds.store(0);
    s->calls.store(0);
  }
}

std::vector<Entry> snapshot() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<Entry> out;
  for (const Slot* s : r.slots) {
    out.push_back({s->name, static_cast<double>(s->nanoseconds.load()) * 1e-9, s->calls.load()});
  }
  return out;
}

}  // namespace strata::profile
