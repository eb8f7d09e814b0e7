// The Gated DeltaNet kernels against their CPU counterparts in ops/gated_delta_net.h (which the
// qwen35moe oracle logits check), on the test device (lavapipe in CI), with the head shapes of
// the oracle model and of Qwen3.5-35B-A3B, one to three runs (sequences) per call, and each
// sequence's state carried from a first call into a second.
//
// Thresholds: the GPU sums in another order than the CPU (trees of float partial sums against
// sequential float, AVX2 or double sums), and its exp / log differ from libm's by an ulp or
// two, so results agree to float rounding (measured on lavapipe: NMSE ~1e-15 for one pass,
// <= 7e-14 after 70 steps of the recurrence). A wrong index (a head, a token, a state row, a tap)
// gives NMSE > 1e-3, so 1e-12 (single pass) and 1e-10 (recurrence) separate the two by many orders
// of magnitude. Convolution states are copies of inputs and must match bit for bit.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "backend/vulkan/gpu_gdn_ops.h"
#include "gpu_test_device.h"
#include "ops/gated_delta_net.h"
#include "support/test_support.h"

namespace strata::vk {
namespace {

using strata::test::nmse;
using strata::test::random_floats;
using test::download;
using test::run;
using test::test_device;
using test::upload;

constexpr double kSinglePassNmse = 1e-12;  // one pass of sums over <= 128 terms
constexpr double kRecurrenceNmse = 1e-10;  // up to 75 recurrent steps on the same state

struct GdnShape {
  const char* name;
  int64_t n_k_heads, n_v_heads, d_k, d_v, conv_kernel;
  int64_t conv_dim() const { return 2 * n_k_heads * d_k + n_v_heads * d_v; }
  int64_t conv_state_floats() const { return (conv_kernel - 1) * conv_dim(); }
  int64_t ssm_state_floats() const { return n_v_heads * d_v * d_k; }
};

// The oracle model (../shared/oracle/gdn: tiny-qwen35moe), Qwen3.5-35B-A3B, and sizes that fill
// neither the kernels' thread groups (d_k 40 over 16 lanes, d_v 30 over blocks of 4 rows) nor
// a kernel of 4 taps.
const GdnShape kShapes[] = {{"Oracle", 2, 4, 64, 64, 4},
                            {"Qwen35_35B", 16, 32, 128, 128, 4},
                            {"OddSizes", 2, 6, 40, 30, 3}};

void PrintTo(const GdnShape& s, std::ostream* os) {
  *os << s.name;
}

// Run lengths of the first and the second call: prefill then decode, and mixed batches where a
// sequence that had 1 token gets 70 and the other way round.
struct TwoCalls {
  std::vector<int64_t> first, second;
};
const TwoCalls kLayouts[] = {{{70}, {1}}, {{1, 70}, {5, 1}}, {{5, 70, 1}, {70, 1, 5}}};

std::string shape_name(const testing::TestParamInfo<GdnShape>& info) {
  return info.param.name;
}

// Checks one comparison and prints its NMSE (the numbers the thresholds are judged by).
void expect_nmse(const std::vector<float>& got, const std::vector<float>& want, double limit,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double e = nmse(got.data(), want.data(), want.size());
  std::printf("    nmse %-52s %.3g\n", what.c_str(), e);
  EXPECT_LT(e, limit) << what;
}

// The sequences of a test: per sequence its CPU state and a slot in the device state pools.
// Sequence r sits in slot n - 1 - r, so a kernel that ignored the per-run address would fail.
struct States {
  const GdnShape& s;
  int64_t n;
  std::vector<std::vector<float>> conv, ssm;  // CPU states per sequence
  Buffer conv_pool, ssm_pool;

  States(Device& dev, const GdnShape& shape, int64_t n_seq, uint32_t seed) : s(shape), n(n_seq) {
    std::vector<float> conv_all, ssm_all;
    for (int64_t r = 0; r < n; ++r) {
      // Nonzero states, as after earlier tokens; S small as in a running model.
      conv.push_back(random_floats(static_cast<size_t>(s.conv_state_floats()), seed + r));
      ssm.push_back(random_floats(static_cast<size_t>(s.ssm_state_floats()), seed + 50 + r, 0.1f));
    }
    for (int64_t slot = 0; slot < n; ++slot) {
      const auto& c = conv[static_cast<size_t>(n - 1 - slot)];
      const auto& m = ssm[static_cast<size_t>(n - 1 - slot)];
      conv_all.insert(conv_all.end(), c.begin(), c.end());
      ssm_all.insert(ssm_all.end(), m.begin(), m.end());
    }
    conv_pool = upload(dev, conv_all, "conv states");
    ssm_pool = upload(dev, ssm_all, "ssm states");
  }

  std::vector<GpuGdnRun> runs(const std::vector<int64_t>& lengths) const {
    std::vector<GpuGdnRun> out;
    int64_t begin = 0;
    for (int64_t r = 0; r < n; ++r) {
      const uint64_t slot = static_cast<uint64_t>(n - 1 - r);
      out.push_back(GpuGdnRun{
          static_cast<int32_t>(begin), static_cast<int32_t>(lengths[static_cast<size_t>(r)]),
          conv_pool.address() + slot * static_cast<uint64_t>(s.conv_state_floats()) * 4,
          ssm_pool.address() + slot * static_cast<uint64_t>(s.ssm_state_floats()) * 4});
      begin += lengths[static_cast<size_t>(r)];
    }
    return out;
  }

  // The device pool in sequence order.
  std::vector<float> gpu(Device& dev, bool ssm_states) const {
    const int64_t per = ssm_states ? s.ssm_state_floats() : s.conv_state_floats();
    const auto pool =
        download<float>(dev, ssm_states ? ssm_pool : conv_pool, static_cast<size_t>(n * per));
    std::vector<float> out;
    for (int64_t r = 0; r < n; ++r) {
      const auto first = pool.begin() + (n - 1 - r) * per;
      out.insert(out.end(), first, first + per);
    }
    return out;
  }
  std::vector<float> cpu(bool ssm_states) const {
    std::vector<float> out;
    for (const auto& v : ssm_states ? ssm : conv) out.insert(out.end(), v.begin(), v.end());
    return out;
  }
};

int64_t total(const std::vector<int64_t>& lengths) {
  int64_t n = 0;
  for (const int64_t l : lengths) n += l;
  return n;
}

std::string label(const char* what, size_t layout, int call) {
  return fmt::format("{} layout {} call {}", what, layout, call);
}

int64_t k_head(const GdnShape& s, int64_t h, bool modulo) {
  return modulo ? h % s.n_k_heads : h / (s.n_v_heads / s.n_k_heads);
}

class GpuGdn : public testing::TestWithParam<GdnShape> {};

// ops::causal_conv1d_silu per run, inputs and outputs at a token stride wider than the
// channels (as when the conv reads part of a wider row); the new states bit for bit.
TEST_P(GpuGdn, ConvSiluMatchesCpuAcrossRunsAndCalls) {
  const GdnShape& s = GetParam();
  Device& dev = test_device();
  const int64_t channels = s.conv_dim(), stride = channels + 5;
  const auto weight = random_floats(static_cast<size_t>(s.conv_kernel * channels), 201, 0.5f);
  Buffer wb = upload(dev, weight);
  for (size_t li = 0; li < std::size(kLayouts); ++li) {
    const TwoCalls& layout = kLayouts[li];
    const int64_t n_runs = static_cast<int64_t>(layout.first.size());
    States st(dev, s, n_runs, 210);
    for (int call = 1; call <= 2; ++call) {
      const auto& lengths = call == 1 ? layout.first : layout.second;
      const int64_t n = total(lengths);
      const auto x = random_floats(static_cast<size_t>(n * stride), 220 + call);
      std::vector<float> want(x.size(), 0.0f);
      const auto runs = st.runs(lengths);
      for (int64_t r = 0; r < n_runs; ++r) {
        const GpuGdnRun& gr = runs[static_cast<size_t>(r)];
        ops::causal_conv1d_silu(&x[gr.begin * stride], &want[gr.begin * stride], stride,
                                gr.n_tokens, 0, channels, weight.data(), s.conv_kernel, channels,
                                st.conv[static_cast<size_t>(r)].data());
      }
      Buffer xb = upload(dev, x), rb = upload(dev, runs);
      Buffer out = upload(dev, std::vector<float>(x.size(), 0.0f));
      run(dev, [&](CommandList& cmd) {
        GpuGdnOps{dev, cmd}.conv_silu(xb.address(), out.address(), stride, wb.address(),
                                      s.conv_kernel, channels, rb.address(), n_runs, n);
      });
      expect_nmse(download<float>(dev, out, x.size()), want, kSinglePassNmse,
                  label("conv out", li, call));
      EXPECT_EQ(st.gpu(dev, false), st.cpu(false)) << label("conv state", li, call);
    }
  }
}

// ops::l2_norm of every q and k head (q scaled by 1/sqrt(d_k)) and ops::delta_gates, in the
// layer's layout: q heads and k heads at the start of each conv_dim row.
TEST_P(GpuGdn, L2NormAndGatesMatchCpu) {
  const GdnShape& s = GetParam();
  Device& dev = test_device();
  const int64_t n = 76, stride = s.conv_dim(), hv = s.n_v_heads, ba_stride = hv + 3;
  const float eps = 1e-6f, q_scale = 1.0f / std::sqrt(static_cast<float>(s.d_k));
  auto qk = random_floats(static_cast<size_t>(n * stride), 301);
  for (int64_t i = 0; i < s.d_k; ++i) qk[static_cast<size_t>(i)] = 0.0f;  // head 0 of token 0: eps
  auto b = random_floats(static_cast<size_t>(n * ba_stride), 302, 3.0f);
  auto a = random_floats(static_cast<size_t>(n * ba_stride), 303, 3.0f);
  a[1] = 30.0f;   // softplus(x) = x above 20
  a[2] = -25.0f;  // softplus of a tiny exp: needs an accurate log1p
  const auto dt_bias = random_floats(static_cast<size_t>(hv), 304);
  auto a_neg = random_floats(static_cast<size_t>(hv), 305);
  for (auto& v : a_neg) v = -std::exp(v);
  std::vector<float> want_qk(qk), want_beta(static_cast<size_t>(n * hv)),
      want_g(static_cast<size_t>(n * hv));
  for (int64_t t = 0; t < n; ++t) {
    float* row = &want_qk[t * stride];
    for (int64_t h = 0; h < s.n_k_heads; ++h) {
      ops::l2_norm(row + h * s.d_k, s.d_k, eps, q_scale);
      ops::l2_norm(row + (s.n_k_heads + h) * s.d_k, s.d_k, eps);
    }
    ops::delta_gates(&b[t * ba_stride], &a[t * ba_stride], a_neg.data(), dt_bias.data(), hv,
                     &want_beta[t * hv], &want_g[t * hv]);
  }
  Buffer qkb = upload(dev, qk), bb = upload(dev, b), ab = upload(dev, a), anb = upload(dev, a_neg),
         dtb = upload(dev, dt_bias);
  Buffer beta = dev.allocate(want_beta.size() * 4, MemoryKind::device, "beta");
  Buffer g = dev.allocate(want_g.size() * 4, MemoryKind::device, "g");
  run(dev, [&](CommandList& cmd) {
    GpuGdnOps{dev, cmd}.l2norm_gates(qkb.address(), stride, n, s.n_k_heads, s.d_k, eps, q_scale,
                                     bb.address(), ab.address(), ba_stride, anb.address(),
                                     dtb.address(), hv, beta.address(), g.address());
  });
  expect_nmse(download<float>(dev, qkb, qk.size()), want_qk, kSinglePassNmse, "l2 norm q, k");
  expect_nmse(download<float>(dev, beta, want_beta.size()), want_beta, kSinglePassNmse, "beta");
  expect_nmse(download<float>(dev, g, want_g.size()), want_g, kSinglePassNmse, "g");
}

// Inputs of the recurrence in the layer's layout: rows of conv_dim with q, k (L2-normalized, q
// scaled) and v heads, gates [n][n_v_heads] from ops::delta_gates.
struct DeltaInputs {
  std::vector<float> mixed, beta, g;
  DeltaInputs(const GdnShape& s, int64_t n, uint32_t seed) {
    const int64_t stride = s.conv_dim(), hv = s.n_v_heads;
    mixed = random_floats(static_cast<size_t>(n * stride), seed);
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.d_k));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < s.n_k_heads; ++h) {
        ops::l2_norm(&mixed[t * stride + h * s.d_k], s.d_k, 1e-6f, q_scale);
        ops::l2_norm(&mixed[t * stride + (s.n_k_heads + h) * s.d_k], s.d_k, 1e-6f);
      }
    }
    const auto b = random_floats(static_cast<size_t>(n * hv), seed + 1, 2.0f);
    const auto a = random_floats(static_cast<size_t>(n * hv), seed + 2, 2.0f);
    const auto dt_bias = random_floats(static_cast<size_t>(hv), seed + 3);
    auto a_neg = random_floats(static_cast<size_t>(hv), seed + 4, 0.5f);
    for (auto& v : a_neg) v = -std::exp(v);
    beta.resize(static_cast<size_t>(n * hv));
    g.resize(beta.size());
    for (int64_t t = 0; t < n; ++t) {
      ops::delta_gates(&b[t * hv], &a[t * hv], a_neg.data(), dt_bias.data(), hv, &beta[t * hv],
                       &g[t * hv]);
    }
  }
};

// ops::delta_rule_sequential per (run, value head), both head mappings (the oracle's 2:1 ratio
// tells them apart), outputs at the layer's stride and the states after each call.
TEST_P(GpuGdn, DeltaRuleMatchesCpuAcrossRunsAndCalls) {
  const GdnShape& s = GetParam();
  Device& dev = test_device();
  const int64_t stride = s.conv_dim(), hv = s.n_v_heads, v_dim = hv * s.d_v;
  const int64_t k_off = s.n_k_heads * s.d_k, v_off = 2 * s.n_k_heads * s.d_k;
  for (const bool modulo : {true, false}) {
    // The second mapping on the three-run layout only (it changes which k-head is read, not
    // how runs are walked), to keep the test quick on lavapipe.
    for (size_t li = modulo ? 0 : std::size(kLayouts) - 1; li < std::size(kLayouts); ++li) {
      const TwoCalls& layout = kLayouts[li];
      const int64_t n_runs = static_cast<int64_t>(layout.first.size());
      States st(dev, s, n_runs, 400);
      for (int call = 1; call <= 2; ++call) {
        const auto& lengths = call == 1 ? layout.first : layout.second;
        const int64_t n = total(lengths);
        const DeltaInputs in(s, n, 410 + static_cast<uint32_t>(call));
        const auto runs = st.runs(lengths);
        std::vector<float> want(static_cast<size_t>(n * v_dim));
        for (int64_t r = 0; r < n_runs; ++r) {
          const GpuGdnRun& gr = runs[static_cast<size_t>(r)];
          for (int64_t h = 0; h < hv; ++h) {
            const int64_t kh = k_head(s, h, modulo);
            const float* base = &in.mixed[gr.begin * stride];
            ops::DeltaRuleRun dr;
            dr.q = base + kh * s.d_k;
            dr.k = base + k_off + kh * s.d_k;
            dr.v = base + v_off + h * s.d_v;
            dr.qk_stride = dr.v_stride = stride;
            dr.beta = &in.beta[gr.begin * hv + h];
            dr.g = &in.g[gr.begin * hv + h];
            dr.gate_stride = hv;
            dr.out = &want[gr.begin * v_dim + h * s.d_v];
            dr.out_stride = v_dim;
            dr.n_tokens = gr.n_tokens;
            ops::delta_rule_sequential(st.ssm[static_cast<size_t>(r)].data() + h * s.d_v * s.d_k,
                                       dr, s.d_k, s.d_v);
          }
        }
        Buffer mb = upload(dev, in.mixed), bb = upload(dev, in.beta), gb = upload(dev, in.g),
               rb = upload(dev, runs);
        Buffer out = dev.allocate(want.size() * 4, MemoryKind::device, "out");
        run(dev, [&](CommandList& cmd) {
          GpuGdnOps{dev, cmd}.delta_rule(mb.address(), mb.address() + k_off * 4, stride,
                                         mb.address() + v_off * 4, stride, bb.address(),
                                         gb.address(), hv, out.address(), v_dim, rb.address(),
                                         n_runs, s.n_k_heads, hv, s.d_k, s.d_v, modulo);
        });
        const std::string what = modulo ? "delta (h % n_k)" : "delta (h / r)";
        expect_nmse(download<float>(dev, out, want.size()), want, kRecurrenceNmse,
                    label((what + " out").c_str(), li, call));
        expect_nmse(st.gpu(dev, true), st.cpu(true), kRecurrenceNmse,
                    label((what + " state").c_str(), li, call));
      }
    }
  }
}

// ops::gated_rms_norm per (token, value head), x and z at strides wider than the heads.
TEST_P(GpuGdn, GatedNormMatchesCpu) {
  const GdnShape& s = GetParam();
  Device& dev = test_device();
  const int64_t n = 76, hv = s.n_v_heads, x_stride = hv * s.d_v + 7, z_stride = hv * s.d_v + 2;
  const float eps = 1e-6f;
  const auto x = random_floats(static_cast<size_t>(n * x_stride), 501, 0.3f);
  const auto z = random_floats(static_cast<size_t>(n * z_stride), 502, 2.0f);
  const auto weight = random_floats(static_cast<size_t>(s.d_v), 503);
  std::vector<float> want(x);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < hv; ++h) {
      ops::gated_rms_norm(&want[t * x_stride + h * s.d_v], weight.data(),
                          &z[t * z_stride + h * s.d_v], s.d_v, eps);
    }
  }
  Buffer xb = upload(dev, x), zb = upload(dev, z), wb = upload(dev, weight);
  run(dev, [&](CommandList& cmd) {
    GpuGdnOps{dev, cmd}.gated_norm(xb.address(), x_stride, wb.address(), zb.address(), z_stride, n,
                                   hv, s.d_v, eps);
  });
  expect_nmse(download<float>(dev, xb, x.size()), want, kSinglePassNmse, "gated norm");
}

// The four kernels chained as gated_delta_net_block runs them between its projections (conv ->
// norms and gates -> recurrence -> gated norm), three sequences over two calls.
TEST_P(GpuGdn, LayerChainMatchesCpu) {
  const GdnShape& s = GetParam();
  Device& dev = test_device();
  const int64_t conv_dim = s.conv_dim(), hk = s.n_k_heads, hv = s.n_v_heads;
  const int64_t v_dim = hv * s.d_v, k_off = hk * s.d_k, v_off = 2 * hk * s.d_k;
  const float eps = 1e-6f, q_scale = 1.0f / std::sqrt(static_cast<float>(s.d_k));
  const auto conv_w = random_floats(static_cast<size_t>(s.conv_kernel * conv_dim), 601, 0.5f);
  const auto dt_bias = random_floats(static_cast<size_t>(hv), 602);
  auto a_neg = random_floats(static_cast<size_t>(hv), 603, 0.5f);
  for (auto& v : a_neg) v = -std::exp(v);
  const auto norm_w = random_floats(static_cast<size_t>(s.d_v), 604);
  Buffer cwb = upload(dev, conv_w), dtb = upload(dev, dt_bias), anb = upload(dev, a_neg),
         nwb = upload(dev, norm_w);
  const TwoCalls& layout = kLayouts[2];
  const int64_t n_runs = static_cast<int64_t>(layout.first.size());
  States st(dev, s, n_runs, 610);
  for (int call = 1; call <= 2; ++call) {
    const auto& lengths = call == 1 ? layout.first : layout.second;
    const int64_t n = total(lengths);
    const auto qkv = random_floats(static_cast<size_t>(n * conv_dim), 620 + call);
    const auto z = random_floats(static_cast<size_t>(n * v_dim), 630 + call);
    const auto b = random_floats(static_cast<size_t>(n * hv), 640 + call, 2.0f);
    const auto a = random_floats(static_cast<size_t>(n * hv), 650 + call, 2.0f);
    const auto runs = st.runs(lengths);

    std::vector<float> mixed(qkv.size()), beta(b.size()), g(b.size()),
        o(static_cast<size_t>(n * v_dim));
    for (int64_t r = 0; r < n_runs; ++r) {
      const GpuGdnRun& gr = runs[static_cast<size_t>(r)];
      ops::causal_conv1d_silu(&qkv[gr.begin * conv_dim], &mixed[gr.begin * conv_dim], conv_dim,
                              gr.n_tokens, 0, conv_dim, conv_w.data(), s.conv_kernel, conv_dim,
                              st.conv[static_cast<size_t>(r)].data());
    }
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < hk; ++h) {
        ops::l2_norm(&mixed[t * conv_dim + h * s.d_k], s.d_k, eps, q_scale);
        ops::l2_norm(&mixed[t * conv_dim + k_off + h * s.d_k], s.d_k, eps);
      }
      ops::delta_gates(&b[t * hv], &a[t * hv], a_neg.data(), dt_bias.data(), hv, &beta[t * hv],
                       &g[t * hv]);
    }
    for (int64_t r = 0; r < n_runs; ++r) {
      const GpuGdnRun& gr = runs[static_cast<size_t>(r)];
      for (int64_t h = 0; h < hv; ++h) {
        const float* base = &mixed[gr.begin * conv_dim];
        ops::DeltaRuleRun dr;
        dr.q = base + (h % hk) * s.d_k;
        dr.k = base + k_off + (h % hk) * s.d_k;
        dr.v = base + v_off + h * s.d_v;
        dr.qk_stride = dr.v_stride = conv_dim;
        dr.beta = &beta[gr.begin * hv + h];
        dr.g = &g[gr.begin * hv + h];
        dr.gate_stride = hv;
        dr.out = &o[gr.begin * v_dim + h * s.d_v];
        dr.out_stride = v_dim;
        dr.n_tokens = gr.n_tokens;
        ops::delta_rule_sequential(st.ssm[static_cast<size_t>(r)].data() + h * s.d_v * s.d_k, dr,
                                   s.d_k, s.d_v);
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < hv; ++h) {
        ops::gated_rms_norm(&o[t * v_dim + h * s.d_v], norm_w.data(), &z[t * v_dim + h * s.d_v],
                            s.d_v, eps);
      }
    }

    Buffer qkvb = upload(dev, qkv), zb = upload(dev, z), bb = upload(dev, b), ab = upload(dev, a),
           rb = upload(dev, runs);
    Buffer mb = dev.allocate(mixed.size() * 4, MemoryKind::device, "mixed");
    Buffer betab = dev.allocate(beta.size() * 4, MemoryKind::device, "beta");
    Buffer gb = dev.allocate(g.size() * 4, MemoryKind::device, "g");
    Buffer ob = dev.allocate(o.size() * 4, MemoryKind::device, "o");
    run(dev, [&](CommandList& cmd) {
      GpuGdnOps ops{dev, cmd};
      ops.conv_silu(qkvb.address(), mb.address(), conv_dim, cwb.address(), s.conv_kernel, conv_dim,
                    rb.address(), n_runs, n);
      ops.l2norm_gates(mb.address(), conv_dim, n, hk, s.d_k, eps, q_scale, bb.address(),
                       ab.address(), hv, anb.address(), dtb.address(), hv, betab.address(),
                       gb.address());
      ops.delta_rule(mb.address(), mb.address() + k_off * 4, conv_dim, mb.address() + v_off * 4,
                     conv_dim, betab.address(), gb.address(), hv, ob.address(), v_dim, rb.address(),
                     n_runs, hk, hv, s.d_k, s.d_v, true);
      ops.gated_norm(ob.address(), v_dim, nwb.address(), zb.address(), v_dim, n, hv, s.d_v, eps);
    });
    expect_nmse(download<float>(dev, ob, o.size()), o, kRecurrenceNmse,
                label("chain out", 2, call));
    EXPECT_EQ(st.gpu(dev, false), st.cpu(false)) << label("chain conv state", 2, call);
    expect_nmse(st.gpu(dev, true), st.cpu(true), kRecurrenceNmse,
                label("chain ssm state", 2, call));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGdn, testing::ValuesIn(kShapes), shape_name);

}  // namespace
}  // namespace strata::vk
