#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace strata::log {
namespace {

Level level_from_env() {
  const char* env = std::getenv("STRATA_LOG");
  if (!env) return Level::info;
  if (!std::strcmp(env, "error")) return Level::error;
  if (!std::strcmp(env, "warn")) return Level::warn;
  if (!std::strcmp(env, "debug")) return Level::debug;
  return Level::info;
}

std::atomic<Level>& current() {
  static std::atomic<Level> value{level_from_env()};
  return value;
}

const char* prefix(Level l) {
  switch (l) {
    case Level::error:
      return "error: ";
    case Level::warn:
      return "warning: ";
    case Level::info:
      return "";
    case Level::debug:
      return "debug: ";
  }
  return "";
}

}  // namespace

Level level() {
  return current().load(std::memory_order_relaxed);
}
void set_level(Level l) {
  current().store(l, std::memory_order_relaxed);
}

void write(Level l, std::string_view message) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "%s%.*s\n", prefix(l), static_cast<int>(message.size()), message.data());
}

}  // namespace strata::log
