#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace strata::ops {

namespace {

// The rotary dimension index whose wavelength fits `rotations` times into the original context.
float yarn_corner(int64_t n_rot, int64_t original_context, float rotations, float base) {
  return static_cast<float>(n_rot) *
         std::log(static_cast<float>(original_context) / (rotations * 2.0f * 3.14159265358979f)) /
         (2.0f * std::log(base));
}

}  // namespace

Rope::Rope(RopeStyle style, int64_t head_dim, int64_t n_rot, float freq_base, YarnScaling yarn)
    : style_(style), head_dim_(head_dim), n_rot_(n_rot) {
  STRATA_CHECK(n_rot > 0 && n_rot % 2 == 0 && n_rot <= head_dim,
               "RoPE dimension count {} must be even and within the head size {}", n_rot, head_dim);
  STRATA_CHECK(freq_base > 0, "RoPE base must be positive, got {}", freq_base);
  inv_freq_.resize(static_cast<size_t>(n_rot / 2));
  // Progressive products as other GGUF engines compute them, so angles match to the last bit
  // that matters at long context.
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = 1.0f;
  for (auto& f : inv_freq_) {
    f = theta;
    theta *= theta_scale;
  }
  if (yarn.factor > 0) {
    STRATA_CHECK(yarn.factor >= 1 && yarn.original_context > 0,
                 "YaRN scaling factor {} must be >= 1 with a positive original context ({})",
                 yarn.factor, yarn.original_context);
    // Corners rounded outwards, as the GGUF engines do (the HF config's truncate flag aside).
    const float last = static_cast<float>(n_rot - 1);
    const float lo = std::max(
        0.0f, std::floor(yarn_corner(n_rot, yarn.original_context, yarn.beta_fast, freq_base)));
    const float hi = std::min(
        last, std::ceil(yarn_corner(n_rot, yarn.original_context, yarn.beta_slow, freq_base)));
    const float interpolate = 1.0f / yarn.factor;
    for (size_t i = 0; i < inv_freq_.size(); ++i) {
      const float y = (static_cast<float>(i) - lo) / std::max(0.001f, hi - lo);
      const float ramp = 1.0f - std::clamp(y, 0.0f, 1.0f);  // 1: keep, 0: interpolate
      inv_freq_[i] *= interpolate * (1.0f - ramp) + ramp;
    }
    magnitude_ = 1.0f + 0.1f * std::log(yarn.factor);
  }
}

void Rope::apply(float* head, int64_t pos) const {
  apply_heads(head, 1, pos);
}

void Rope::apply_heads(float* heads, int64_t n_heads, int64_t pos) const {
  thread_local std::vector<float> cos_sin;
  cos_sin.resize(static_cast<size_t>(n_rot_));
  angles(pos, cos_sin.data());
  apply_heads(heads, n_heads, cos_sin.data());
}

void Rope::angles(int64_t pos, float* cos_sin) const {
  const int64_t half = n_rot_ / 2;
  const float p = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const float angle = p * inv_freq_[static_cast<size_t>(i)];
    cos_sin[2 * i] = std::cos(angle) * magnitude_;
    cos_sin[2 * i + 1] = std::sin(angle) * magnitude_;
  }
}

void Rope::apply_heads(float* heads, int64_t n_heads, const float* cos_sin) const {
  const int64_t half = n_rot_ / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = heads + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const int64_t a = style_ == RopeStyle::neox ? i : 2 * i;
      const int64_t b = style_ == RopeStyle::neox ? i + half : 2 * i + 1;
      const float x0 = head[a], x1 = head[b];
      head[a] = x0 * c - x1 * s;
      head[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace strata::ops
