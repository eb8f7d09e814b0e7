#include "backend/mpi/link_probe.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace strata::mpi {

namespace {

constexpr int kLatencyRounds = 31;
constexpr int kBandwidthRounds = 5;
constexpr size_t kBandwidthBytes = size_t{4} << 20;  // a 512-token batch of a 4096-wide model

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

MeasuredLink measure_links(MpiLink& link) {
  using Clock = std::chrono::steady_clock;
  MeasuredLink worst;
  const std::vector<uint8_t> small(8, 1), large(kBandwidthBytes, 2);
  for (int r = 1; r < link.size(); ++r) {
    if (link.rank() == r) {
      for (int i = 0; i < kLatencyRounds + kBandwidthRounds; ++i) {
        const std::vector<uint8_t> m = link.receive(0, Tag::reply, "a ping");
        link.send(0, Tag::reply, m);
      }
      continue;
    }
    if (link.rank() != 0) continue;
    std::vector<double> round_ms, big_ms;
    for (int i = 0; i < kLatencyRounds + kBandwidthRounds; ++i) {
      const bool is_large = i >= kLatencyRounds;
      const Clock::time_point start = Clock::now();
      link.send(r, Tag::reply, is_large ? large : small);
      link.receive(r, Tag::reply, "a pong");
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      (is_large ? big_ms : round_ms).push_back(ms);
    }
    MeasuredLink m;
    m.slowest_rank = r;
    m.latency_ms = median(round_ms) / 2;
    // The quickest round: the first ones may meet a rank still busy probing its RAM.
    const double big = *std::min_element(big_ms.begin(), big_ms.end());
    const double transfer_ms = std::max(1e-6, big / 2 - m.latency_ms);
    m.gbytes_per_second = static_cast<double>(kBandwidthBytes) / (transfer_ms * 1e6);
    const bool slower = worst.gbytes_per_second == 0 ||
                        m.gbytes_per_second < worst.gbytes_per_second ||
                        m.latency_ms > worst.latency_ms;
    if (slower) worst = m;
  }
  return worst;
}

}  // namespace strata::mpi
