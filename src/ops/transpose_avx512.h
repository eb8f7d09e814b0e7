#pragma once
// In-register transpose of a 16 x 16 tile of dwords (AVX-512 F): r[m] lane l becomes r[l] lane m.
// Internal linkage on purpose: included by files built without AVX-512 flags, each function
// carries its own target attribute and is only called where the CPU has AVX-512.

#include <immintrin.h>

namespace strata::ops {
namespace {

// GCC 12's own avx512fintrin.h trips -Wuninitialized (_mm512_undefined_*; GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

__attribute__((target("avx512f"))) inline void transpose16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  __m512i u[16];
  for (int g = 0; g < 4; ++g) {
    u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xee);
    r[e] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + e] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    r[8 + e] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

// The same for floats (the shuffles move bits, whatever they mean).
__attribute__((target("avx512f"))) inline void transpose16x16(__m512 r[16]) {
  __m512i x[16];
  for (int i = 0; i < 16; ++i) x[i] = _mm512_castps_si512(r[i]);
  transpose16x16(x);
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(x[i]);
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace strata::ops
