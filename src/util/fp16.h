#pragma once
// IEEE half (f16) and bfloat16 conversions, bit-exact and portable (no F16C needed).

#include <cstdint>
#include <cstring>

namespace strata {

using f16_bits = uint16_t;
using bf16_bits = uint16_t;

// Table of all 65536 half values as float, filled once; the hot scalar paths use it.
extern const float* const kF16ToF32Table;

float f16_to_f32_exact(f16_bits h);  // computed by bit manipulation (also fills the table)
f16_bits f32_to_f16(float f);        // round to nearest even, inf/nan preserved

inline float f16_to_f32(f16_bits h) {
  return kF16ToF32Table[h];
}

inline float bf16_to_f32(bf16_bits b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline bf16_bits f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<bf16_bits>((bits >> 16) | 64);  // quiet nan
  bits += 0x7fffu + ((bits >> 16) & 1u);               // round to nearest even
  return static_cast<bf16_bits>(bits >> 16);
}

}  // namespace strata
