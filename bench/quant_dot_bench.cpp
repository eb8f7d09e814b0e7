// Dot-product throughput per quant type and instruction-set level on one core, as GB/s of weight
// bytes streamed: each iteration dots one activation row against every row of a weight matrix
// (a GEMV, the shape of single-token decode). Two working sets: "cache" (1 MiB, from L2) and
// "ram" (256 MiB, from memory: the bandwidth-bound regime of MoE decode). "gemv/...": the same
// through the kernels that decode the activation once for all rows (TypeKernels::gemv);
// "compact/...": through the compact tiles (TypeKernels::compact) packed ahead from the same rows,
// weight_GBps counting the tiles' bytes.
//
// "gemm8/<type>/<isa>/{single,multi}": the shape of batched prompt processing, a 1 MiB weight
// matrix against 8 activation rows, either as 8 vec_dot calls per weight row ("single") or as one
// vec_dot_multi per row ("multi"). weight_GBps counts weight bytes x 8 tokens, and dots_per_s
// (rows x tokens per second), so the two variants compare directly.
//
// "gemm/<type>/<shape>/{multi,tile}": shapes of MoE prompt processing through vec_dot_multi or
// the tile GEMM (TypeKernels::gemm), as multiply-accumulates per second.
//
//   build/release/bench/bench_quant_dot [--benchmark_filter=Q4_K]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// gemv: the rows in blocks of kGemvBlockRows through TypeKernels::gemv (decode's path in
// ops/matmul.cpp) instead of one vec_dot per row; compact: the same blocks of rows through the
// compact tiles.
constexpr int64_t kGemvBlockRows = 64;
enum class RowPath { dot, gemv, compact };

void dot_benchmark(benchmark::State& state, GgmlType type, Isa isa, size_t working_set,
                   RowPath path) {
  const TypeTraits& t = traits(type);
  const VecDotFn dot = kernels_at(type, isa).vec_dot;
  const GemvFn gemv = kernels_at(type, isa).gemv;
  const PackedTileKernels& compact = kernels_at(type, isa).compact;
  int64_t rows = 0;
  std::vector<uint8_t> weights = weight_matrix(type, working_set, &rows);
  const size_t row_size = static_cast<size_t>(row_bytes(type, kRowLength));
  int64_t block_bytes = kGemvBlockRows * static_cast<int64_t>(row_size);
  if (path == RowPath::compact) {  // the tiles replace the rows
    rows -= rows % kGemvBlockRows;
    block_bytes = kGemvBlockRows / compact.rows * compact.bytes(kRowLength);
    std::vector<uint8_t> tiles(static_cast<size_t>(rows / kGemvBlockRows * block_bytes));
    compact.pack(kRowLength, weights.data(), static_cast<int64_t>(row_size), rows, tiles.data());
    weights = std::move(tiles);
  }
  std::vector<uint8_t> activation(static_cast<size_t>(row_bytes(t.activation_type, kRowLength)));
  const auto a = gaussian(kRowLength, 2);
  kernels_exact(t.activation_type, Isa::scalar)
      .quantize_row(a.data(), activation.data(), kRowLength);
  std::vector<float> out(static_cast<size_t>(rows));
  const uint8_t* act = activation.data();
  for (auto _ : state) {
    if (path == RowPath::compact) {
      for (int64_t r = 0; r < rows; r += kGemvBlockRows) {
        compact.gemm(kRowLength, weights.data() + r / kGemvBlockRows * block_bytes, kGemvBlockRows,
                     &act, 1, out.data() + r, kGemvBlockRows);
      }
    } else if (path == RowPath::gemv) {
      for (int64_t r = 0; r < rows; r += kGemvBlockRows) {
        gemv(kRowLength, weights.data() + r * row_size, static_cast<int64_t>(row_size),
             std::min(kGemvBlockRows, rows - r), activation.data(), out.data() + r);
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        out[static_cast<size_t>(r)] =
            dot(kRowLength, weights.data() + r * row_size, activation.data());
      }
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

// A shape of prompt processing: `rows` weight rows of `k` values against `tokens` activation rows,
// as the multi-row dot products do it (groups of kMaxMultiDot tokens, row by row) or as one tile
// GEMM. macs_per_s counts rows x k x tokens.
struct GemmShape {
  const char* label;
  int64_t k, rows, tokens;
};

// multi: vec_dot_multi row by row; tile: the tile GEMM (repacking each call); packed: the tile
// GEMM on tiles packed ahead (MatmulSettings::pack_tiles: weights that stay in cache).
enum class GemmPath { multi, tile, packed };
const char* gemm_path_name(GemmPath p) {
  return p == GemmPath::multi ? "multi" : p == GemmPath::tile ? "tile" : "packed";
}

void gemm_benchmark(benchmark::State& state, GgmlType type, GemmShape shape, GemmPath path) {
  const TypeTraits& t = traits(type);
  const TypeKernels k = kernels_at(type, best_isa());
  const int64_t w_bytes = row_bytes(type, shape.k);
  // 64 distinct rows, repeated (quantizing the whole matrix would dominate the run).
  std::vector<uint8_t> distinct(static_cast<size_t>(w_bytes * 64));
  kernels_exact(type, Isa::scalar)
      .quantize_row(gaussian(static_cast<size_t>(shape.k * 64), 1).data(), distinct.data(),
                    shape.k * 64);
  std::vector<uint8_t> weights(static_cast<size_t>(w_bytes * shape.rows));
  for (int64_t r = 0; r < shape.rows; ++r) {
    std::memcpy(weights.data() + r * w_bytes, distinct.data() + (r % 64) * w_bytes,
                static_cast<size_t>(w_bytes));
  }
  const int64_t a_bytes = row_bytes(t.activation_type, shape.k);
  std::vector<uint8_t> activations(static_cast<size_t>(a_bytes * shape.tokens));
  kernels_exact(t.activation_type, Isa::scalar)
      .quantize_row(gaussian(static_cast<size_t>(shape.k * shape.tokens), 2).data(),
                    activations.data(), shape.k * shape.tokens);
  std::vector<const uint8_t*> act;
  for (int64_t i = 0; i < shape.tokens; ++i) act.push_back(activations.data() + i * a_bytes);
  std::vector<float> out(static_cast<size_t>(shape.rows * shape.tokens));
  std::unique_ptr<uint8_t, decltype(&std::free)> tiles(nullptr, &std::free);
  if (path == GemmPath::packed) {  // tiles are 64-byte aligned, whole 64-byte blocks
    const int64_t n_tiles = (shape.rows + k.packed.rows - 1) / k.packed.rows;
    tiles.reset(static_cast<uint8_t*>(
        std::aligned_alloc(64, static_cast<size_t>(n_tiles * k.packed.bytes(shape.k)))));
    k.packed.pack(shape.k, weights.data(), w_bytes, shape.rows, tiles.get());
  }
  for (auto _ : state) {
    if (path == GemmPath::packed) {
      k.packed.gemm(shape.k, tiles.get(), shape.rows, act.data(), shape.tokens, out.data(),
                    shape.rows);
    } else if (path == GemmPath::tile) {
      k.gemm(shape.k, weights.data(), w_bytes, shape.rows, act.data(), shape.tokens, out.data(),
             shape.rows);
    } else {
      float results[kMaxMultiDot];
      for (int64_t i0 = 0; i0 < shape.tokens; i0 += kMaxMultiDot) {
        const int count = static_cast<int>(std::min<int64_t>(kMaxMultiDot, shape.tokens - i0));
        for (int64_t r = 0; r < shape.rows; ++r) {
          k.vec_dot_multi(shape.k, weights.data() + r * w_bytes, act[static_cast<size_t>(i0)],
                          a_bytes, count, results);
          for (int j = 0; j < count; ++j)
            out[static_cast<size_t>((i0 + j) * shape.rows + r)] = results[j];
        }
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["macs_per_s"] =
      benchmark::Counter(static_cast<double>(shape.k * shape.rows * shape.tokens) *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
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
        const auto add = [&](const std::string& prefix, RowPath path) {
          benchmark::RegisterBenchmark((prefix + name.substr(3)).c_str(), dot_benchmark, type, isa,
                                       bytes, path)
              ->Unit(benchmark::kMicrosecond)
              ->MinTime(label[0] == 'c' ? 0.2 : 0.5);
        };
        add("dot", RowPath::dot);
        if (kernels_at(type, isa).gemv) add("gemv", RowPath::gemv);
        if (kernels_exact(type, isa).compact.gemm) add("compact", RowPath::compact);
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
  // Qwen3-30B-A3B: an expert's gate/up and down, a dense q projection.
  constexpr GemmShape kGemmShapes[] = {{"expert_up_32tok", 2048, 768, 32},
                                       {"expert_down_32tok", 768, 2048, 32},
                                       {"expert_up_8tok", 2048, 768, 8},
                                       {"expert_up_4tok", 2048, 768, 4},
                                       {"expert_up_3tok", 2048, 768, 3},
                                       {"expert_up_2tok", 2048, 768, 2},
                                       {"expert_up_1tok", 2048, 768, 1},
                                       // the trained model's (tools/train) experts: decode, verify
                                       {"small_expert_1tok", 256, 96, 1},
                                       {"small_expert_2tok", 256, 96, 2},
                                       {"small_expert_3tok", 256, 96, 3},
                                       {"small_expert_4tok", 256, 96, 4},
                                       {"small_expert_8tok", 256, 96, 8},
                                       {"dense_512tok", 2048, 4096, 512}};
  for (GgmlType type : supported_types()) {
    const TypeKernels k = kernels_at(type, best_isa());
    if (!k.gemm || !k.vec_dot_multi) continue;
    for (const GemmShape& shape : kGemmShapes) {
      for (GemmPath path : {GemmPath::multi, GemmPath::tile, GemmPath::packed}) {
        if (path == GemmPath::packed && !k.packed.pack) continue;
        const std::string name = "gemm/" + std::string(ggml_type_name(type)) + "/" + shape.label +
                                 "/" + gemm_path_name(path);
        benchmark::RegisterBenchmark(name.c_str(), gemm_benchmark, type, shape, path)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3);
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
