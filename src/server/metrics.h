#pragma once
// Counters of the HTTP side and the Prometheus text exposition of them plus the scheduler's.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/scheduler.h"

namespace strata::server {

enum class Endpoint {
  chat,
  completions,
  models,
  health,
  metrics,
  props,
  status,
  page,
  other,
  count
};
const char* endpoint_name(Endpoint e);

// A Prometheus label value: \\, \" and newlines escaped.
std::string prometheus_label(std::string_view value);

class HttpMetrics {
 public:
  void count_request(Endpoint e) { requests_[static_cast<size_t>(e)].fetch_add(1); }
  void count_status(int status);
  // Prometheus text format (version 0.0.4).
  std::string render(const SchedulerStats& s) const;

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Endpoint::count)> requests_{};
  std::atomic<uint64_t> status_2xx_{0}, status_4xx_{0}, status_5xx_{0}, status_503_{0};
};

}  // namespace strata::server
