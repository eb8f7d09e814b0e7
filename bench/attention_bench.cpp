// Decode and prompt attention at depth on the shape of Qwen3-30B-A3B (head size 128, 8 query heads
// per KV head, 4 KV heads interleaved in the cache): one KV head's group attending over N cached
// positions (decode), or a prefill task's block of 16 consecutive tokens ending at position N, f16
// and q8_0 caches, one core. "flops" counts the useful arithmetic, 2 x 2 x d per
// (query head, position): the Q.K scores and the weighted sum of V. Each instruction-set path this
// CPU runs (ops::set_attention_path) is measured: avx512, avx2 (register-blocked), avx2_loops.
// Run: build/release/bench/bench_attention
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/attention.h"
#include "quant/quant.h"
#include "util/cpu_features.h"

namespace {

using strata::GgmlType;

constexpr int64_t kHeads = 4, kGroup = 8, kDim = 128;

// Positions [0, n) of a cache of kHeads heads filled with normal keys and values.
void fill_cache(const strata::ops::KvLayerView& kv, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> keys(kHeads * kDim), values(keys.size());
  for (int64_t pos = 0; pos < n; ++pos) {
    for (auto& x : keys) x = normal(rng);
    for (auto& x : values) x = normal(rng);
    strata::ops::kv_store(kv, pos, keys.data(), values.data());
  }
}

std::vector<float> normal_values(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<size_t>(count));
  for (auto& x : values) x = normal(rng);
  return values;
}

// One layer's cache of n positions, filled.
struct FilledCache {
  FilledCache(GgmlType type, int64_t n, std::mt19937& rng)
      : row_bytes(strata::quant::row_bytes(type, kDim)),
        k(static_cast<size_t>(n * kHeads * row_bytes)),
        v(k.size()),
        view{type, k.data(), v.data(), kHeads, kDim, row_bytes} {
    fill_cache(view, n, rng);
  }
  int64_t row_bytes;
  std::vector<uint8_t> k, v;
  strata::ops::KvLayerView view;
};

void BM_DecodeAttention(benchmark::State& state, GgmlType type, strata::ops::AttentionPath path) {
  strata::ops::set_attention_path(path);
  const int64_t n = state.range(0);
  std::mt19937 rng(1);
  const FilledCache cache(type, n, rng);
  const strata::ops::KvLayerView& kv = cache.view;
  const std::vector<float> q = normal_values(kGroup * kDim, rng);
  std::vector<float> out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  for (auto _ : state) {
    strata::ops::attend_group(kv, 1, q.data(), kGroup, n, scale, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["flops"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kGroup * static_cast<double>(n) * 4 * kDim,
      benchmark::Counter::kIsRate);
  state.counters["kv_bytes"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(n) * 2 * cache.row_bytes,
      benchmark::Counter::kIsRate);
}

// A prefill task as the model runs it (blocks.cpp): T consecutive tokens of one sequence (the
// second argument), the last at position N - 1, each attending causally over its own positions,
// one KV head's group.
void BM_PrefillAttention(benchmark::State& state, GgmlType type, strata::ops::AttentionPath path) {
  strata::ops::set_attention_path(path);
  const int64_t n = state.range(0), n_tokens = state.range(1);
  std::mt19937 rng(1);
  const FilledCache cache(type, n, rng);
  const strata::ops::KvLayerView& kv = cache.view;
  const std::vector<float> q = normal_values(n_tokens * kGroup * kDim, rng);
  std::vector<float> out(q.size());
  std::vector<int64_t> lengths(n_tokens);
  double positions = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    lengths[static_cast<size_t>(t)] = n - n_tokens + 1 + t;
    positions += static_cast<double>(lengths[static_cast<size_t>(t)]);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  for (auto _ : state) {
    strata::ops::attend_block(kv, 1, q.data(), kGroup * kDim, kGroup, n_tokens, lengths.data(),
                              scale, out.data(), kGroup * kDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["flops"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kGroup * positions * 4 * kDim,
                         benchmark::Counter::kIsRate);
}

// The same step as a model's decode runs it at depth (one core), the layers rotating through 16
// caches so each step streams its cache from RAM, not L3: by head (attend_group for each KV head
// in turn, reading one head's row of each cache slot) or by range (attend_range over every head,
// whole slots, then the ranges merged, as the model's decode step does).
void BM_DecodeAttentionFromRam(benchmark::State& state, GgmlType type, bool by_range) {
  strata::ops::set_attention_path(strata::ops::AttentionPath::automatic);
  constexpr int64_t kLayers = 16;
  const int64_t n = state.range(0);
  const int64_t row_bytes = strata::quant::row_bytes(type, kDim);
  const size_t layer_bytes = static_cast<size_t>(n * kHeads * row_bytes);
  std::vector<uint8_t> k(layer_bytes * kLayers), v(k.size());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<strata::ops::KvLayerView> layers;
  for (int64_t l = 0; l < kLayers; ++l) {
    layers.push_back(
        {type, k.data() + l * layer_bytes, v.data() + l * layer_bytes, kHeads, kDim, row_bytes});
    fill_cache(layers.back(), n, rng);
  }
  std::vector<float> q(kGroup * kDim), out(q.size());
  for (auto& x : q) x = normal(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  std::vector<float> q_all(kHeads * kGroup * kDim), out_all(q_all.size());
  for (auto& x : q_all) x = normal(rng);
  const int64_t n_ranges = strata::ops::attention_ranges(n), rows = kHeads * kGroup;
  strata::ops::AttentionPartials partials, sum_storage;
  partials.reset(n_ranges, rows, kDim);
  sum_storage.reset(1, rows, kDim);
  int64_t layer = 0;
  for (auto _ : state) {
    if (by_range) {
      for (int64_t r = 0; r < n_ranges; ++r) {
        strata::ops::attend_range(layers[layer], 0, kHeads, q_all.data(), 0, kGroup, 1, &n, scale,
                                  r, {}, partials.range(r));
      }
      const strata::ops::AttentionPartial sum = sum_storage.range(0);
      strata::ops::clear_partial(sum, rows, kDim);
      for (int64_t r = 0; r < n_ranges; ++r)
        strata::ops::merge_partial(partials.range(r), rows, kDim, sum);
      strata::ops::finish_attention(sum, 1, rows, kDim, nullptr, out_all.data(), 0);
      benchmark::DoNotOptimize(out_all.data());
    } else {
      for (int64_t h = 0; h < kHeads; ++h) {
        strata::ops::attend_group(layers[layer], h, q.data(), kGroup, n, scale, out.data());
      }
      benchmark::DoNotOptimize(out.data());
    }
    layer = (layer + 1) % kLayers;
  }
  state.counters["kv_bytes"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(layer_bytes) * 2,
      benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  using strata::ops::AttentionPath;
  const strata::CpuFeatures& cpu = strata::cpu_features();
  std::vector<std::pair<const char*, AttentionPath>> paths;
  if (cpu.has_avx512_level()) paths.push_back({"avx512", AttentionPath::avx512});
  if (cpu.has_avx2_level()) {
    paths.push_back({"avx2", AttentionPath::avx2});
    paths.push_back({"avx2_loops", AttentionPath::avx2_loops});
  }
  if (paths.empty()) paths.push_back({"baseline", AttentionPath::baseline});
  for (const auto& [name, path] : paths) {
    for (const auto& [type_name, type] :
         {std::pair{"f16", GgmlType::F16}, std::pair{"q8_0", GgmlType::Q8_0}}) {
      benchmark::RegisterBenchmark(
          (std::string("BM_DecodeAttention/") + type_name + "/" + name).c_str(),
          [type, path](benchmark::State& state) { BM_DecodeAttention(state, type, path); })
          ->Arg(1024)
          ->Arg(8192);
      benchmark::RegisterBenchmark(
          (std::string("BM_PrefillAttention/") + type_name + "/" + name).c_str(),
          [type, path](benchmark::State& state) { BM_PrefillAttention(state, type, path); })
          ->Args({2048, 16})
          ->Args({8192, 16})
          ->Args({8192, 64});
    }
  }
  for (const auto& [type_name, type] :
       {std::pair{"f16", GgmlType::F16}, std::pair{"q8_0", GgmlType::Q8_0}}) {
    for (const bool by_range : {false, true}) {
      benchmark::RegisterBenchmark((std::string("BM_DecodeAttentionFromRam/") + type_name +
                                    (by_range ? "/by_range" : "/by_head"))
                                       .c_str(),
                                   [type, by_range](benchmark::State& state) {
                                     BM_DecodeAttentionFromRam(state, type, by_range);
                                   })
          ->Arg(8192);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
