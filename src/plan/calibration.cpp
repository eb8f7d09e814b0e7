#include "plan/calibration.h"

#include "plan/hardware.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/compact_tiles.h"
#include "ops/gated_delta_net.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "plan/expert_rates.h"
#include "plan/timing.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/log.h"
#include "util/system_load.h"
#include "util/thread_pool.h"

namespace strata::plan {
namespace {

// A calibration older than this is measured again (a BIOS, kernel or memory change since).
constexpr int kCalibrationMaxAgeDays = 30;
constexpr int64_t kCols = 2048;     // row length of the GEMV and dense GEMM matrices
constexpr int64_t kTileRows = 61;   // quantized rows tiled over the buffer (a prime: pages differ)
constexpr int64_t kGemmRows = 256;  // activation rows of the dense prefill GEMM
constexpr int64_t kExpertRows = 768;  // expert-shaped matrix: 768 x 2048
constexpr int64_t kExpertsUsed = 8;   // experts per token in decode
constexpr int64_t kSmallGemvBytes = int64_t{1} << 20;

// Median of `repeats` measurements of seconds_per_call: decode rates and the per-dispatch cost
// (a difference of two timings) moved by 50% between single-window runs on a shared VM; the
// median of short windows spread over a second does not.
template <typename Fn>
double median_seconds_per_call(Fn&& fn, double window, int min_calls, int repeats = 5) {
  std::vector<double> v;
  for (int i = 0; i < repeats; ++i) v.push_back(seconds_per_call(fn, window, min_calls));
  return median(std::move(v));
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer allocate(int64_t bytes) {
  void* raw = nullptr;
  STRATA_CHECK(::posix_memalign(&raw, 4096, static_cast<size_t>(bytes)) == 0,
               "calibration: cannot allocate {} bytes", bytes);
  // Model weights are mmap-ed file pages (4 KiB pages); keep the TLB behaviour the same.
  ::madvise(raw, static_cast<size_t>(bytes), MADV_NOHUGEPAGE);
  return Buffer(static_cast<uint8_t*>(raw));
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Fills `bytes` of `buffer` with rows of `type` (kCols values each): kTileRows rows quantized from
// random values, repeated. Returns the number of whole rows.
int64_t fill_rows(uint8_t* buffer, int64_t bytes, GgmlType type) {
  const quant::TypeTraits& t = quant::traits(type);
  const int64_t row_bytes = quant::row_bytes(type, kCols);
  const std::vector<float> values = random_floats(kTileRows * kCols, 7);
  std::vector<uint8_t> tile(static_cast<size_t>(kTileRows * row_bytes));
  for (int64_t r = 0; r < kTileRows; ++r) {
    t.kernels.quantize_row(values.data() + r * kCols, tile.data() + r * row_bytes, kCols);
  }
  const int64_t rows = bytes / row_bytes;
  for (int64_t r = 0; r < rows; r += kTileRows) {
    const int64_t n = std::min(kTileRows, rows - r);
    std::memcpy(buffer + r * row_bytes, tile.data(), static_cast<size_t>(n * row_bytes));
  }
  return rows;
}

ops::QuantizedRows activations(GgmlType weight_type, int64_t rows, int64_t cols) {
  const std::vector<float> x = random_floats(rows * cols, 11);
  ops::QuantizedRows a;
  a.quantize(x.data(), rows, cols, cols, quant::traits(weight_type).activation_type);
  return a;
}

struct StreamResult {
  double gemv_gbps = 0;
  double gemv_fixed_us = 0;
};

// Decode: one activation row against the whole buffer, then (optionally) ~1 MiB matrices taken
// one after another from the buffer, each read cold.
StreamResult measure_gemv(uint8_t* buffer, int64_t rows, GgmlType type, ThreadPool& pool,
                          bool small_matrices, double window, int repeats, bool compact = false) {
  const int64_t row_bytes = quant::row_bytes(type, kCols);
  ops::WeightMatrix w{type, buffer, kCols, rows, row_bytes};
  w.compact = compact;
  const ops::QuantizedRows a = activations(type, 1, kCols);
  std::vector<float> out(static_cast<size_t>(rows));
  ops::matmul(w, a, out.data(), rows, pool, {});  // warm-up
  StreamResult r;
  r.gemv_gbps = static_cast<double>(w.bytes()) /
                median_seconds_per_call([&] { ops::matmul(w, a, out.data(), rows, pool, {}); },
                                        window, 3, repeats) /
                1e9;
  if (!small_matrices) return r;
  const int64_t small_rows = std::max<int64_t>(1, kSmallGemvBytes / row_bytes);
  const int64_t n_small = std::max<int64_t>(1, rows / small_rows);
  int64_t next = 0;
  const double per_call = median_seconds_per_call(
      [&] {
        ops::matmul(w.slice(next * small_rows, std::min(small_rows, rows)), a, out.data(),
                    small_rows, pool, {});
        next = (next + 1) % n_small;
      },
      window, 20, repeats);
  const double stream_s = static_cast<double>(small_rows * row_bytes) / (r.gemv_gbps * 1e9);
  r.gemv_fixed_us = std::max(0.0, (per_call - stream_s) * 1e6);
  return r;
}

// Prefill of a dense matrix: kGemmRows activation rows against kCols x kCols slices taken one
// after another from the buffer (weights come from RAM, as a layer's do). Multiply-accumulates
// per second / 1e9. (Routed experts are measured through the MoE block: expert_rates.h.)
double measure_dense_gemm(uint8_t* buffer, int64_t buffer_bytes, GgmlType type, ThreadPool& pool,
                          double window, bool compact = false) {
  const int64_t row_bytes = quant::row_bytes(type, kCols);
  const int64_t rows_in_buffer = buffer_bytes / row_bytes;
  STRATA_CHECK(rows_in_buffer >= kCols, "calibration buffer too small");
  const ops::QuantizedRows a = activations(type, kGemmRows, kCols);
  std::vector<float> out(static_cast<size_t>(kGemmRows * kCols));
  int64_t next = 0;
  auto one = [&] {
    if (next + kCols > rows_in_buffer) next = 0;
    ops::WeightMatrix w{type, buffer + next * row_bytes, kCols, kCols, row_bytes};
    w.compact = compact;
    next += kCols;
    ops::matmul(w, a, out.data(), kCols, pool, {});
  };
  one();  // warm-up
  const double macs = static_cast<double>(kCols) * kCols * kGemmRows;
  return macs / seconds_per_call(one, window, 2) / 1e9;
}

double measure_dispatch_us(ThreadPool& pool, double window) {
  const int64_t tasks = pool.size();
  std::atomic<int64_t> sink{0};
  const ThreadPool::TaskFn fn = [&](int64_t t, int) {
    sink.fetch_add(t, std::memory_order_relaxed);
  };
  for (int i = 0; i < 100; ++i) pool.run(tasks, fn);
  return seconds_per_call([&] { pool.run(tasks, fn); }, window, 1000) * 1e6;
}

// The small single-threaded ops over 2048 values on the calling thread, ns per value each.
SerialCosts measure_serial_ns(double window) {
  const int64_t n = kCols;
  std::vector<float> x = random_floats(n, 3), y = random_floats(n, 5), w = random_floats(n, 9);
  std::vector<uint8_t> q(static_cast<size_t>(quant::row_bytes(GgmlType::Q8_K, n)));
  const quant::QuantizeRowFn quantize = quant::traits(GgmlType::Q8_K).kernels.quantize_row;
  std::vector<float> out(static_cast<size_t>(n));
  const ops::Rope rope(ops::RopeStyle::neox, 128, 128, 1e6f);
  int64_t pos = 0;
  auto time_ns = [&](auto&& op) {
    for (int i = 0; i < 20; ++i) op();
    return seconds_per_call(op, window, 200) * 1e9 / static_cast<double>(n);
  };
  SerialCosts c;
  c.norm_ns = time_ns([&] { ops::rms_norm(x.data(), w.data(), out.data(), n, 1e-6f); });
  c.quantize_ns = time_ns([&] { quantize(x.data(), q.data(), n); });
  c.swiglu_ns = time_ns([&] { ops::swiglu(x.data(), y.data(), out.data(), n); });
  c.axpy_ns = time_ns([&] { ops::axpy(0.5f, x.data(), out.data(), n); });
  c.rope_ns = time_ns([&] {
    std::copy(x.begin(), x.end(), out.begin());
    rope.apply_heads(out.data(), n / 128, pos);
    pos = (pos + 37) % 4096;
  });
  return c;
}

// Attention cost per position and element of the head: once per KV head (decoding K and V) and
// once per query head (scores and weighted values).
struct AttentionCost {
  double kv_ns = 0;
  double head_ns = 0;
};

// From the times per unit of work with 1 and with `group` query heads per KV head,
// t(g) = kv + g x head. Noise can make a part tiny or negative; keep both positive.
AttentionCost split_attention(double t1, double tg, int64_t group) {
  AttentionCost c;
  c.head_ns = std::max((tg - t1) / static_cast<double>(group - 1), 0.05 * tg / group);
  c.kv_ns = std::max(t1 - c.head_ns, 0.05 * t1);
  return c;
}

// Attention of a 512-token prompt over itself, on one thread, in Qwen3-30B-A3B's geometry (f16
// cache, 4 KV heads interleaved per position, head_dim 128), with 8 and with 1 query heads per KV
// head: token t over t + 1 positions, either alone (ops::attend_group, as decode runs it) or in
// blocks of consecutive tokens that share each decoded chunk (ops::attend_block, as prefill runs
// it; the model's blocks are up to 16 tokens). Returns {decode, prefill}.
std::pair<AttentionCost, AttentionCost> measure_attention_ns() {
  constexpr int64_t kTokens = 512, kKvHeads = 4, kDim = 128, kGroup = 8, kBlock = 16;
  const int64_t row_bytes = quant::row_bytes(GgmlType::F16, kDim);
  const int64_t bytes = kTokens * kKvHeads * row_bytes;
  std::vector<uint8_t> k(static_cast<size_t>(bytes)), v(static_cast<size_t>(bytes));
  const std::vector<float> values = random_floats(kTokens * kKvHeads * kDim, 13);
  const quant::QuantizeRowFn to_f16 = quant::traits(GgmlType::F16).kernels.quantize_row;
  for (int64_t r = 0; r < kTokens * kKvHeads; ++r) {
    to_f16(values.data() + r * kDim, k.data() + r * row_bytes, kDim);
    to_f16(values.data() + r * kDim, v.data() + r * row_bytes, kDim);
  }
  ops::KvLayerView view;
  view.type = GgmlType::F16;
  view.k = k.data();
  view.v = v.data();
  view.n_kv_heads = kKvHeads;
  view.head_dim = kDim;
  view.head_row_bytes = row_bytes;
  // Every token's query heads; token t sees t + 1 positions.
  const std::vector<float> q = random_floats(kBlock * kGroup * kDim, 17);
  std::vector<float> out(static_cast<size_t>(kBlock * kGroup * kDim));
  std::vector<int64_t> positions(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) positions[static_cast<size_t>(t)] = t + 1;
  const double work = kKvHeads * (kTokens * (kTokens + 1) / 2.0) * kDim;
  auto per_token = [&](int64_t g) {
    for (int64_t h = 0; h < kKvHeads; ++h)
      ops::attend_group(view, h, q.data(), g, kTokens, 0.088f, out.data());  // warm-up
    const auto start = CalibrationClock::now();
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int64_t h = 0; h < kKvHeads; ++h)
        ops::attend_group(view, h, q.data(), g, t + 1, 0.088f, out.data());
    }
    return seconds_since(start) * 1e9 / work;
  };
  auto blocked = [&](int64_t g) {
    const int64_t q_stride = g * kDim;
    const auto start = CalibrationClock::now();
    for (int64_t t = 0; t < kTokens; t += kBlock) {
      for (int64_t h = 0; h < kKvHeads; ++h)
        ops::attend_block(view, h, q.data(), q_stride, g, kBlock,
                          &positions[static_cast<size_t>(t)], 0.088f, out.data(), q_stride);
    }
    return seconds_since(start) * 1e9 / work;
  };
  const AttentionCost decode = split_attention(per_token(1), per_token(kGroup), kGroup);
  const AttentionCost prefill = split_attention(blocked(1), blocked(kGroup), kGroup);
  return {decode, prefill};
}

// Gated DeltaNet on one thread, laid out as a prompt batch of Qwen3.5-35B-A3B's recurrent layer
// is: 512 tokens, each a row of q (16 heads of 128), k (16) and v (32 heads of 128) values.
//   conv_ns        ops::causal_conv1d_silu over every channel of the rows, per token and channel;
//   delta_rule_ns  ops::delta_rule_sequential for each value head over the tokens (its state in
//                  cache, its q/k/v read from the strided rows), per state value per token.
std::pair<double, double> measure_gated_delta_net_ns(double window) {
  constexpr int64_t kTokens = 512, kDim = 128, kKHeads = 16, kVHeads = 32, kKernel = 4;
  constexpr int64_t kQOff = 0, kKOff = kKHeads * kDim, kVOff = 2 * kKHeads * kDim;
  constexpr int64_t kChannels = kVOff + kVHeads * kDim;
  const std::vector<float> x = random_floats(kTokens * kChannels, 19);
  const std::vector<float> weight = random_floats(kKernel * kChannels, 23);
  std::vector<float> mixed(x.size()), conv_state(static_cast<size_t>((kKernel - 1) * kChannels));
  auto conv = [&] {
    ops::causal_conv1d_silu(x.data(), mixed.data(), kChannels, kTokens, 0, kChannels, weight.data(),
                            kKernel, kChannels, conv_state.data());
  };
  conv();  // warm-up, and the delta rule's inputs
  const double conv_ns =
      seconds_per_call(conv, window, 2) * 1e9 / static_cast<double>(kTokens * kChannels);
  // The model feeds L2-normalized q and k (q also scaled by 1 / sqrt(d_k)): keep the state bounded.
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t h = 0; h < kKHeads; ++h) {
      float* row = mixed.data() + t * kChannels;
      ops::l2_norm(row + kQOff + h * kDim, kDim, 1e-6f, 1.0f / std::sqrt(static_cast<float>(kDim)));
      ops::l2_norm(row + kKOff + h * kDim, kDim, 1e-6f);
    }
  }
  const std::vector<float> beta(static_cast<size_t>(kTokens * kVHeads), 0.5f),
      g(static_cast<size_t>(kTokens * kVHeads), -0.1f);
  std::vector<float> state(static_cast<size_t>(kVHeads * kDim * kDim), 0.0f);
  std::vector<float> out(static_cast<size_t>(kTokens * kVHeads * kDim));
  auto all_heads = [&] {
    for (int64_t h = 0; h < kVHeads; ++h) {
      const int64_t kh = h % kKHeads;
      ops::DeltaRuleRun run;
      run.q = mixed.data() + kQOff + kh * kDim;
      run.k = mixed.data() + kKOff + kh * kDim;
      run.v = mixed.data() + kVOff + h * kDim;
      run.qk_stride = run.v_stride = kChannels;
      run.beta = beta.data() + h;
      run.g = g.data() + h;
      run.gate_stride = kVHeads;
      run.out = out.data() + h * kDim;
      run.out_stride = kVHeads * kDim;
      run.n_tokens = kTokens;
      ops::delta_rule_sequential(state.data() + h * kDim * kDim, run, kDim, kDim);
    }
  };
  all_heads();  // warm-up
  const double delta_ns = seconds_per_call(all_heads, window, 2) * 1e9 /
                          static_cast<double>(kVHeads * kTokens * kDim * kDim);
  return {conv_ns, delta_ns};
}

CpuCalibration from_json(const nlohmann::json& j) {
  CpuCalibration c;
  c.cpu_model = j.at("cpu_model").get<std::string>();
  c.threads = j.at("threads").get<int>();
  c.date = j.at("date").get<std::string>();
  c.build = j.at("build").get<std::string>();
  c.isa = j.at("isa").get<std::string>();
  c.others_cpus = j.at("load").at("others_cpus").get<double>();
  c.steal_fraction = j.at("load").at("steal_fraction").get<double>();
  c.round_spread = j.at("load").value("round_spread", 0.0);  // not recorded before version 12
  c.dispatch_us = j.at("dispatch_us").get<double>();
  c.gemv_fixed_us = j.at("gemv_fixed_us").get<double>();
  const auto& serial = j.at("serial_ns");
  c.serial.norm_ns = serial.at("norm").get<double>();
  c.serial.quantize_ns = serial.at("quantize").get<double>();
  c.serial.swiglu_ns = serial.at("swiglu").get<double>();
  c.serial.axpy_ns = serial.at("axpy").get<double>();
  c.serial.rope_ns = serial.at("rope").get<double>();
  c.attention_kv_ns = j.at("attention_kv_ns").get<double>();
  c.attention_head_ns = j.at("attention_head_ns").get<double>();
  c.attention_block_kv_ns = j.at("attention_block_kv_ns").get<double>();
  c.attention_block_head_ns = j.at("attention_block_head_ns").get<double>();
  c.delta_rule_ns = j.at("delta_rule_ns").get<double>();
  c.gdn_conv_ns = j.at("gdn_conv_ns").get<double>();
  for (const auto& [name, v] : j.at("types").items()) {
    const auto type = ggml_type_from_name(name);
    if (!type) continue;
    c.types.push_back(
        {*type, v.at("gemv_gbps").get<double>(), v.at("gemm_gmacs").get<double>(),
         v.at("expert_gemm_gmacs").get<double>(), v.at("expert_down_gemm_gmacs").get<double>(),
         v.at("expert_gemv_gbps").get<double>(), v.at("expert_down_gemv_gbps").get<double>(),
         v.at("expert_gemm_gbps").get<double>(), v.at("expert_down_gemm_gbps").get<double>()});
  }
  return c;
}

// One round of one weight type's rates (and the per-dispatch cost when `fixed_us` is given). Over
// `rounds` rounds a decode rate gets 3 windows a round of 1/rounds of the window (3 windows' time
// in all, in 9 pieces), a prefill rate one window a round of 1.5/rounds of it.
TypeCalibration measure_type(uint8_t* buffer, int64_t bytes, GgmlType type,
                             const SerialCosts& serial, ThreadPool& pool, double window, int rounds,
                             double* fixed_us) {
  constexpr int kDecodeRepeats = 3;
  const double decode_window = window / rounds, prefill_window = 1.5 * window / rounds;
  const int64_t rows = fill_rows(buffer, bytes, type);
  const StreamResult s =
      measure_gemv(buffer, rows, type, pool, fixed_us != nullptr, decode_window, kDecodeRepeats);
  if (fixed_us) *fixed_us = s.gemv_fixed_us;
  TypeCalibration t;
  t.type = type;
  t.gemv_gbps = s.gemv_gbps;
  const int64_t used = rows * quant::row_bytes(type, kCols);
  // Experts in the same bytes (blocks are self-contained, so they also read as rows of 768).
  const ExpertBuffer experts{buffer, used, type, kCols, kExpertRows};
  const ExpertPhaseRates decode = measure_expert_decode_rates(experts, kExpertsUsed, serial, pool,
                                                              decode_window, kDecodeRepeats);
  t.expert_gemv_gbps = decode.gate_up;
  t.expert_down_gemv_gbps = decode.down;
  t.gemm_gmacs = measure_dense_gemm(buffer, used, type, pool, prefill_window);
  const ExpertPrefillRates prefill =
      measure_expert_prefill_rates(experts, kExpertsUsed, serial, pool, prefill_window, 1);
  // Too few experts of this type fit the buffer (F32, or a small test buffer): the dense MAC
  // rate, and no per-expert part.
  t.expert_gemm_gmacs = prefill.gate_up.gmacs > 0 ? prefill.gate_up.gmacs : t.gemm_gmacs;
  t.expert_down_gemm_gmacs = prefill.down.gmacs > 0 ? prefill.down.gmacs : t.gemm_gmacs;
  t.expert_gemm_gbps = prefill.gate_up.gbps;
  t.expert_down_gemm_gbps = prefill.down.gbps;
  return t;
}

// Every rate of a weight type, for taking medians and comparing rounds.
constexpr double TypeCalibration::*kRates[] = {
    &TypeCalibration::gemv_gbps,         &TypeCalibration::gemm_gmacs,
    &TypeCalibration::expert_gemm_gmacs, &TypeCalibration::expert_down_gemm_gmacs,
    &TypeCalibration::expert_gemv_gbps,  &TypeCalibration::expert_down_gemv_gbps,
    &TypeCalibration::expert_gemm_gbps,  &TypeCalibration::expert_down_gemm_gbps};

// Each rate's median over the rounds of one type.
TypeCalibration median_rates(const std::vector<TypeCalibration>& rounds) {
  TypeCalibration t = rounds.front();
  for (auto rate : kRates) {
    std::vector<double> v;
    for (const auto& r : rounds) v.push_back(r.*rate);
    t.*rate = median(std::move(v));
  }
  return t;
}

std::vector<GgmlType> with_f32(std::vector<GgmlType> types) {
  types.push_back(GgmlType::F32);  // routers
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  std::erase_if(types, [](GgmlType t) { return !quant::is_supported(t); });
  return types;
}

}  // namespace

std::string today_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

int days_since(const std::string& date) {
  std::tm tm{};
  if (::strptime(date.c_str(), "%Y-%m-%d", &tm) == nullptr) return 1 << 20;  // unreadable: stale
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  const std::time_t then = std::mktime(&tm);
  return static_cast<int>(std::difftime(std::time(nullptr), then) / 86400);
}

nlohmann::json calibration_json(const CpuCalibration& c) {
  nlohmann::json types = nlohmann::json::object();
  for (const auto& t : c.types) {
    types[std::string(ggml_type_name(t.type))] = {
        {"gemv_gbps", t.gemv_gbps},
        {"gemm_gmacs", t.gemm_gmacs},
        {"expert_gemm_gmacs", t.expert_gemm_gmacs},
        {"expert_down_gemm_gmacs", t.expert_down_gemm_gmacs},
        {"expert_gemv_gbps", t.expert_gemv_gbps},
        {"expert_down_gemv_gbps", t.expert_down_gemv_gbps},
        {"expert_gemm_gbps", t.expert_gemm_gbps},
        {"expert_down_gemm_gbps", t.expert_down_gemm_gbps}};
  }
  return {{"version", kCalibrationVersion},
          {"cpu_model", c.cpu_model},
          {"threads", c.threads},
          {"date", c.date},
          {"build", c.build},
          {"isa", c.isa},
          {"load",
           {{"others_cpus", c.others_cpus},
            {"steal_fraction", c.steal_fraction},
            {"round_spread", c.round_spread}}},
          {"dispatch_us", c.dispatch_us},
          {"gemv_fixed_us", c.gemv_fixed_us},
          {"serial_ns",
           {{"norm", c.serial.norm_ns},
            {"quantize", c.serial.quantize_ns},
            {"swiglu", c.serial.swiglu_ns},
            {"axpy", c.serial.axpy_ns},
            {"rope", c.serial.rope_ns}}},
          {"attention_kv_ns", c.attention_kv_ns},
          {"attention_head_ns", c.attention_head_ns},
          {"attention_block_kv_ns", c.attention_block_kv_ns},
          {"attention_block_head_ns", c.attention_block_head_ns},
          {"delta_rule_ns", c.delta_rule_ns},
          {"gdn_conv_ns", c.gdn_conv_ns},
          {"types", types}};
}

const TypeCalibration* CpuCalibration::find(GgmlType type) const {
  for (const auto& t : types) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

std::string build_identity() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "unknown";
  struct stat st {};
  if (::stat(exe.c_str(), &st) != 0) return exe.string();
  return fmt::format("{} {} {}", exe.string(), static_cast<int64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtime));
}

GgmlType type_for_bits_per_weight(double bpw) {
  const std::pair<GgmlType, double> types[] = {{GgmlType::Q2_K, 2.625},  {GgmlType::Q3_K, 3.4375},
                                               {GgmlType::IQ4_XS, 4.25}, {GgmlType::Q4_K, 4.5},
                                               {GgmlType::Q5_K, 5.5},    {GgmlType::Q6_K, 6.5625},
                                               {GgmlType::Q8_0, 8.5}};
  GgmlType best = GgmlType::Q4_K;
  double best_d = 1e9;
  for (const auto& [t, b] : types) {
    if (std::abs(b - bpw) < best_d) {
      best_d = std::abs(b - bpw);
      best = t;
    }
  }
  return best;
}

double round_spread(const std::vector<std::vector<TypeCalibration>>& by_type) {
  // Each round's speed: the median, over every measured rate of every type, of the rate relative
  // to that rate's median over the rounds. A round the whole machine ran slow in is slow in most
  // rates; noise in a few rates moves no median.
  std::vector<std::vector<double>> log_ratios;
  for (const auto& rounds : by_type) {
    if (rounds.size() > log_ratios.size()) log_ratios.resize(rounds.size());
    for (auto rate : kRates) {
      std::vector<double> v;
      for (const auto& r : rounds) v.push_back(r.*rate);
      const double mid = median(v);
      if (!(mid > 0)) continue;
      for (size_t i = 0; i < rounds.size(); ++i) {
        if (v[i] > 0) log_ratios[i].push_back(std::log(v[i] / mid));
      }
    }
  }
  std::vector<double> speeds;
  for (const auto& r : log_ratios) {
    if (!r.empty()) speeds.push_back(median(r));
  }
  if (speeds.empty()) return 0;
  const auto [slowest, fastest] = std::minmax_element(speeds.begin(), speeds.end());
  return std::exp(*fastest - *slowest) - 1;
}

std::string describe_load(const CpuCalibration& c) {
  return fmt::format(
      "other programs used {:.1f} CPUs (steal {:.0f}%) and its rounds differed by "
      "{:.0f}%",
      c.others_cpus, 100 * c.steal_fraction, 100 * c.round_spread);
}

CpuCalibration calibrate_cpu(const CalibrationOptions& options) {
  STRATA_CHECK(options.threads > 0 && options.threads <= 4096,
               "calibration: expected 1..4096 threads, found {}", options.threads);
  const auto start = CalibrationClock::now();
  const CpuTimeSample before = sample_cpu_time();
  CpuCalibration c;
  c.isa = std::string(quant::isa_name(quant::best_isa()));
  c.threads = options.threads;
  c.date = today_date();
  c.build = build_identity();
  c.source = "measured " + c.date;
  ThreadPool pool(options.threads);
  const double window = options.window_seconds;
  c.dispatch_us = measure_dispatch_us(pool, 0.2 * window);
  c.serial = measure_serial_ns(0.1 * window);
  const auto [attention_decode, attention_prefill] = measure_attention_ns();
  c.attention_kv_ns = attention_decode.kv_ns;
  c.attention_head_ns = attention_decode.head_ns;
  c.attention_block_kv_ns = attention_prefill.kv_ns;
  c.attention_block_head_ns = attention_prefill.head_ns;
  std::tie(c.gdn_conv_ns, c.delta_rule_ns) = measure_gated_delta_net_ns(0.2 * window);

  const std::vector<GgmlType> types = with_f32(options.types);
  // At least one 2048 x 2048 f32 matrix (the dense GEMM shape).
  const int64_t bytes = std::max<int64_t>(options.stream_bytes, kCols * kCols * 4);
  Buffer buffer = allocate(bytes);
  // The per-dispatch overhead on the first quantized type (it does not depend on the type).
  const size_t fixed_index = types.size() == 1 ? 0 : (types[0] == GgmlType::F32 ? 1 : 0);
  // Interleaved rounds: a load that comes and goes slows one round of every type rather than
  // every window of one type, so the rounds disagree and the median skips it.
  const int rounds = std::max(1, options.rounds);
  std::vector<std::vector<TypeCalibration>> by_type(types.size());
  std::vector<double> fixed_us;
  for (int round = 0; round < rounds; ++round) {
    if (options.on_round) options.on_round(round);
    for (size_t i = 0; i < types.size(); ++i) {
      double fixed = 0;
      by_type[i].push_back(measure_type(buffer.get(), bytes, types[i], c.serial, pool,
                                        options.window_seconds, rounds,
                                        i == fixed_index ? &fixed : nullptr));
      if (i == fixed_index) fixed_us.push_back(fixed);
    }
  }
  c.gemv_fixed_us = median(fixed_us);
  for (const auto& type_rounds : by_type) c.types.push_back(median_rates(type_rounds));
  c.round_spread = round_spread(by_type);
  c.seconds = seconds_since(start);
  const SystemLoad load = load_between(before, sample_cpu_time());
  c.others_cpus = load.others_cpus;
  c.steal_fraction = load.steal_fraction;
  c.under_load = load.busy() || c.round_spread > kMaxRoundSpread;
  if (c.under_load) c.source += " while " + describe_load(c);
  return c;
}

ComputeRoofs measure_compute_roofs(GgmlType type, int threads, double window_seconds,
                                   bool compact) {
  STRATA_CHECK(threads > 0 && threads <= 4096, "compute roofs: expected 1..4096 threads, found {}",
               threads);
  ThreadPool pool(threads);
  ComputeRoofs r;
  r.type = type;
  const int64_t row_bytes = quant::row_bytes(type, kCols);
  // Decode: a quarter MiB of rows per thread stays in each core's L2 call after call.
  // (Whole compact tiles: a multiple of ops::kCompactTileRows rows.)
  const int64_t gemv_rows = std::max<int64_t>(threads * (int64_t{256} << 10) / row_bytes, 64) /
                            ops::kCompactTileRows * ops::kCompactTileRows;
  // Prefill: one 2048 x 2048 matrix multiplied again and again (the caches hold it; 256
  // activation rows reuse every weight block 256 times anyway).
  const int64_t rows = std::max(gemv_rows, kCols);
  const int64_t bytes = rows * row_bytes;
  Buffer buffer = allocate(bytes);
  fill_rows(buffer.get(), bytes, type);
  if (compact) {
    ops::WeightMatrix all{type, buffer.get(), kCols, rows, row_bytes};
    r.compact = ops::CompactTiles().convert(all, ops::kCompactTileRows);
  }
  r.gemv_gbps =
      measure_gemv(buffer.get(), gemv_rows, type, pool, false, window_seconds, 5, r.compact)
          .gemv_gbps;
  r.gemm_gmacs =
      measure_dense_gemm(buffer.get(), kCols * row_bytes, type, pool, window_seconds, r.compact);
  return r;
}

bool load_check_enabled() {
  const char* check = std::getenv("STRATA_CALIBRATION_LOAD_CHECK");
  return !(check && std::string(check) == "off");
}

bool measurements_cacheable(bool under_load, const std::string& what, const std::string& load) {
  if (!under_load || !load_check_enabled()) return true;
  log::warn(
      "{} ran while {}: the numbers are used for this run only and not cached; strata measures "
      "again next time (STRATA_CALIBRATION_LOAD_CHECK=off caches them anyway)",
      what, load);
  return false;
}

CpuCalibration cached_cpu_calibration(const std::string& cache_path, const std::string& cpu_model,
                                      const CalibrationOptions& options, bool remeasure) {
  nlohmann::json cache = read_hardware_cache(cache_path);
  const std::string build = build_identity();
  const std::string isa(quant::isa_name(quant::best_isa()));
  nlohmann::json& entries = cache["cpu_calibrations"];
  if (!entries.is_array()) entries = nlohmann::json::array();
  auto matches = [&](const nlohmann::json& e) {
    return e.is_object() && e.value("version", 0) == kCalibrationVersion &&
           e.value("cpu_model", "") == cpu_model && e.value("threads", 0) == options.threads &&
           e.value("build", "") == build && e.value("isa", "") == isa &&
           days_since(e.value("date", "")) <= kCalibrationMaxAgeDays;
  };
  const std::vector<GgmlType> wanted = with_f32(options.types);
  std::optional<CpuCalibration> cached;
  if (!remeasure) {
    for (const auto& e : entries) {
      if (!matches(e)) continue;
      try {
        cached = from_json(e);
      } catch (const std::exception& ex) {
        log::warn("ignoring an unreadable calibration in {}: {}", cache_path, ex.what());
      }
      break;
    }
  }
  CpuCalibration result;
  if (cached) {
    std::vector<GgmlType> missing;
    for (GgmlType t : wanted) {
      if (!cached->find(t)) missing.push_back(t);
    }
    if (missing.empty()) {
      cached->source = fmt::format(
          "cached, measured {} with {} kernels, {} threads, other programs at {:.1f} CPUs, "
          "rounds within {:.0f}%",
          cached->date, cached->isa, cached->threads, cached->others_cpus,
          100 * cached->round_spread);
      return *cached;
    }
    CalibrationOptions more = options;
    more.types = missing;
    log::info("calibrating the CPU cost model for {} more weight type(s), {} threads",
              missing.size(), options.threads);
    const CpuCalibration extra = calibrate_cpu(more);
    result = *cached;
    for (const auto& t : extra.types) {
      if (!result.find(t.type)) result.types.push_back(t);
    }
    result.seconds = extra.seconds;
    result.source = "cached, measured " + result.date + " (types added " + extra.date + ")";
    result.under_load = extra.under_load;
    result.others_cpus = std::max(result.others_cpus, extra.others_cpus);
    result.steal_fraction = std::max(result.steal_fraction, extra.steal_fraction);
    result.round_spread = std::max(result.round_spread, extra.round_spread);
    if (extra.under_load) result.source = extra.source;
  } else {
    log::info("calibrating the CPU cost model with {} threads (micro-benchmarks, a few seconds)",
              options.threads);
    result = calibrate_cpu(options);
  }
  result.cpu_model = cpu_model;
  if (!measurements_cacheable(result.under_load, "the CPU calibration", describe_load(result))) {
    result.source += " (not cached)";
    return result;
  }
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& e : entries) {
    if (e.is_object() &&
        !(e.value("cpu_model", "") == cpu_model && e.value("threads", 0) == options.threads))
      kept.push_back(e);
  }
  kept.push_back(calibration_json(result));
  update_hardware_cache(cache_path, [&](nlohmann::json& j) { j["cpu_calibrations"] = kept; });
  return result;
}

}  // namespace strata::plan
