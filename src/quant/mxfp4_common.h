#pragma once
// Family-private helpers of MXFP4 (blocks of 32 4-bit E2M1 values with one E8M0 exponent byte,
// activations in Q8_0).
//
// Internal linkage on purpose (see legacy_common.h): this header is compiled into files built for
// different instruction sets.
//
// Blocks are 17 bytes, so the blocks of a row start at any address, and the activation rows of a
// multi-row dot product may too. Every field is therefore read through a byte pointer (memcpy or
// unaligned loads), never through a reference to a block struct.

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace strata::quant {
namespace {

constexpr int64_t kMxfp4Bytes = sizeof(BlockMXFP4);  // 17: e, then 16 bytes of nibbles
constexpr int64_t kMxfp4QsOffset = 1;
constexpr int64_t kQ8_0Bytes = sizeof(BlockQ8_0);  // 34: f16 d, then 32 int8
constexpr int64_t kQ8_0QsOffset = 2;

// 2^(e - 128) exactly: the E8M0 scale halved, because kMxfp4Values holds twice the E2M1 values.
// e >= 2 is the normal float with biased exponent e - 1; e = 0 and 1 are the subnormals 2^-128 and
// 2^-127 (2^21 and 2^22 units of 2^-149). e = 255 (NaN in E8M0) decodes as 2^127.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The f16 scale of the Q8_0 block at p.
inline f16_bits load_q8_0_d(const uint8_t* p) {
  f16_bits d;
  std::memcpy(&d, p, sizeof d);
  return d;
}

}  // namespace
}  // namespace strata::quant
