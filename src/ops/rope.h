#pragma once
// Rotary position embeddings. NORM style rotates adjacent pairs (2i, 2i+1) (llama); NEOX style
// rotates (i, i + n_rot/2) (qwen3, qwen3moe). Dimensions past n_rot pass through unchanged.

#include <cstdint>
#include <vector>

namespace strata::ops {

enum class RopeStyle { norm, neox };

// YaRN context extension (gpt-oss): low-frequency pairs are interpolated by 1/factor,
// high-frequency pairs kept, a linear ramp between the pair indices where the wavelength crosses
// original_context / beta_fast and original_context / beta_slow; cos and sin are scaled by
// 1 + 0.1 ln(factor) (the attention factor). factor 0: plain RoPE.
struct YarnScaling {
  float factor = 0;
  int64_t original_context = 0;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

class Rope {
 public:
  Rope(RopeStyle style, int64_t head_dim, int64_t n_rot, float freq_base, YarnScaling yarn = {});

  // Rotates one head vector of head_dim values in place for position `pos`.
  void apply(float* head, int64_t pos) const;
  // Rotates n_heads consecutive head vectors (stride head_dim) at the same position.
  void apply_heads(float* heads, int64_t n_heads, int64_t pos) const;
  // The same in two parts, so one position's angles serve several calls (a token's query and
  // key heads, and every layer of a step): cos and sin of each pair's angle (n_rot values, cos
  // then sin per pair), then the rotation with them. Cos and sin cost more than the rotations.
  void angles(int64_t pos, float* cos_sin) const;
  void apply_heads(float* heads, int64_t n_heads, const float* cos_sin) const;

  RopeStyle style() const { return style_; }
  int64_t n_rot() const { return n_rot_; }
  // The per-pair angle factors and the cos/sin scale (1 without YaRN), for backends that rotate
  // elsewhere and must agree to the bit.
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float magnitude() const { return magnitude_; }

 private:
  RopeStyle style_;
  int64_t head_dim_;
  int64_t n_rot_;
  std::vector<float> inv_freq_;  // [n_rot / 2]: base^(-2i / n_rot), YaRN-blended when scaled
  float magnitude_ = 1.0f;       // YaRN attention factor applied to cos and sin
};

}  // namespace strata::ops
