#pragma once
// Family-private helpers of the float formats (F32, F16, BF16).
//
// Included by files compiled for different instruction sets: everything here has internal linkage
// (anonymous namespace), so no copy built with one file's flags can be picked for another file.

#include <cstdint>
#include <cstring>

namespace strata::quant {
namespace {

// Copies the last `count` elements of a row into a zero-filled buffer of one full vector step, so
// the vector code can finish a row of any length without reading past its end.
template <typename T, int kWidth>
struct TailBuffer {
  alignas(64) T values[kWidth] = {};
  TailBuffer(const T* src, int64_t count) {
    std::memcpy(values, src, static_cast<size_t>(count) * sizeof(T));
  }
};

// Dot products of one F32 weight row with N activation rows (vec_dot_multi), each weight vector
// loaded once for all of them (a router's product over a prompt's tokens), on the vectors of V:
//   Vec; kLanes; zero(); load(p); load_part(p, count) (the first count lanes, the rest 0);
//   mul(a, b); fmadd(a, b, c); sum(v) (the level's horizontal sum);
//   lead(w, n) (elements before the weight loads are aligned) and kLeadAccumulator.
// Every column keeps the level's single-row order: four accumulators over steps of 4 vectors,
// single vectors into the first, the lead and the tail partial vectors into their own, so that
// vec_dot (N = 1) and vec_dot_multi agree bit for bit.
template <typename V>
struct MultiF32 {
  template <int N>
  static void run(int64_t n, const void* weights, const uint8_t* act, int64_t act_stride,
                  float* out) {
    using Vec = typename V::Vec;
    constexpr int64_t kLanes = V::kLanes;
    const auto* w = static_cast<const float*>(weights);
    const float* a[N];
    for (int c = 0; c < N; ++c) a[c] = reinterpret_cast<const float*>(act + c * act_stride);
    Vec acc[N][4];
    for (int c = 0; c < N; ++c)
      for (int v = 0; v < 4; ++v) acc[c][v] = V::zero();
    int64_t i = V::lead(w, n);
    if (i > 0) {
      const Vec wv = V::load_part(w, i);
      for (int c = 0; c < N; ++c) acc[c][V::kLeadAccumulator] = V::mul(wv, V::load_part(a[c], i));
    }
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
      Vec wv[4];
      for (int v = 0; v < 4; ++v) wv[v] = V::load(w + i + kLanes * v);
      for (int c = 0; c < N; ++c)
        for (int v = 0; v < 4; ++v)
          acc[c][v] = V::fmadd(wv[v], V::load(a[c] + i + kLanes * v), acc[c][v]);
    }
    for (; i + kLanes <= n; i += kLanes) {
      const Vec wv = V::load(w + i);
      for (int c = 0; c < N; ++c) acc[c][0] = V::fmadd(wv, V::load(a[c] + i), acc[c][0]);
    }
    if (i < n) {
      const Vec wv = V::load_part(w + i, n - i);
      for (int c = 0; c < N; ++c)
        acc[c][1] = V::fmadd(wv, V::load_part(a[c] + i, n - i), acc[c][1]);
    }
    for (int c = 0; c < N; ++c)
      out[c] = V::sum(V::add(V::add(acc[c][0], acc[c][1]), V::add(acc[c][2], acc[c][3])));
  }
};

}  // namespace
}  // namespace strata::quant
