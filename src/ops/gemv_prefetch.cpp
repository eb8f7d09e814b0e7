#include "ops/gemv_prefetch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "quant/quant.h"

namespace strata::ops {
namespace {

double best(std::span<const double> ms) {
  return *std::min_element(ms.begin(), ms.end());
}

double timed_gemv_ms(const WeightMatrix& w, const QuantizedRows& a, std::vector<float>& out,
                     bool prefetch) {
  MatmulSettings settings;
  settings.gemv_prefetch = prefetch;
  const auto start = std::chrono::steady_clock::now();
  matmul_rows(w, a, out.data(), w.rows, 0, w.rows, settings);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

bool prefetch_pays(std::span<const double> with_prefetch_ms,
                   std::span<const double> without_prefetch_ms) {
  if (with_prefetch_ms.empty() || without_prefetch_ms.empty()) return false;
  return best(without_prefetch_ms) > kMinPrefetchGain * best(with_prefetch_ms);
}

GemvPrefetchResult tune_gemv_prefetch(const WeightMatrix& w, const GemvPrefetchOptions& options) {
  GemvPrefetchResult result;
  if (!w.data || w.row_bytes <= 0 || options.rounds < 1) return result;
  const int64_t rows = std::min(w.rows, std::max<int64_t>(1, options.max_bytes / w.row_bytes));
  const WeightMatrix part = w.slice(0, rows);
  result.bytes = part.bytes();
  if (result.bytes < options.min_bytes) return result;

  // Any activation will do: the time does not depend on the values.
  std::vector<float> x(static_cast<size_t>(w.cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  QuantizedRows a;
  a.quantize(x.data(), 1, w.cols, w.cols, quant::traits(w.type).activation_type);
  std::vector<float> out(static_cast<size_t>(rows));

  timed_gemv_ms(part, a, out, false);
  std::vector<double> with_ms, without_ms;
  for (int round = 0; round < options.rounds; ++round) {
    // Alternate which goes first, so a drift of the machine's speed hits both alike.
    for (int k = 0; k < 2; ++k) {
      const bool prefetch = (round + k) % 2 == 0;
      (prefetch ? with_ms : without_ms).push_back(timed_gemv_ms(part, a, out, prefetch));
    }
  }
  result.measured = true;
  result.prefetch = prefetch_pays(with_ms, without_ms);
  result.best_with_ms = best(with_ms);
  result.best_without_ms = best(without_ms);
  return result;
}

}  // namespace strata::ops
