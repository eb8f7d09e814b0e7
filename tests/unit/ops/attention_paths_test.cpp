// The instruction-set paths of attention (ops::set_attention_path): the register-blocked AVX2
// kernels give the AVX2 loops' bits, over F16 and Q8_0 caches, head sizes, group sizes, blocks of
// tokens, windows and sinks. The AVX-512 path (its softmax correction from its own exp
// polynomial) and the baseline path (no FMA: each multiply rounded) agree to float rounding.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kv_test_cache.h"
#include "ops/attention.h"
#include "support/test_support.h"
#include "util/cpu_features.h"

namespace strata::ops {
namespace {

struct PathGuard {
  ~PathGuard() { set_attention_path(AttentionPath::automatic); }
};

std::vector<float> run(AttentionPath path, const KvLayerView& kv, int64_t group,
                       const std::vector<int64_t>& lengths, const std::vector<float>& q,
                       const AttendOptions& options) {
  set_attention_path(path);
  const int64_t row = kv.n_kv_heads * group * kv.head_dim;
  const int64_t n_tokens = static_cast<int64_t>(lengths.size());
  std::vector<float> out(static_cast<size_t>(n_tokens * row), 0.0f);
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    attend_block(kv, h, q.data() + h * group * kv.head_dim, row, group, n_tokens, lengths.data(),
                 0.125f, out.data() + h * group * kv.head_dim, row, options);
  }
  return out;
}

TEST(AttentionPaths, Avx2KernelsGiveTheLoopsBitsAndEveryPathAgrees) {
  const CpuFeatures& cpu = cpu_features();
  if (!cpu.has_avx2_level()) GTEST_SKIP() << "no AVX2 and FMA: only the baseline path runs here";
  PathGuard guard;
  std::vector<AttentionPath> others = {AttentionPath::baseline};
  if (cpu.has_avx512_level()) others.push_back(AttentionPath::avx512);
  struct Shape {
    GgmlType type;
    int64_t d, group;
  };
  uint32_t seed = 1;
  for (const Shape& s :
       {Shape{GgmlType::F16, 128, 8}, Shape{GgmlType::F16, 64, 3}, Shape{GgmlType::F16, 40, 4},
        Shape{GgmlType::F16, 24, 1}, Shape{GgmlType::F16, 20, 2}, Shape{GgmlType::Q8_0, 128, 8},
        Shape{GgmlType::Q8_0, 96, 5}, Shape{GgmlType::Q8_0, 64, 1}}) {
    for (const bool windowed : {false, true}) {
      SCOPED_TRACE(testing::Message() << ggml_type_name(s.type) << " d " << s.d << " group "
                                      << s.group << (windowed ? " windowed" : ""));
      const int64_t n = 200, heads = 2;
      test_kv::Cache cache = test_kv::make_cache(s.type, heads, s.d, n, 16, seed);
      test_kv::store_random(cache.view, n, seed + 1);
      const std::vector<int64_t> lengths = {1, 63, 64, 65, 130, 200};
      std::vector<int64_t> firsts;
      std::vector<float> sinks;
      AttendOptions options;
      if (windowed) {
        for (int64_t len : lengths) firsts.push_back(std::max<int64_t>(0, len - 70));
        for (int64_t g = 0; g < s.group; ++g) sinks.push_back(0.5f * static_cast<float>(g) - 1);
        options.first_position = firsts.data();
        options.sinks = sinks.data();
      }
      const auto q = test::random_floats(
          static_cast<size_t>(static_cast<int64_t>(lengths.size()) * heads * s.group * s.d),
          seed + 2, 1.5f);
      seed += 3;
      const std::vector<float> want =
          run(AttentionPath::avx2_loops, cache.view, s.group, lengths, q, options);
      const std::vector<float> got =
          run(AttentionPath::avx2, cache.view, s.group, lengths, q, options);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      for (const AttentionPath other : others) {
        const std::vector<float> near = run(other, cache.view, s.group, lengths, q, options);
        for (size_t i = 0; i < near.size(); ++i)
          ASSERT_NEAR(near[i], want[i], 1e-4) << "path " << static_cast<int>(other) << ", " << i;
      }
    }
  }
}

}  // namespace
}  // namespace strata::ops
