#pragma once
// Calibration of the CPU cost model on this machine: short micro-benchmarks of strata's own
// kernels (ops::matmul, attention, the small per-token ops) and of the ThreadPool, at the thread
// count a plan is made for. The numbers follow whatever kernels the build has; they are cached
// next to the RAM bandwidth measurement (hardware.json) per CPU model, thread count and build.
//
// What is measured, and what each number means to the cost model (cost_model.cpp):
//   gemv_gbps          decode: GB/s of weight bytes one GEMV (one activation row) streams from a
//                      matrix far larger than the caches (rows of 2048), per weight type;
//   expert_gemv_gbps   decode: the same for routed experts, from strata's MoE block for one token
//                      (expert_rates.h): gate+up slices and down slices separately;
//   gemv_fixed_us      decode: the extra time of one GEMV dispatch beyond its bytes at that rate,
//                      from ~1 MiB matrices read cold (pool wake-up, prefetch ramp, tail);
//   dispatch_us        one ThreadPool::run round trip with nothing to do;
//   serial             the small single-threaded ops (RMS norm, activation quantization, SwiGLU,
//                      weighted sum, RoPE), ns per value each op touches;
//   gemm_gmacs         prefill: multiply-accumulates per second of a 2048 x 2048 matrix with 256
//                      activation rows, per weight type (weights cycled through RAM);
//   expert_gemm_*      prefill of routed experts' gate+up, from strata's MoE block over batches
//                      with 8 and 64 tokens per expert: _gmacs, MACs per second of the (token,
//                      expert) rows; _gbps, slice bytes per second of each expert that got any
//                      token (reading and repacking its weights); expert_down_gemm_* the same for
//                      their down projection (rows of 768 values);
//   attention_*_ns     attention over cached positions (f16 cache): per position and element of
//                      the head, once per KV head (decoding K and V) and once per query head
//                      (scores and weighted values); token by token (ops::attend_group, decode)
//                      and in blocks of 16 consecutive tokens (ops::attend_block, prefill);
//   delta_rule_ns      Gated DeltaNet recurrence (ops::delta_rule_sequential), per state value
//                      per token with the state in cache and q/k/v read from a prompt batch's
//                      strided rows (decode adds reading the state from RAM);
//   gdn_conv_ns        its causal convolution + SiLU (ops::causal_conv1d_silu), per channel per
//                      token.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace strata::plan {

// Bumped when the kernels measured get faster, so recorded runs of older kernels are not taken
// for this build's (run_records.h). 11: tile GEMMs for IQ4_XS, Q6_K, Q4_0, IQ4_NL and MXFP4
// (issue 36); 12: prompt attention's values decoded once a chunk, wider tile GEMM column passes,
// F32 products over several tokens. Bump kCalibrationVersion with it.
inline constexpr int kKernelsVersion = 12;
// Bumped when what is measured or how changes (or the kernels do), so older cache entries are
// measured again. 10: kernel level and load recorded; 11: kernels (above); 12: interleaved rounds
// with their spread recorded; 13: kernels (above).
inline constexpr int kCalibrationVersion = 13;

struct TypeCalibration {
  GgmlType type = GgmlType::F32;
  double gemv_gbps = 0;
  double gemm_gmacs = 0;
  double expert_gemm_gmacs = 0;
  double expert_down_gemm_gmacs = 0;
  // Decode rates of routed experts' gate+up and down slices; 0 when not measured (the GEMV rate
  // stands in).
  double expert_gemv_gbps = 0;
  double expert_down_gemv_gbps = 0;
  // Prefill cost of each routed expert that gets any token of a batch, as slice bytes per second
  // (GB/s); 0 when not measured (no such part).
  double expert_gemm_gbps = 0;
  double expert_down_gemm_gbps = 0;
};

// The small single-threaded ops, ns per value: RMS norm, activation quantization (Q8_K), SwiGLU,
// y += a x (residual adds and the experts' weighted sum), RoPE (including the copy in).
struct SerialCosts {
  double norm_ns = 0;
  double quantize_ns = 0;
  double swiglu_ns = 0;
  double axpy_ns = 0;
  double rope_ns = 0;
};

struct CpuCalibration {
  std::string cpu_model;
  int threads = 0;
  std::string date;    // YYYY-MM-DD of the measurement
  std::string build;   // identity of the binary whose kernels were measured
  std::string source;  // "measured 2026-11-29" or "cached, measured 2026-11-29"
  std::string isa;     // the kernel level measured: scalar, avx2, avx512 (STRATA_ISA caps it)
  // What else ran meanwhile (util/system_load.h): a calibration taken while other programs
  // shared the cores is used for the run that took it and not cached.
  double others_cpus = 0;
  double steal_fraction = 0;
  // How far the interleaved rounds disagreed (round_spread below); above kMaxRoundSpread the
  // machine was not steady (a load /proc does not show: another VM's, throttling) and the
  // calibration is not cached either.
  double round_spread = 0;
  bool under_load = false;
  double dispatch_us = 0;
  double gemv_fixed_us = 0;
  SerialCosts serial;
  double attention_kv_ns = 0;        // per position, per KV head, per element of head_dim
  double attention_head_ns = 0;      // per position, per query head, per element of head_dim
  double attention_block_kv_ns = 0;  // the same in prefill's blocks of tokens
  double attention_block_head_ns = 0;
  double delta_rule_ns = 0;  // per recurrent state value per token
  double gdn_conv_ns = 0;    // per recurrent conv channel per token
  std::vector<TypeCalibration> types;
  double seconds = 0;  // wall time the measurements took (this run)
  // Learned from this machine's recorded runs (run_records.h), not cached with the calibration:
  // the CPU's decode and prefill times are multiplied by these.
  double decode_correction = 1;
  double prefill_correction = 1;
  int learned_runs = 0;             // recorded runs the corrections come from
  std::string learned_sources;      // the commands that measured them (LearnedCorrection)
  double learned_decode_error = 0;  // median uncorrected predicted / measured - 1 over them
  double learned_prefill_error = 0;

  // The rates of `type`; null when it was not measured.
  const TypeCalibration* find(GgmlType type) const;
};

struct CalibrationOptions {
  int threads = 1;                            // (in ProbeOptions: 0 = the physical cores)
  std::vector<GgmlType> types;                // weight types to measure (F32 is always added)
  int64_t stream_bytes = int64_t{256} << 20;  // GEMV matrix: far larger than the caches
  // The time each rate of a weight type is measured for, over all rounds (repetitions summed, to
  // average the load of a shared machine): a decode rate in 3 pieces a round (the median of
  // them), a prefill rate 1.5x as long in one piece a round (measure_type in calibration.cpp).
  double window_seconds = 0.15;
  // The weight types' rates are measured in this many interleaved rounds (each rate is the median
  // over them); `on_round`, when set, is called before each (0-based; a test loads one round).
  int rounds = 3;
  std::function<void(int round)> on_round{};
};

// Rounds whose speeds differ by more than this say the machine was not steady.
inline constexpr double kMaxRoundSpread = 0.25;

// How far the rounds of a calibration disagree: each round's speed is the median, over every
// measured rate of every type (by_type[type][round]), of the rate relative to its median over the
// rounds; the fastest round's speed over the slowest's, minus 1 (0 for one round).
double round_spread(const std::vector<std::vector<TypeCalibration>>& by_type);

// "other programs used 0.1 CPUs (steal 0%) and its rounds differed by 31%".
std::string describe_load(const CpuCalibration& c);

// Runs the micro-benchmarks (about 3 s per weight type with the default window, plus ~1 s; on
// this project's 2-core Zen 5 machine, 10 s for F32, Q4_K and Q6_K).
CpuCalibration calibrate_cpu(const CalibrationOptions& options);

// The cached calibration for this CPU model, thread count, build and kernel level, with any
// missing types measured and added; everything measured again when `remeasure`. `cache_path` is
// the hardware.json the RAM bandwidth probe uses. A measurement taken under load is returned,
// said, and not cached (measurements_cacheable).
CpuCalibration cached_cpu_calibration(const std::string& cache_path, const std::string& cpu_model,
                                      const CalibrationOptions& options, bool remeasure);

// Whether a measurement taken under `load` may be cached: not when the machine was busy, unless
// STRATA_CALIBRATION_LOAD_CHECK=off (a machine that is never quiet; tests that check the cache
// while other tests share the cores). Says why when not.
bool measurements_cacheable(bool under_load, const std::string& what, const std::string& load);
// False when STRATA_CALIBRATION_LOAD_CHECK=off.
bool load_check_enabled();

// The compute roofs of strata's kernels for one weight type on `threads` threads, measured on
// weights held in the caches so memory does not bound them: the decode GEMV rate (GB/s of weight
// bytes; a token's weight reads cannot go faster whatever the RAM) and the prefill GEMM rate
// (multiply-accumulates per second, 256 activation rows). `strata bench` sets the RAM bandwidth
// next to them and names the roof that binds.
struct ComputeRoofs {
  GgmlType type = GgmlType::F32;
  bool compact = false;  // measured on compact tiles
  double gemv_gbps = 0;
  double gemm_gmacs = 0;
};
// compact: on the type's compact tiles (where it has them), as a model whose weights were
// rewritten into them runs (ops/compact_tiles.h).
ComputeRoofs measure_compute_roofs(GgmlType type, int threads, double window_seconds = 0.05,
                                   bool compact = false);

// The quantized type a preset's uniform bits per weight stands for (nearest bits per weight among
// Q2_K, Q3_K, IQ4_XS, Q4_K, Q5_K, Q6_K, Q8_0).
GgmlType type_for_bits_per_weight(double bits_per_weight);

// An identity of the running binary (path, size, modification time): a rebuilt binary may have
// other kernels, so its calibration is not reused.
std::string build_identity();

// Today as YYYY-MM-DD (local time), the date stamped on cached measurements.
std::string today_date();
// Whole days from a YYYY-MM-DD date to now (a large number for an unreadable one).
int days_since(const std::string& date);

// The calibration as JSON (the cache entry; also printed by `strata plan --json`).
nlohmann::json calibration_json(const CpuCalibration& c);

}  // namespace strata::plan
