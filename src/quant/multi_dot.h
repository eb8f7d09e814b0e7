#pragma once
// Family-private helper of the multi-row dot products (vec_dot_multi): turns a kernel templated on
// the column count into a VecDotMultiFn. A kernel is a class with
//   template <int N> static void run(int64_t n, const void* weights, const uint8_t* act,
//                                    int64_t act_stride, float* out);
// that decodes each weight block once and dots it with N activation rows (row j at
// act + j * act_stride). Column counts above kMaxColumns (at most kMaxMultiDot; lower for kernels
// whose accumulators for 8 columns would not fit in registers) are split into groups; a column's
// result does not depend on the group it is computed in.
//
// Internal linkage on purpose (see kquants_common.h): this header is compiled into files built for
// different instruction sets.

#include <cstdint>
#include <vector>

#include "quant/quant.h"

namespace strata::quant {
namespace {

template <typename Kernel, int kMaxColumns = kMaxMultiDot>
void vec_dot_multi_of(int64_t n, const void* weights, const void* activations, int64_t act_stride,
                      int n_act, float* out) {
  static_assert(kMaxColumns >= 1 && kMaxColumns <= kMaxMultiDot);
  const auto* act = static_cast<const uint8_t*>(activations);
  while (n_act > 0) {
    // Equal groups: 8 columns at most 4 per group as 4 + 4, 7 as 4 + 3.
    const int groups = (n_act + kMaxColumns - 1) / kMaxColumns;
    const int count = (n_act + groups - 1) / groups;
    switch (count) {
      case 1:
        Kernel::template run<1>(n, weights, act, act_stride, out);
        break;
      case 2:
        Kernel::template run<2>(n, weights, act, act_stride, out);
        break;
      case 3:
        Kernel::template run<3>(n, weights, act, act_stride, out);
        break;
      case 4:
        Kernel::template run<4>(n, weights, act, act_stride, out);
        break;
      case 5:
        Kernel::template run<5>(n, weights, act, act_stride, out);
        break;
      case 6:
        Kernel::template run<6>(n, weights, act, act_stride, out);
        break;
      case 7:
        Kernel::template run<7>(n, weights, act, act_stride, out);
        break;
      default:
        Kernel::template run<8>(n, weights, act, act_stride, out);
        break;
    }
    static_assert(kMaxMultiDot == 8);
    act += count * act_stride;
    out += count;
    n_act -= count;
  }
}

// The single-row dot product of such a kernel (vec_dot): its one-column case, so that vec_dot and
// vec_dot_multi agree bit for bit.
template <typename Kernel>
float vec_dot_of(int64_t n, const void* weights, const void* activations) {
  float out;
  Kernel::template run<1>(n, weights, static_cast<const uint8_t*>(activations), 0, &out);
  return out;
}

// Pointers to the N activation rows, as blocks of type B.
template <typename B, int N>
struct Columns {
  const B* row[N];
  Columns(const uint8_t* act, int64_t stride) {
    for (int j = 0; j < N; ++j) row[j] = reinterpret_cast<const B*>(act + j * stride);
  }
  const B* operator[](int j) const { return row[j]; }
};

// Where decode's GEMVs (TypeKernels::gemv) lay the activation row out, once per block of rows: n
// elements of this thread's buffer of T, kept between calls. Each kernel lays out its own T.
template <typename T>
T* gemv_scratch(int64_t n) {
  static thread_local std::vector<T> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

}  // namespace
}  // namespace strata::quant
