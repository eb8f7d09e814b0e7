#include "support/test_support.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <mutex>
#include <system_error>

#include "quant/quant.h"

namespace strata::test {

std::filesystem::path oracle_dir() {
  const char* env = std::getenv("STRATA_ORACLE_DIR");
  std::filesystem::path dir = env ? env : STRATA_ORACLE_DIR;
  if (!std::filesystem::is_directory(dir / "models")) {
    ADD_FAILURE() << "oracle directory not found at " << dir
                  << " (expected ../shared/oracle beside the checkout, or set STRATA_ORACLE_DIR)";
  }
  return dir;
}

std::filesystem::path test_data_dir() {
  return STRATA_TEST_DATA_DIR;
}

std::filesystem::path temp_dir() {
  static std::filesystem::path root = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "strata-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) std::abort();
    std::filesystem::path dir = pattern;
    static struct Cleanup {
      std::filesystem::path dir;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } cleanup{dir};
    return dir;
  }();
  static std::mutex mutex;
  static int counter = 0;
  std::lock_guard lock(mutex);
  auto dir = root / std::to_string(counter++);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

double nmse(const float* a, const float* b, size_t n) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    err += d * d;
    ref += static_cast<double>(b[i]) * b[i];
  }
  return ref > 0 ? err / ref : err;
}

bool cpu_kernels_drift() {
  return quant::best_isa() == quant::Isa::avx2;
}

bool compact_tiles_available() {
  return quant::traits(GgmlType::Q8_0).kernels.compact.pack != nullptr;
}

}  // namespace strata::test
