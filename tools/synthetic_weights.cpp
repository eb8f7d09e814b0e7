#include "synthetic_weights.h"

#include <cmath>
#include <cstring>

#include "quant/quant.h"
#include "util/error.h"

namespace strata::tools {
namespace {

bool is_moe(const std::string& arch) {
  return arch != "qwen3" && arch != "llama";
}

// The type the file type asks for, before the block-size fallback.
GgmlType wanted_type(const SyntheticModelSpec& s, const std::string& role, int64_t layer,
                     bool routed_expert) {
  if (s.ftype == "MXFP4_MOE") return routed_expert ? GgmlType::MXFP4 : GgmlType::Q8_0;
  if (s.ftype != "Q4_K_M") {
    const auto t = ggml_type_from_name(s.ftype);
    if (!t || !quant::is_supported(*t) || !quant::traits(*t).kernels.vec_dot) {
      fail(
          "unknown or unsupported --ftype '{}' (Q4_K_M, MXFP4_MOE or a weight type such as Q8_0, "
          "IQ4_XS)",
          s.ftype);
    }
    if (role == "output" && (*t == GgmlType::Q2_K || *t == GgmlType::Q3_K)) return GgmlType::Q6_K;
    return *t;
  }
  // The K-quant mix of a Q4_K_M file as GGUF quantizers make it: more bits where errors hurt
  // most (output head, V projections, some down projections), 8 bits for the tiny K/V matrices
  // of MoE models.
  const bool moe = is_moe(s.arch);
  const int64_t n = s.n_layer;
  const bool more_bits = layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
  if (role == "output") return GgmlType::Q6_K;
  if (role == "attn_k") return moe ? GgmlType::Q8_0 : GgmlType::Q4_K;
  if (role == "attn_v") return moe ? GgmlType::Q8_0 : (more_bits ? GgmlType::Q6_K : GgmlType::Q4_K);
  if (role == "attn_output") return moe ? GgmlType::Q5_K : GgmlType::Q4_K;
  if (role == "ffn_down") return more_bits ? GgmlType::Q6_K : GgmlType::Q4_K;
  if (role == "attn_qkv") return GgmlType::Q8_0;  // as GGUF quantizers treat GDN's qkv
  return GgmlType::Q4_K;
}

// Rows of 2880 (gpt-oss) or 1408 (GLM-4.5-Air expert down) values are no whole number of
// 256-value blocks: GGUF quantizers then pick a type of 32-value blocks.
GgmlType fit_rows(GgmlType t, int64_t cols) {
  if (cols % ggml_type_info(t).block_elems == 0) return t;
  switch (t) {
    case GgmlType::Q4_K:
      t = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      t = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
      t = GgmlType::Q8_0;
      break;
    default:
      t = GgmlType::IQ4_NL;
      break;
  }
  return cols % ggml_type_info(t).block_elems == 0 ? t : GgmlType::F16;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

GgmlType tensor_type(const SyntheticModelSpec& s, const std::string& role, int64_t layer,
                     int64_t cols, bool routed_expert) {
  return fit_rows(wanted_type(s, role, layer, routed_expert), cols);
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
