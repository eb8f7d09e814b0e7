#pragma once
// Family-private helpers of the legacy formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1).
//
// This header is included by files compiled for different instruction sets. Everything in it has
// internal linkage (anonymous namespace): an inline function with external linkage would be
// emitted once per file, each copy built with that file's flags, and the linker could keep an
// AVX-512 copy for the scalar code.

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace strata::quant {
namespace {

// The 32 high bits of a Q5 block: bit j is bit 4 of element j (qh is little-endian).
inline uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof v);
  return v;
}

// Q8_0 / Q8_1 quantization of one block of 32 floats: d = max|x| / 127, q = round(x * (1 / d))
// with ties away from zero (C roundf, as the other GGUF tools: their Q8_0 files are reproduced bit
// for bit). Every level computes exactly this, so activation blocks are identical bytes on every
// CPU.
inline float q8_block_scale(float amax) {
  return amax / 127.0f;
}
inline float q8_block_inverse(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// What quantizing one Q8 block yields besides its codes: the unrounded d, d as stored (f16) and
// the sum of the codes. Returned by value, so the f16 is written into the (possibly unaligned)
// block by plain assignment, never through a reference to the field.
struct Q8BlockScale {
  float d;
  f16_bits d16;
  int sum;
};

}  // namespace
}  // namespace strata::quant
