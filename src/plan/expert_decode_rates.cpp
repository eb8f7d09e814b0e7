#include "plan/expert_decode_rates.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>
#include <vector>

#include "model/blocks.h"
#include "quant/quant.h"
#include "util/profiler.h"

namespace strata::plan {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Seconds the profiler recorded under `name` since the last reset.
double phase_seconds(std::string_view name) {
  for (const auto& e : profile::snapshot()) {
    if (e.name == name) return e.seconds;
  }
  return 0;
}

// Turns the profiler on for the measurement, then clears what it recorded and restores its
// on/off state. (Commands calibrate before they load a model; a profiled run resets the profiler
// when it starts, so it never sees these numbers.)
class ProfilerWindow {
 public:
  ProfilerWindow() : was_enabled_(profile::enabled()) { profile::set_enabled(true); }
  ~ProfilerWindow() {
    profile::reset();
    profile::set_enabled(was_enabled_);
  }
  ProfilerWindow(const ProfilerWindow&) = delete;
  ProfilerWindow& operator=(const ProfilerWindow&) = delete;

 private:
  bool was_enabled_;
};

}  // namespace

ExpertDecodeRates measure_expert_decode_rates(const uint8_t* buffer, int64_t bytes, GgmlType type,
                                              int64_t cols, int64_t n_ff, int64_t n_used,
                                              const SerialCosts& serial, ThreadPool& pool,
                                              double window_seconds, int repeats) {
  const int64_t up_row_bytes = quant::row_bytes(type, cols);
  const int64_t down_row_bytes = quant::row_bytes(type, n_ff);
  const int64_t gate_bytes = n_ff * up_row_bytes, down_bytes = cols * down_row_bytes;
  // The router is the identity on the first n_expert input values, so at most `cols` experts.
  const int64_t n_expert = std::min(cols, bytes / (2 * gate_bytes + down_bytes));
  if (n_expert < 2) return {};
  const int64_t k = std::clamp<int64_t>(n_used, 1, n_expert / 2);

  MoeFfnWeights w;
  std::vector<float> router(static_cast<size_t>(n_expert * cols), 0.0f);
  for (int64_t e = 0; e < n_expert; ++e) router[static_cast<size_t>(e * cols + e)] = 1.0f;
  w.router = {GgmlType::F32, reinterpret_cast<const uint8_t*>(router.data()), cols, n_expert,
              cols * static_cast<int64_t>(sizeof(float))};
  w.gate_exps = {type, buffer, cols, n_expert * n_ff, up_row_bytes};
  w.up_exps = {type, buffer + n_expert * gate_bytes, cols, n_expert * n_ff, up_row_bytes};
  w.down_exps = {type, buffer + 2 * n_expert * gate_bytes, n_ff, n_expert * cols, down_row_bytes};
  MoeParams p;
  p.n_expert = n_expert;
  p.n_expert_used = k;
  p.n_ff_exp = n_ff;

  // A random token whose router logits put the next k experts (in turn) far ahead of the rest.
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols)), out(static_cast<size_t>(cols));
  for (auto& v : x) v = normal(rng);
  int64_t next = 0;
  auto one_token = [&] {
    for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>((next + j) % n_expert)] += 100.0f;
    moe_ffn_block(w, p, x.data(), 1, out.data(), pool);
    for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>((next + j) % n_expert)] -= 100.0f;
    next = (next + k) % n_expert;
  };

  // The small ops inside each phase: SwiGLU in gate+up; the hidden rows' quantization and the
  // weighted sum in down (values x measured ns). The dispatch stays in the rate.
  const double hidden = static_cast<double>(k * n_ff);
  const double gate_up_other_s = hidden * serial.swiglu_ns * 1e-9;
  const double down_other_s =
      (hidden * serial.quantize_ns + static_cast<double>(k * cols) * serial.axpy_ns) * 1e-9;
  const double gate_up_bytes = static_cast<double>(2 * k * gate_bytes);
  const double down_bytes_per_token = static_cast<double>(k * down_bytes);

  ProfilerWindow profiling;
  for (int i = 0; i < 3; ++i) one_token();  // warm-up (thread-local scratch buffers)
  std::vector<double> gate_up, down;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    profile::reset();
    int64_t calls = 0;
    const auto start = Clock::now();
    while (calls < 3 ||
           std::chrono::duration<double>(Clock::now() - start).count() < window_seconds) {
      one_token();
      ++calls;
    }
    const double n = static_cast<double>(calls);
    const double gu_s = phase_seconds("moe: experts gate+up") / n - gate_up_other_s;
    const double d_s = phase_seconds("moe: experts down + weighted sum") / n - down_other_s;
    // A phase can only come out shorter than its small ops on a clock hiccup; skip that window.
    if (gu_s > 0) gate_up.push_back(gate_up_bytes / gu_s / 1e9);
    if (d_s > 0) down.push_back(down_bytes_per_token / d_s / 1e9);
  }
  ExpertDecodeRates rates;
  if (!gate_up.empty()) rates.gate_up_gbps = median(gate_up);
  if (!down.empty()) rates.down_gbps = median(down);
  return rates;
}

}  // namespace strata::plan
