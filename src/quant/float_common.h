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

}  // namespace
}  // namespace strata::quant
