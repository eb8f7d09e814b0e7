#pragma once
// Block layouts of the GGUF quantization formats, bit-compatible with files written by other GGUF
// tools. Shapes in comments; QK = elements per block. All multi-byte fields are little-endian.
//
// Every block is declared with alignment 1: a row inside a GGUF file, a repacked tile, a column of
// a multi-row activation or a GPU staging buffer can start at any byte, so an fp16 or float field
// must never be assumed aligned. With alignment 1 every field access compiles to an unaligned
// load (the same instruction on x86, no cost) and is defined behaviour wherever the block lies.
// A pointer or reference to a multi-byte field would still be misaligned (GCC flags pointers with
// -Waddress-of-packed-member, not references; UBSan catches both): read and write fields by value.

#include <cstdint>

#include "util/fp16.h"

namespace strata::quant {

constexpr int kQK = 32;           // legacy and IQ4_NL block size
constexpr int kQKK = 256;         // K-quant super-block size
constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

#pragma pack(push, 1)

// value = (q - 8) * d
struct BlockQ4_0 {
  f16_bits d;
  uint8_t qs[kQK / 2];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
// value = q * d + m
struct BlockQ4_1 {
  f16_bits d;
  f16_bits m;
  uint8_t qs[kQK / 2];
};
// value = (q - 16) * d; bit 4 of element j is bit j of qh
struct BlockQ5_0 {
  f16_bits d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  f16_bits d;
  f16_bits m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// value = q * d
struct BlockQ8_0 {
  f16_bits d;
  int8_t qs[kQK];
};
// Activation partner of Q4_1 / Q5_1: s = d * sum(qs)
struct BlockQ8_1 {
  f16_bits d;
  f16_bits s;
  int8_t qs[kQK];
};

// 16 sub-blocks of 16; scales[i]: low nibble scale, high nibble min. value = d*sc*q - dmin*m
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];  // 2-bit quants
  f16_bits d;
  f16_bits dmin;
};
// 16 sub-blocks of 16, 6-bit signed scales (offset 32) packed in 12 bytes; high bit in hmask
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  f16_bits d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes
struct BlockQ4_K {
  f16_bits d;
  f16_bits dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
struct BlockQ5_K {
  f16_bits d;
  f16_bits dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16 with int8 scales; value = d * scale * (q - 32)
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  f16_bits d;
};
// Activation partner of the K-quants and IQ4_XS: float scale, bsums = sums of groups of 16
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

// Non-linear 4-bit: value = d * kIq4nlValues[q]
struct BlockIQ4_NL {
  f16_bits d;
  uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32 with 6-bit scales (offset 32): low 4 bits in scales_l, high 2 in scales_h
struct BlockIQ4_XS {
  f16_bits d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP microscaling FP4): 32 E2M1 elements sharing one E8M0 exponent byte.
// value = kMxfp4Values[q] * 2^(e - 128): the table holds twice the E2M1 values (0, 0.5, 1, 1.5,
// 2, 3, 4, 6), hence -128 rather than the E8M0 bias 127. Bit 3 of q is the sign. Rows of 17-byte
// blocks start at any address.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK / 2];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
#pragma pack(pop)
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(alignof(BlockQ4_0) == 1 && alignof(BlockQ8_0) == 1 && alignof(BlockQ2_K) == 1 &&
              alignof(BlockQ4_K) == 1 && alignof(BlockQ6_K) == 1 && alignof(BlockQ8_K) == 1 &&
              alignof(BlockIQ4_XS) == 1 && alignof(BlockMXFP4) == 1);

}  // namespace strata::quant
