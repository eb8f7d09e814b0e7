#include "plan/expert_rates.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "model/blocks.h"
#include "plan/timing.h"
#include "quant/quant.h"
#include "util/profiler.h"

namespace strata::plan {
namespace {

// Prefill calibration: experts laid out, and tokens per expert at the two loads timed.
constexpr int64_t kPrefillExperts = 64;
constexpr int64_t kFewTokens = 8;
constexpr int64_t kManyTokens = 64;
// Inputs are N(0, 1 / cols), as after an RMS norm with weights ~1 / sqrt(cols): products with the
// N(0, 1) calibration weights come out O(1), as in a real layer. (With O(1) inputs the gate
// values reach hundreds, SwiGLU's exp overflows and takes a slow path: the gate+up phase read
// 15% slower than the model's.) The router is the identity, so the experts a token must choose
// get +1 on their inputs, far above the others (at most ~5 sigma = 0.11 for 2048 values).
constexpr float kRouteBoost = 1.0f;

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

// An MoE layer over the buffer's experts whose router is the identity on the first n_expert input
// values: a token goes to the experts whose inputs carry kRouteBoost.
struct ExpertLayer {
  std::vector<float> router;
  MoeFfnWeights weights;
  MoeParams params;
  int64_t gate_bytes = 0;  // one expert's gate (or up) slice
  int64_t down_bytes = 0;  // one expert's down slice
};

// One expert's gate, up and down slices.
int64_t bytes_per_expert(const ExpertBuffer& b) {
  return 2 * b.n_ff * quant::row_bytes(b.type, b.cols) + b.cols * quant::row_bytes(b.type, b.n_ff);
}

std::optional<ExpertLayer> lay_out(const ExpertBuffer& b, int64_t n_used) {
  const int64_t up_row_bytes = quant::row_bytes(b.type, b.cols);
  const int64_t down_row_bytes = quant::row_bytes(b.type, b.n_ff);
  ExpertLayer l;
  l.gate_bytes = b.n_ff * up_row_bytes;
  l.down_bytes = b.cols * down_row_bytes;
  const int64_t n_expert = std::min(b.cols, b.bytes / bytes_per_expert(b));
  if (n_expert < 2) return std::nullopt;
  l.router.assign(static_cast<size_t>(n_expert * b.cols), 0.0f);
  for (int64_t e = 0; e < n_expert; ++e) l.router[static_cast<size_t>(e * b.cols + e)] = 1.0f;
  MoeFfnWeights& w = l.weights;
  w.router = {GgmlType::F32, reinterpret_cast<const uint8_t*>(l.router.data()), b.cols, n_expert,
              b.cols * static_cast<int64_t>(sizeof(float))};
  w.gate_exps = {b.type, b.data, b.cols, n_expert * b.n_ff, up_row_bytes};
  w.up_exps = {b.type, b.data + n_expert * l.gate_bytes, b.cols, n_expert * b.n_ff, up_row_bytes};
  w.down_exps = {b.type, b.data + 2 * n_expert * l.gate_bytes, b.n_ff, n_expert * b.cols,
                 down_row_bytes};
  l.params.n_expert = n_expert;
  l.params.n_expert_used = std::clamp<int64_t>(n_used, 1, n_expert / 2);
  l.params.n_ff_exp = b.n_ff;
  return l;
}

std::vector<float> random_inputs(int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

struct PhaseSeconds {
  double gate_up = 0;
  double down = 0;
};

// Runs `call` (one moe_ffn_block of `tokens` tokens) in windows: each phase's seconds per call,
// less its small ops (median over the windows). When every window came out shorter than the small
// ops (their costs measured apart, on a busier moment: a loaded machine, or a late pool worker the
// phase did not wait for), the phase's whole time: an upper bound, where 0 would say nothing.
template <typename Call>
PhaseSeconds time_phases(const ExpertLayer& l, int64_t tokens, Call&& call,
                         const SerialCosts& serial, double window_seconds, int repeats) {
  const double hidden = static_cast<double>(tokens * l.params.n_expert_used * l.params.n_ff_exp);
  const double rows = static_cast<double>(tokens * l.params.n_expert_used);
  const double cols = static_cast<double>(l.weights.gate_exps.cols);
  const double gate_up_other_s = hidden * serial.swiglu_ns * 1e-9;
  const double down_other_s = (hidden * serial.quantize_ns + rows * cols * serial.axpy_ns) * 1e-9;

  ProfilerWindow profiling;
  call();  // warm-up (thread-local scratch buffers)
  std::vector<double> gate_up, down, gate_up_whole, down_whole;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    profile::reset();
    const double n = static_cast<double>(time_calls(call, window_seconds, 2).calls);
    const double gu_whole = phase_seconds("moe: experts gate+up") / n;
    const double d_whole = phase_seconds("moe: experts down + weighted sum") / n;
    gate_up_whole.push_back(gu_whole);
    down_whole.push_back(d_whole);
    // A phase shorter than its small ops: that window says nothing about the products.
    if (gu_whole > gate_up_other_s) gate_up.push_back(gu_whole - gate_up_other_s);
    if (d_whole > down_other_s) down.push_back(d_whole - down_other_s);
  }
  PhaseSeconds t;
  t.gate_up = median(gate_up.empty() ? gate_up_whole : gate_up);
  t.down = median(down.empty() ? down_whole : down);
  return t;
}

// One prompt batch of `tokens` tokens, each routed to k distinct random experts.
PhaseSeconds time_prefill(const ExpertLayer& l, int64_t tokens, int64_t cols, uint32_t seed,
                          const SerialCosts& serial, ThreadPool& pool, double window_seconds,
                          int repeats) {
  const int64_t n_expert = l.params.n_expert, k = l.params.n_expert_used;
  std::mt19937 rng(seed);
  std::vector<float> x = random_inputs(tokens, cols, rng);
  std::vector<int64_t> order(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t j = 0; j < k; ++j) {
      x[static_cast<size_t>(t * cols + order[static_cast<size_t>(j)])] += kRouteBoost;
    }
  }
  std::vector<float> out(static_cast<size_t>(tokens * cols));
  BlockWorkspace ws;
  auto batch = [&] { moe_ffn_block(l.weights, l.params, x.data(), tokens, out.data(), ws, pool); };
  return time_phases(l, tokens, batch, serial, window_seconds, repeats);
}

// The two parts of a phase's prefill cost from its time at two loads (tokens per expert lo < hi,
// every expert active): seconds per row from the slope, per active expert from the rest. Noise
// can make a part tiny or negative; keep both at least 5% of the whole.
ExpertPrefillCost split_prefill(double t_lo, double t_hi, double lo, double hi, double n_expert,
                                double slice_bytes, double macs_per_row) {
  if (t_lo <= 0 || t_hi <= 0) return {};
  const double per_row =
      std::max((t_hi - t_lo) / ((hi - lo) * n_expert), 0.05 * t_hi / (hi * n_expert));
  const double per_expert = std::max(t_lo / n_expert - lo * per_row, 0.05 * t_lo / n_expert);
  return {slice_bytes / per_expert / 1e9, macs_per_row / per_row / 1e9};
}

}  // namespace

ExpertPhaseRates measure_expert_decode_rates(const ExpertBuffer& experts, int64_t n_used,
                                             const SerialCosts& serial, ThreadPool& pool,
                                             double window_seconds, int repeats) {
  const std::optional<ExpertLayer> layer = lay_out(experts, n_used);
  if (!layer) return {};
  const ExpertLayer& l = *layer;
  const int64_t n_expert = l.params.n_expert, k = l.params.n_expert_used;
  std::mt19937 rng(23);
  std::vector<float> x = random_inputs(1, experts.cols, rng);
  std::vector<float> out(static_cast<size_t>(experts.cols));
  int64_t next = 0;
  BlockWorkspace ws;
  auto one_token = [&] {
    for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>((next + j) % n_expert)] += kRouteBoost;
    moe_ffn_block(l.weights, l.params, x.data(), 1, out.data(), ws, pool);
    for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>((next + j) % n_expert)] -= kRouteBoost;
    next = (next + k) % n_expert;
  };
  const PhaseSeconds t = time_phases(l, 1, one_token, serial, window_seconds, repeats);
  ExpertPhaseRates rates;
  if (t.gate_up > 0) rates.gate_up = static_cast<double>(2 * k * l.gate_bytes) / t.gate_up / 1e9;
  if (t.down > 0) rates.down = static_cast<double>(k * l.down_bytes) / t.down / 1e9;
  return rates;
}

ExpertPrefillRates measure_expert_prefill_rates(const ExpertBuffer& experts, int64_t n_used,
                                                const SerialCosts& serial, ThreadPool& pool,
                                                double window_seconds, int repeats) {
  // At most 64 experts (still far more bytes than the caches): 512 tokens give 64 per expert.
  ExpertBuffer some = experts;
  some.bytes = std::min(experts.bytes, kPrefillExperts * bytes_per_expert(experts));
  const std::optional<ExpertLayer> layer = lay_out(some, n_used);
  if (!layer) return {};
  const ExpertLayer& l = *layer;
  const int64_t n_expert = l.params.n_expert, k = l.params.n_expert_used;
  auto tokens_for = [&](int64_t per_expert) {
    return std::max<int64_t>(1, per_expert * n_expert / k);
  };
  const PhaseSeconds lo = time_prefill(l, tokens_for(kFewTokens), experts.cols, 29, serial, pool,
                                       window_seconds, repeats);
  const PhaseSeconds hi = time_prefill(l, tokens_for(kManyTokens), experts.cols, 31, serial, pool,
                                       window_seconds, repeats);
  const double ne = static_cast<double>(n_expert);
  const double lo_rows = static_cast<double>(tokens_for(kFewTokens) * k) / ne;
  const double hi_rows = static_cast<double>(tokens_for(kManyTokens) * k) / ne;
  const double macs = static_cast<double>(l.params.n_ff_exp * experts.cols);
  ExpertPrefillRates r;
  r.gate_up = split_prefill(lo.gate_up, hi.gate_up, lo_rows, hi_rows, ne,
                            static_cast<double>(2 * l.gate_bytes), 2 * macs);
  r.down = split_prefill(lo.down, hi.down, lo_rows, hi_rows, ne, static_cast<double>(l.down_bytes),
                         macs);
  return r;
}

}  // namespace strata::plan
