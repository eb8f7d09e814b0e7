#pragma once
// Shared test helpers.

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace strata::test {

// ../shared/oracle beside the checkout (or $STRATA_ORACLE_DIR). Fails the calling test with a
// clear message when it is missing: oracle checks are never skipped silently.
std::filesystem::path oracle_dir();
// tests/data in the source tree (small files committed with the tests).
std::filesystem::path test_data_dir();
// A fresh empty directory for one test, removed at exit of the test process.
std::filesystem::path temp_dir();

// Deterministic random data for kernel tests.
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);

// Normalized mean squared error sum((a-b)^2) / sum(b^2).
double nmse(const float* a, const float* b, size_t n);

// Whether the CPU computes with its AVX2 kernels, which accumulate dot products in float: the
// scalar and AVX-512 levels track the reference engine to ~1e-13 on a first row, AVX2 to ~1e-6,
// and through activation quantization such 1e-7 differences flip a few more router near-ties
// (measured on an AVX2-only AMD EPYC: qwen3moe Q4_1 first row 3.6e-6, IQ4_XS NMSE 2.2e-3 with
// one flipped row, qwen35moe Q4_K_M p200 six flipped rows, NMSE 3.1e-3). The oracle tests then
// allow those drifts; on the same machine the scalar level is held to the strict bounds (ctest
// oracle.cpu_scalar_kernels, STRATA_ISA=scalar).
bool cpu_kernels_drift();

// Whether the kernels this CPU runs have compact tiles (quant::TypeKernels::compact: AVX-512), so
// that a model loaded into RAM rewrites its matrices into them (ops/compact_tiles.h).
bool compact_tiles_available();

}  // namespace strata::test
