#pragma once
// Rotary position embeddings. NORM style rotates adjacent pairs (2i, 2i+1) (llama); NEOX style
// rotates (i, i + n_rot/2) (qwen3, qwen3moe). Dimensions past n_rot pass through unchanged.

#include <cstdint>
#include <vector>

namespace strata::ops {

enum class RopeStyle { norm, neox };

class Rope {
 public:
  Rope(RopeStyle style, int64_t head_dim, int64_t n_rot, float freq_base);

  // Rotates one head vector of head_dim values in place for position `pos`.
  void apply(float* head, int64_t pos) const;
  // Rotates n_heads consecutive head vectors (stride head_dim) at the same position.
  void apply_heads(float* heads, int64_t n_heads, int64_t pos) const;

  RopeStyle style() const { return style_; }
  int64_t n_rot() const { return n_rot_; }

 private:
  RopeStyle style_;
  int64_t head_dim_;
  int64_t n_rot_;
  std::vector<float> inv_freq_;  // [n_rot / 2]: base^(-2i / n_rot)
};

}  // namespace strata::ops
