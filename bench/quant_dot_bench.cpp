// Dot-product throughput per quant type and instruction-set level on one core, as GB/s of weight
// bytes streamed: each iteration dots one activation row against every row of a weight matrix
// (a GEMV, the shape of single-token decode). Two working sets: "cache" (1 MiB, from L2) and
// "ram" (256 MiB, from memory: the bandwidth-bound regime of MoE decode).
//
// "gemm8/<type>/<isa>/{single,multi}": the shape of batched prompt processing, a 1 MiB weight
// matrix against 8 activation rows, either as 8 vec_dot calls per weight row ("single") or as one
// vec_dot_multi per row ("multi"). weight_GBps counts weight bytes x 8 tokens, and dots_per_s
// (rows x tokens per second), so the two variants compare directly.
//
//   build/release/bench/bench_quant_dot [--benchmark_filter=Q4_K]

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"

namespace strata::quant {
namespace {

constexpr int64_t kRowLength = 4096;

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

// A weight matrix of about `bytes` bytes: 64 distinct quantized rows repeated (quantizing
// hundreds of MB with the reference quantizers would dominate the run).
std::vector<uint8_t> weight_matrix(GgmlType type, size_t bytes, int64_t* rows) {
  const size_t row_size = static_cast<size_t>(row_bytes(type, kRowLength));
  *rows = std::max<int64_t>(1, static_cast<int64_t>(bytes / row_size));
  constexpr int64_t kDistinct = 64;
  std::vector<uint8_t> distinct(row_size * kDistinct);
  const auto values = gaussian(static_cast<size_t>(kRowLength * kDistinct), 1);
  kernels_exact(type, Isa::scalar)
      .quantize_row(values.data(), distinct.data(), kRowLength * kDistinct);
  std::vector<uint8_t> out(row_size * static_cast<size_t>(*rows));
  for (int64_t r = 0; r < *rows; ++r) {
    std::memcpy(out.data() + r * row_size, distinct.data() + (r % kDistinct) * row_size, row_size);
  }
  return out;
}

void dot_benchmark(benchmark::State& state, GgmlType type, Isa isa, size_t working_set) {
  const TypeTraits& t = traits(type);
  const VecDotFn dot = kernels_at(type, isa).vec_dot;
  int64_t rows = 0;
  const std::vector<uint8_t> weights = weight_matrix(type, working_set, &rows);
  std::vector<uint8_t> activation(static_cast<size_t>(row_bytes(t.activation_type, kRowLength)));
  const auto a = gaussian(kRowLength, 2);
  kernels_exact(t.activation_type, Isa::scalar)
      .quantize_row(a.data(), activation.data(), kRowLength);
  const size_t row_size = static_cast<size_t>(row_bytes(type, kRowLength));
  std::vector<float> out(static_cast<size_t>(rows));
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      out[static_cast<size_t>(r)] =
          dot(kRowLength, weights.data() + r * row_size, activation.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(weights.size()));
  state.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(weights.size()) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

void gemm8_benchmark(benchmark::State& state, GgmlType type, Isa isa, bool use_multi) {
  constexpr int kTokens = 8;
  const TypeTraits& t = traits(type);
  const TypeKernels k = kernels_at(type, isa);
  int64_t rows = 0;
  const std::vector<uint8_t> weights = weight_matrix(type, size_t{1} << 20, &rows);
  const int64_t a_bytes = row_bytes(t.activation_type, kRowLength);
  std::vector<uint8_t> activations(static_cast<size_t>(a_bytes * kTokens));
  const auto a = gaussian(static_cast<size_t>(kRowLength * kTokens), 2);
  kernels_exact(t.activation_type, Isa::scalar)
      .quantize_row(a.data(), activations.data(), kRowLength * kTokens);
  const size_t row_size = static_cast<size_t>(row_bytes(type, kRowLength));
  std::vector<float> out(static_cast<size_t>(rows * kTokens));
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* wr = weights.data() + r * row_size;
      float* o = out.data() + r * kTokens;
      if (use_multi) {
        k.vec_dot_multi(kRowLength, wr, activations.data(), a_bytes, kTokens, o);
      } else {
        for (int j = 0; j < kTokens; ++j)
          o[j] = k.vec_dot(kRowLength, wr, activations.data() + j * a_bytes);
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(weights.size()) * kTokens * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["dots_per_s"] =
      benchmark::Counter(static_cast<double>(rows) * kTokens * iters, benchmark::Counter::kIsRate);
}

void activation_quantize_benchmark(benchmark::State& state, GgmlType type, Isa isa) {
  const QuantizeRowFn quantize = kernels_at(type, isa).quantize_row;
  constexpr int64_t n = 1 << 16;
  const auto x = gaussian(n, 3);
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes(type, n)));
  for (auto _ : state) {
    quantize(x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
}

bool has_dot(GgmlType type) {
  return kernels_exact(type, Isa::scalar).vec_dot != nullptr;
}

int register_all() {
  for (const auto& [label, bytes] : {std::pair<const char*, size_t>{"cache", size_t{1} << 20},
                                     std::pair<const char*, size_t>{"ram", size_t{256} << 20}}) {
    for (GgmlType type : supported_types()) {
      if (!has_dot(type)) continue;
      for (Isa isa : available_isas()) {
        const std::string name = std::string("dot/") + label + "/" +
                                 std::string(ggml_type_name(type)) + "/" +
                                 std::string(isa_name(isa));
        benchmark::RegisterBenchmark(name.c_str(), dot_benchmark, type, isa, bytes)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(label[0] == 'c' ? 0.2 : 0.5);
      }
    }
  }
  for (GgmlType type : supported_types()) {
    if (!has_dot(type)) continue;
    for (Isa isa : available_isas()) {
      if (!kernels_exact(type, isa).vec_dot_multi) continue;
      for (bool use_multi : {false, true}) {
        const std::string name = "gemm8/" + std::string(ggml_type_name(type)) + "/" +
                                 std::string(isa_name(isa)) + (use_multi ? "/multi" : "/single");
        benchmark::RegisterBenchmark(name.c_str(), gemm8_benchmark, type, isa, use_multi)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.2);
      }
    }
  }
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F16}) {
    for (Isa isa : available_isas()) {
      const std::string name = std::string("quantize_activation/") +
                               std::string(ggml_type_name(type)) + "/" + std::string(isa_name(isa));
      benchmark::RegisterBenchmark(name.c_str(), activation_quantize_benchmark, type, isa)
          ->Unit(benchmark::kMicrosecond)
          ->MinTime(0.1);
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace
}  // namespace strata::quant

BENCHMARK_MAIN();
