// Gated DeltaNet recurrence on the shape of Qwen3.5-35B-A3B / Qwen3-Next (d_k = d_v = 128):
// the sequential (fused per-token) form against the chunked (C = 64) form, one value head over
// a prefill of N tokens. Run: build/release/bench/bench_gdn
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/gated_delta_net.h"

namespace {

template <bool kChunked>
void BM_DeltaRule(benchmark::State& state) {
  const int64_t n = state.range(0), d = 128;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> q(static_cast<size_t>(n * d)), k(q.size()), v(q.size()), beta(n), g(n),
      out(q.size()), s(static_cast<size_t>(d * d), 0.0f);
  for (auto* buf : {&q, &k, &v}) {
    for (auto& x : *buf) x = normal(rng);
  }
  for (int64_t t = 0; t < n; ++t) {
    strata::ops::l2_norm(&q[t * d], d, 1e-6f, 1.0f / std::sqrt(128.0f));
    strata::ops::l2_norm(&k[t * d], d, 1e-6f);
    beta[t] = 0.5f;
    g[t] = -0.1f;
  }
  strata::ops::DeltaRuleRun run;
  run.q = q.data();
  run.k = k.data();
  run.v = v.data();
  run.qk_stride = run.v_stride = run.out_stride = d;
  run.beta = beta.data();
  run.g = g.data();
  run.gate_stride = 1;
  run.out = out.data();
  run.n_tokens = n;
  for (auto _ : state) {
    if (kChunked) {
      strata::ops::delta_rule_chunked(s.data(), run, d, d);
    } else {
      strata::ops::delta_rule_sequential(s.data(), run, d, d);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);  // tokens of one head
}

BENCHMARK(BM_DeltaRule<false>)->Name("delta_rule_sequential")->Arg(1)->Arg(64)->Arg(512);
BENCHMARK(BM_DeltaRule<true>)->Name("delta_rule_chunked")->Arg(64)->Arg(512);

}  // namespace

BENCHMARK_MAIN();
