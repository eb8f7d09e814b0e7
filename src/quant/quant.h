#pragma once
// Quantization formats: one traits table maps a GGUF type to its block geometry, its activation
// partner type and its kernels. Kernels exist per instruction set (scalar reference, AVX2,
// AVX-512/VNNI); the table resolves each type to the best one this CPU runs.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace strata::quant {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };
constexpr int kIsaCount = 3;
std::string_view isa_name(Isa isa);

// n is the element count of the row; a multiple of the type's block size.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// Dot product of a weight row (this type) with an activation row already in the partner type.
using VecDotFn = float (*)(int64_t n, const void* weights, const void* activations);

// Dot products of one weight row with n_act activation rows (1..kMaxMultiDot; row j at
// activations + j * act_stride bytes): out[j] = w . a_j. Decoding the weight blocks once for
// several tokens is what makes batched prompt processing compute-efficient.
constexpr int kMaxMultiDot = 8;
using VecDotMultiFn = void (*)(int64_t n, const void* weights, const void* activations,
                               int64_t act_stride, int n_act, float* out);

// Dot products of `rows` weight rows (row r at weights + r * row_stride bytes) with one activation
// row: out[r] = w_r . a, equal bit for bit to vec_dot of each row (decode's GEMV, where decoding
// the activation once for all rows pays).
using GemvFn = void (*)(int64_t n, const void* weights, int64_t row_stride, int64_t rows,
                        const void* activations, float* out);

// Products of a block of weight rows with many activation rows (prompt processing):
// out[c * out_stride + r] = w_r . a_c for r < n_rows, c < n_cols, with w_r at
// weights + r * w_stride and a_c (partner type) at act[c]. The rows are repacked into interleaved
// tiles first, which pays off only with enough columns (see ops/matmul.cpp).
using GemmFn = void (*)(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                        const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);

// The same products on rows packed into the GEMM's tiles once, ahead of time (weights that stay
// in cache are used many times: repacking them at every product costs about one token's worth).
// Tile t holds rows [t * rows, t * rows + rows) (a short last tile repeats a row) in bytes(n)
// bytes; gemm takes a pointer to the first tile of its rows and stores only n_rows rows.
struct PackedTileKernels {
  int64_t rows = 0;                       // weight rows per tile
  int64_t (*bytes)(int64_t n) = nullptr;  // bytes of one tile of rows of n values
  void (*pack)(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
               uint8_t* tiles) = nullptr;  // tiles of n_rows rows, 64-byte aligned
  void (*gemm)(int64_t n, const uint8_t* tiles, int64_t n_rows, const uint8_t* const* act,
               int64_t n_cols, float* out, int64_t out_stride) = nullptr;
};

struct TypeKernels {
  DequantizeRowFn dequantize_row = nullptr;
  QuantizeRowFn quantize_row =
      nullptr;  // reference quantizer for weights; fast one for activations
  VecDotFn vec_dot = nullptr;
  VecDotMultiFn vec_dot_multi = nullptr;  // optional: null means "loop over vec_dot"
  GemvFn gemv = nullptr;                  // optional: null means "loop over vec_dot"
  GemmFn gemm = nullptr;                  // optional: null means "use vec_dot_multi"
  PackedTileKernels packed{};             // with gemm: the same on tiles packed ahead
  // Optional, with gemm: the same products on tiles that keep the codes at the format's width
  // (about the bytes of the rows, not 1.6-1.9x), for matrices streamed from RAM. Any number of
  // columns, but built for few: decode and short verify steps. The tiles need no alignment.
  PackedTileKernels compact{};
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;
  int64_t block_elems;
  int64_t block_bytes;
  GgmlType activation_type;  // the partner format vec_dot expects activations in
  TypeKernels kernels;       // best for this CPU
  Isa vec_dot_isa;           // which instruction set `kernels.vec_dot` was built for
};

// True when strata can compute with tensors of this type.
bool is_supported(GgmlType type);
// Throws strata::Error naming the type and listing the supported ones when unsupported.
const TypeTraits& traits(GgmlType type);
std::vector<GgmlType> supported_types();

// Highest instruction-set level this CPU runs, and all levels it runs (scalar first).
Isa best_isa();
std::vector<Isa> available_isas();

// Kernels built for exactly this instruction set (entries are null where that level has no
// specialised kernel). For tests and benchmarks that compare levels.
TypeKernels kernels_exact(GgmlType type, Isa isa);
// Kernels as dispatched at this level: a missing entry falls back to the next lower level.
TypeKernels kernels_at(GgmlType type, Isa isa);

// Quantizes one row of n values of `type`, the squared error of each value weighted by
// weights[i] (an importance matrix's mean squares of the column: `strata quantize --imatrix`),
// with the scalar search (the same bytes on every CPU; null weights: the unweighted quantizer's
// bytes, for the legacy types the reference quantizer's). The types has_weighted_search names
// (K-quants, IQ4_NL, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1); false, and nothing written, for the others.
bool has_weighted_search(GgmlType type);
bool quantize_row_weighted(GgmlType type, const float* src, void* dst, int64_t n,
                           const float* weights);

// Bytes of one row of n elements of `type`.
int64_t row_bytes(GgmlType type, int64_t n);

}  // namespace strata::quant
