#include "util/fp16.h"

#include <vector>

namespace strata {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

const float* build_table() {
  static std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32_exact(static_cast<f16_bits>(h));
    return t;
  }();
  return table.data();
}

}  // namespace

const float* const kF16ToF32Table = build_table();

float f16_to_f32_exact(f16_bits h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return from_bits(sign | 0x7f800000u | (mantissa << 13));  // inf / nan
  if (exponent == 0) {
    if (mantissa == 0) return from_bits(sign);  // +-0
    // Subnormal: value = mantissa * 2^-24.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

f16_bits f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<f16_bits>(sign | 0x7e00u);   // nan
  if (abs >= 0x477ff000u) return static_cast<f16_bits>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: scale so the integer part is the f16 mantissa; the FPU rounds
    // to nearest even when adding the magic constant 0.5 (2^-1 in f32 ulp terms of 2^-24 units).
    const float magnitude = from_bits(abs);
    const float scaled = magnitude * 16777216.0f;  // in units of 2^-24
    // nearbyint with round-half-even via the 2^23 trick
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return static_cast<f16_bits>(sign | static_cast<uint32_t>(rounded));
  }
  // Normal: rebias exponent, round mantissa to 10 bits, nearest even.
  uint32_t value = abs - (112u << 23);
  value += 0xfffu + ((value >> 13) & 1u);
  return static_cast<f16_bits>(sign | (value >> 13));
}

}  // namespace strata
