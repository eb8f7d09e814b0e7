// Per weight type (one -DTYPE_<NAME> per build): BLOCK_ELEMS, BLOCK_BYTES and
//   void dequant_group(uint64_t block, uint g, precise out float w[32])
// which writes elements [32 g, 32 g + 32) of the block at `block` (address of its first byte)
// in logical order. The layouts are GGUF's (see src/quant/*_scalar.cpp, the reference).

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
const float kvalues_iq4nl[16] = float[16](-127., -104., -83., -65., -49., -35., -22., -10., 1.,
                                          13., 25., 38., 53., 69., 89., 113.);
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// 6-bit scale and min of sub-block j from the 12 packed bytes at `q`.
void scale_min_k4(uint64_t q, uint j, out float sc, out float mn) {
  if (j < 4u) {
    sc = float(byte_at(q, j) & 63u);
    mn = float(byte_at(q, j + 4u) & 63u);
  } else {
    sc = float((byte_at(q, j + 4u) & 0xfu) | ((byte_at(q, j - 4u) >> 6) << 4));
    mn = float((byte_at(q, j + 4u) >> 4) | ((byte_at(q, j) >> 6) << 4));
  }
}
#endif

#if defined(TYPE_F32)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 128u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  for (uint l = 0u; l < 32u; ++l) w[l] = Floats(b).v[l];
}
#elif defined(TYPE_F16)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 64u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  for (uint l = 0u; l < 32u; ++l) w[l] = f16_at(b, 2u * l);
}
#elif defined(TYPE_BF16)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 64u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  for (uint l = 0u; l < 32u; ++l) w[l] = uintBitsToFloat(u16_at(b, 2u * l) << 16);
}
#elif defined(TYPE_Q8_0)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 34u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 0u);
  for (uint l = 0u; l < 32u; ++l) w[l] = d * float(sbyte_at(b, 2u + l));
}
#elif defined(TYPE_Q4_0) || defined(TYPE_IQ4_NL)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 18u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 0u);
  for (uint l = 0u; l < 16u; ++l) {
    const uint q = byte_at(b, 2u + l);
#if defined(TYPE_Q4_0)
    w[l] = d * (float(q & 0xfu) - 8.0);
    w[l + 16u] = d * (float(q >> 4) - 8.0);
#else
    w[l] = d * kvalues_iq4nl[q & 0xfu];
    w[l + 16u] = d * kvalues_iq4nl[q >> 4];
#endif
  }
}
#elif defined(TYPE_Q4_1)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 20u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 0u), m = f16_at(b, 2u);
  for (uint l = 0u; l < 16u; ++l) {
    const uint q = byte_at(b, 4u + l);
    w[l] = d * float(q & 0xfu) + m;
    w[l + 16u] = d * float(q >> 4) + m;
  }
}
#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
#define BLOCK_ELEMS 32u
#if defined(TYPE_Q5_0)
#define BLOCK_BYTES 22u
#define Q5_HEAD 2u
#else
#define BLOCK_BYTES 24u
#define Q5_HEAD 4u
#endif
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 0u);
  const uint qh = u32_at(b, Q5_HEAD);
  for (uint l = 0u; l < 16u; ++l) {
    const uint q = byte_at(b, Q5_HEAD + 4u + l);
    const uint lo = (q & 0xfu) | (((qh >> l) & 1u) << 4);
    const uint hi = (q >> 4) | (((qh >> (l + 16u)) & 1u) << 4);
#if defined(TYPE_Q5_0)
    w[l] = d * (float(lo) - 16.0);
    w[l + 16u] = d * (float(hi) - 16.0);
#else
    const float m = f16_at(b, 2u);
    w[l] = d * float(lo) + m;
    w[l + 16u] = d * float(hi) + m;
#endif
  }
}
#elif defined(TYPE_Q2_K)
// scales[16] qs[64] d dmin
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 84u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 80u), dmin = f16_at(b, 82u);
  const uint n = g / 4u, j = g % 4u;
  for (uint half_ = 0u; half_ < 2u; ++half_) {
    const uint sc = byte_at(b, n * 8u + j * 2u + half_);
    const float dl = d * float(sc & 0xfu), ml = dmin * float(sc >> 4);
    for (uint l = 0u; l < 16u; ++l) {
      const uint q = byte_at(b, 16u + n * 32u + half_ * 16u + l);
      w[half_ * 16u + l] = dl * float((q >> (2u * j)) & 3u) - ml;
    }
  }
}
#elif defined(TYPE_Q3_K)
// hmask[32] qs[64] scales[12] d
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 110u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 108u);
  const uint n = g / 4u, j = g % 4u;
  for (uint half_ = 0u; half_ < 2u; ++half_) {
    const uint i = n * 8u + j * 2u + half_;  // which of the 16 six-bit scales
    const uint low = i < 8u ? byte_at(b, 96u + i) & 0xfu : byte_at(b, 96u + i - 8u) >> 4;
    const uint high = (byte_at(b, 96u + 8u + i % 4u) >> (2u * (i / 4u))) & 3u;
    const float dl = d * (float(low | (high << 4)) - 32.0);
    for (uint l = 0u; l < 16u; ++l) {
      const uint li = half_ * 16u + l;
      const uint q = (byte_at(b, 32u + n * 32u + li) >> (2u * j)) & 3u;
      const bool hbit = ((byte_at(b, li) >> (n * 4u + j)) & 1u) != 0u;
      w[li] = dl * (float(q) - (hbit ? 0.0 : 4.0));
    }
  }
}
#elif defined(TYPE_Q4_K)
// d dmin scales[12] qs[128]
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 144u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  float sc, mn;
  scale_min_k4(b + 4u, g, sc, mn);
  const float d = f16_at(b, 0u) * sc, m = f16_at(b, 2u) * mn;
  const uint shift = (g & 1u) * 4u;
  for (uint l = 0u; l < 32u; ++l) {
    w[l] = d * float((byte_at(b, 16u + (g / 2u) * 32u + l) >> shift) & 0xfu) - m;
  }
}
#elif defined(TYPE_Q5_K)
// d dmin scales[12] qh[32] qs[128]
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 176u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  float sc, mn;
  scale_min_k4(b + 4u, g, sc, mn);
  const float d = f16_at(b, 0u) * sc, m = f16_at(b, 2u) * mn;
  const uint shift = (g & 1u) * 4u;
  for (uint l = 0u; l < 32u; ++l) {
    const uint q = (byte_at(b, 48u + (g / 2u) * 32u + l) >> shift) & 0xfu;
    const uint h = (byte_at(b, 16u + l) >> g) & 1u;
    w[l] = d * float(q | (h << 4)) - m;
  }
}
#elif defined(TYPE_Q6_K)
// ql[128] qh[64] scales[16] (int8) d
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 210u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = f16_at(b, 208u);
  const uint n = g / 4u, r = g % 4u;
  for (uint l = 0u; l < 32u; ++l) {
    const uint lo = (byte_at(b, n * 64u + l + (r & 1u) * 32u) >> ((r / 2u) * 4u)) & 0xfu;
    const uint hi = (byte_at(b, 128u + n * 32u + l) >> (2u * r)) & 3u;
    const float sc = float(sbyte_at(b, 192u + n * 8u + l / 16u + 2u * r));
    w[l] = d * sc * (float(lo | (hi << 4)) - 32.0);
  }
}
#elif defined(TYPE_MXFP4)
// e (E8M0) qs[16]: value j = kvalues[nibble] * 2^(e - 128), low nibbles first (twice E2M1).
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 17u
const float kvalues_mxfp4[16] = float[16](0., 1., 2., 3., 4., 6., 8., 12., 0., -1., -2., -3., -4.,
                                          -6., -8., -12.);
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const float d = ldexp(1.0, int(byte_at(b, 0u)) - 128);
  for (uint l = 0u; l < 16u; ++l) {
    const uint q = byte_at(b, 1u + l);
    w[l] = d * kvalues_mxfp4[q & 0xfu];
    w[l + 16u] = d * kvalues_mxfp4[q >> 4];
  }
}
#elif defined(TYPE_IQ4_XS)
// d scales_h(u16) scales_l[4] qs[128]
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 136u
void dequant_group(uint64_t b, uint g, precise out float w[32]) {
  const uint scales_h = u16_at(b, 2u);
  const uint ls = ((byte_at(b, 4u + g / 2u) >> (4u * (g % 2u))) & 0xfu) |
                  (((scales_h >> (2u * g)) & 3u) << 4);
  const float dl = f16_at(b, 0u) * (float(ls) - 32.0);
  for (uint l = 0u; l < 16u; ++l) {
    const uint q = byte_at(b, 8u + g * 16u + l);
    w[l] = dl * kvalues_iq4nl[q & 0xfu];
    w[l + 16u] = dl * kvalues_iq4nl[q >> 4];
  }
}
#else
#error "quant_types.glsl: define one TYPE_<NAME>"
#endif
