#include "synthetic_weights.h"
#include <algorithm>

#include <cmath>
#include <cstring>

#include "quant/quant.h"
#include "quant/type_mix.h"
#include "util/error.h"

namespace strata::tools {
namespace {

bool is_moe(const std::string& arch) {
  return arch != "qwen3" && arch != "llama";
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

GgmlType tensor_type(const SyntheticModelSpec& s, const std::string& role, int64_t layer,
                     int64_t cols, bool routed_expert) {
  return quant::matrix_type(s.ftype, {.role = role,
                                      .layer = layer,
                                      .n_layer = s.n_layer,
                                      .cols = cols,
                                      .routed_expert = routed_expert,
                                      .n_expert = is_moe(s.arch) ? s.n_expert : 0,
                                      .n_gqa = s.n_head / std::max<int64_t>(1, s.n_head_kv)});
}

RandomWeights::RandomWeights(const SyntheticModelSpec& s) : s_(s), rng_(s.seed) {
  direction_.resize(static_cast<size_t>(s.n_embd));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double norm = 0;
  for (auto& v : direction_) {
    v = normal(rng_);
    norm += double(v) * v;
  }
  for (auto& v : direction_)
    v = static_cast<float>(v / std::sqrt(norm) * std::sqrt(double(s.n_embd)));
}

GgufWriter::TensorFiller RandomWeights::matrix(GgmlType type, int64_t cols, int64_t rows,
                                               float bias) {
  const uint64_t seed = rng_();
  return [=, this](std::span<uint8_t> out) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
    constexpr int64_t kPool = 64;
    const int64_t row_bytes = quant::row_bytes(type, cols);
    std::vector<float> values(static_cast<size_t>(cols * kPool));
    for (int64_t i = 0; i < cols * kPool; ++i) values[static_cast<size_t>(i)] = normal(rng);
    if (bias != 0.0f) {
      // Only embedding rows (cols == n_embd) carry the shared direction.
      STRATA_CHECK(cols == static_cast<int64_t>(direction_.size()),
                   "direction bias needs rows of {} values, got {}", direction_.size(), cols);
      const float scale = bias / std::sqrt(static_cast<float>(cols));
      for (int64_t i = 0; i < cols * kPool; ++i) {
        values[static_cast<size_t>(i)] += scale * direction_[static_cast<size_t>(i % cols)];
      }
    }
    std::vector<uint8_t> pool(static_cast<size_t>(row_bytes * kPool));
    quant::kernels_exact(type, quant::Isa::scalar)
        .quantize_row(values.data(), pool.data(), cols * kPool);
    std::uniform_int_distribution<int64_t> pick(0, kPool - 1);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out.data() + r * row_bytes, pool.data() + pick(rng) * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
  };
}

std::vector<uint8_t> RandomWeights::router() {
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(s_.n_embd)));
  const int64_t hot = static_cast<int64_t>(std::llround(s_.hot_fraction * s_.n_expert));
  std::vector<float> w(static_cast<size_t>(s_.n_embd * s_.n_expert));
  for (int64_t e = 0; e < s_.n_expert; ++e) {
    // Spread hot experts over the id range rather than taking the first ones.
    const bool is_hot = hot > 0 && (e * hot) % s_.n_expert < hot;
    const float tilt = is_hot ? static_cast<float>(s_.skew) / static_cast<float>(s_.n_embd) : 0.0f;
    for (int64_t i = 0; i < s_.n_embd; ++i) {
      w[static_cast<size_t>(e * s_.n_embd + i)] =
          normal(rng_) + tilt * direction_[static_cast<size_t>(i)];
    }
  }
  return bytes_of(w);
}

std::vector<uint8_t> RandomWeights::normal_f32(int64_t n, float mean, float stddev) {
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = normal(rng_);
  return bytes_of(w);
}

std::vector<uint8_t> RandomWeights::ssm_a(int64_t n) {
  std::uniform_real_distribution<float> a_log(0.0f, std::log(16.0f));
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = -std::exp(a_log(rng_));
  return bytes_of(w);
}

}  // namespace strata::tools
