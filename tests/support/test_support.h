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

}  // namespace strata::test
