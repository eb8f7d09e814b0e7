// Gated DeltaNet kernels: the fused (AVX2) recurrence against the portable reference and a
// double-precision version of the textbook formula; the chunked form against the sequential one
// across chunk boundaries; the causal convolution's state carries across calls.

#include "ops/gated_delta_net.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"

namespace strata::ops {
namespace {

struct Inputs {
  int64_t n, d_k, d_v;
  std::vector<float> q, k, v, beta, g;
  DeltaRuleRun run(std::vector<float>& out) const {
    DeltaRuleRun r;
    r.q = q.data();
    r.k = k.data();
    r.v = v.data();
    r.qk_stride = d_k;
    r.v_stride = d_v;
    r.beta = beta.data();
    r.g = g.data();
    r.gate_stride = 1;
    out.assign(static_cast<size_t>(n * d_v), 0.0f);
    r.out = out.data();
    r.out_stride = d_v;
    r.n_tokens = n;
    return r;
  }
};

Inputs make_inputs(int64_t n, int64_t d_k, int64_t d_v, uint32_t seed) {
  Inputs in{n,
            d_k,
            d_v,
            test::random_floats(static_cast<size_t>(n * d_k), seed),
            test::random_floats(static_cast<size_t>(n * d_k), seed + 1),
            test::random_floats(static_cast<size_t>(n * d_v), seed + 2),
            test::random_floats(static_cast<size_t>(n), seed + 3),
            test::random_floats(static_cast<size_t>(n), seed + 4)};
  for (int64_t t = 0; t < n; ++t) {
    l2_norm(in.q.data() + t * d_k, d_k, 1e-6f, 1.0f / std::sqrt(static_cast<float>(d_k)));
    l2_norm(in.k.data() + t * d_k, d_k, 1e-6f);
    in.beta[static_cast<size_t>(t)] = 1.0f / (1.0f + std::exp(-in.beta[static_cast<size_t>(t)]));
    in.g[static_cast<size_t>(t)] = -0.5f * std::fabs(in.g[static_cast<size_t>(t)]);
  }
  return in;
}

// The formula as written (S is d_k x d_v, not transposed), in double.
void textbook(const Inputs& in, std::vector<double>& S, std::vector<double>& out) {
  const int64_t dk = in.d_k, dv = in.d_v;
  out.assign(static_cast<size_t>(in.n * dv), 0.0);
  for (int64_t t = 0; t < in.n; ++t) {
    const float* q = in.q.data() + t * dk;
    const float* k = in.k.data() + t * dk;
    const float* v = in.v.data() + t * dv;
    const double decay = std::exp(double(in.g[static_cast<size_t>(t)]));
    for (auto& s : S) s *= decay;
    for (int64_t j = 0; j < dv; ++j) {
      double m = 0;
      for (int64_t i = 0; i < dk; ++i) m += S[static_cast<size_t>(i * dv + j)] * k[i];
      const double delta = in.beta[static_cast<size_t>(t)] * (v[j] - m);
      for (int64_t i = 0; i < dk; ++i) S[static_cast<size_t>(i * dv + j)] += k[i] * delta;
      double o = 0;
      for (int64_t i = 0; i < dk; ++i) o += S[static_cast<size_t>(i * dv + j)] * q[i];
      out[static_cast<size_t>(t * dv + j)] = o;
    }
  }
}

double nmse_d(const std::vector<float>& a, const std::vector<double>& b) {
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (a[i] - b[i]) * (a[i] - b[i]);
    r += b[i] * b[i];
  }
  return e / r;
}

TEST(GatedDeltaNet, SequentialMatchesTheFormula) {
  for (int64_t d : {64, 128, 24}) {  // 24: not a multiple of 16, the portable path
    SCOPED_TRACE(d);
    const Inputs in = make_inputs(70, d, d, 10);
    std::vector<float> state(static_cast<size_t>(d * d), 0.0f), out;
    delta_rule_sequential(state.data(), in.run(out), d, d);
    std::vector<double> S(static_cast<size_t>(d * d), 0.0), want;
    textbook(in, S, want);
    EXPECT_LT(nmse_d(out, want), 1e-10);
    std::vector<float> state_t(static_cast<size_t>(d * d));  // S^T as stored by the kernel
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < d; ++j) state_t[static_cast<size_t>(j * d + i)] = state[j * d + i];
    }
    EXPECT_LT(nmse_d(state,
                     [&] {
                       std::vector<double> st(S.size());
                       for (int64_t i = 0; i < d; ++i)
                         for (int64_t j = 0; j < d; ++j)
                           st[static_cast<size_t>(j * d + i)] = S[static_cast<size_t>(i * d + j)];
                       return st;
                     }()),
              1e-10);

    std::vector<float> ref_state(static_cast<size_t>(d * d), 0.0f), ref_out;
    delta_rule_sequential_reference(ref_state.data(), in.run(ref_out), d, d);
    EXPECT_LT(test::nmse(out.data(), ref_out.data(), out.size()), 1e-12);
  }
}

TEST(GatedDeltaNet, ChunkedMatchesSequentialAcrossChunkBoundaries) {
  for (int64_t d : {64, 128}) {
    for (int64_t n : {1, 63, 64, 65, 200}) {
      SCOPED_TRACE(testing::Message() << "d " << d << " n " << n);
      const Inputs in = make_inputs(n, d, d, static_cast<uint32_t>(n));
      // Start from a non-zero state: the cross-chunk terms must be right from the first chunk.
      const std::vector<float> start = test::random_floats(static_cast<size_t>(d * d), 99, 0.1f);
      std::vector<float> s1 = start, s2 = start, o1, o2;
      delta_rule_sequential(s1.data(), in.run(o1), d, d);
      delta_rule_chunked(s2.data(), in.run(o2), d, d);
      EXPECT_LT(test::nmse(o2.data(), o1.data(), o1.size()), 1e-10);
      EXPECT_LT(test::nmse(s2.data(), s1.data(), s1.size()), 1e-10);
    }
  }
}

TEST(GatedDeltaNet, ConvolutionCarriesItsStateAcrossCalls) {
  const int64_t channels = 40, kernel = 4, n = 9;
  const auto x = test::random_floats(static_cast<size_t>(n * channels), 1);
  const auto w = test::random_floats(static_cast<size_t>(kernel * channels), 2);
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  // Whole run from a zero state.
  std::vector<float> state(static_cast<size_t>((kernel - 1) * channels), 0.0f);
  std::vector<float> whole(x.size());
  causal_conv1d_silu(x.data(), whole.data(), channels, n, 0, channels, w.data(), kernel, channels,
                     state.data());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t src = t - (kernel - 1) + j;
        if (src >= 0) acc += double(w[j * channels + c]) * x[src * channels + c];
      }
      EXPECT_NEAR(whole[t * channels + c], silu(acc), 1e-5) << t << " " << c;
    }
  }
  // The last kernel-1 inputs are the state.
  for (int64_t r = 0; r < kernel - 1; ++r) {
    for (int64_t c = 0; c < channels; ++c)
      EXPECT_EQ(state[r * channels + c], x[(n - kernel + 1 + r) * channels + c]);
  }
  // Split 2 + 1 + 6 tokens, channels in two ranges: identical.
  std::vector<float> state2(state.size(), 0.0f), split(x.size());
  int64_t done = 0;
  for (int64_t count : {2, 1, 6}) {
    for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, 16}, {16, channels}}) {
      causal_conv1d_silu(x.data() + done * channels, split.data() + done * channels, channels,
                         count, c0, c1, w.data(), kernel, channels, state2.data());
    }
    done += count;
  }
  EXPECT_EQ(split, whole);
  EXPECT_EQ(state2, state);
}

TEST(GatedDeltaNet, GatesAndNorms) {
  const float b = 0.3f, a = -1.2f, a_neg = -2.0f, dt = 0.5f;
  float beta = 0, g = 0;
  delta_gates(&b, &a, &a_neg, &dt, 1, &beta, &g);
  EXPECT_NEAR(beta, 1 / (1 + std::exp(-0.3)), 1e-7);
  EXPECT_NEAR(g, -2.0 * std::log1p(std::exp(-0.7)), 1e-6);
  std::vector<float> x = {3, 4};
  l2_norm(x.data(), 2, 1e-6f, 2.0f);
  EXPECT_NEAR(x[0], 1.2f, 1e-6);
  EXPECT_NEAR(x[1], 1.6f, 1e-6);
  std::vector<float> y = {1, -1}, weight = {2, 3}, z = {0, 1};
  gated_rms_norm(y.data(), weight.data(), z.data(), 2, 0.0f);
  EXPECT_NEAR(y[0], 0.0f, 1e-7);  // silu(0) = 0
  EXPECT_NEAR(y[1], -3.0 / (1 + std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace strata::ops
