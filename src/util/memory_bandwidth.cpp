#include "util/memory_bandwidth.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/cpu_features.h"
#include "util/error.h"

namespace strata {
namespace {

__attribute__((target("avx2"))) uint64_t read_slice_avx2(const uint8_t* p, int64_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 128 <= bytes; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

uint64_t read_slice_scalar(const uint8_t* p, int64_t bytes) {
  uint64_t a = 0, b = 0;
  const auto* q = reinterpret_cast<const uint64_t*>(p);
  for (int64_t i = 0; i + 1 < bytes / 8; i += 2) {
    a ^= q[i];
    b ^= q[i + 1];
  }
  return a ^ b;
}

}  // namespace

BandwidthMeasurement measure_read_bandwidth(ThreadPool& pool, int64_t buffer_bytes,
                                            int repetitions) {
  STRATA_CHECK(buffer_bytes >= (int64_t{1} << 20), "bandwidth buffer too small: {}", buffer_bytes);
  void* raw = nullptr;
  if (::posix_memalign(&raw, 2 << 20, static_cast<size_t>(buffer_bytes)) != 0) {
    fail("cannot allocate {} bytes to measure memory bandwidth", buffer_bytes);
  }
  std::unique_ptr<uint8_t, decltype(&std::free)> buffer(static_cast<uint8_t*>(raw), &std::free);
  ::madvise(raw, static_cast<size_t>(buffer_bytes), MADV_HUGEPAGE);
  const int threads = pool.size();
  // First touch from the threads that read it (NUMA locality), with non-zero data.
  pool.run_on_all([&](int t) {
    const auto [b, e] = split_range(buffer_bytes / 4096, threads, t);
    std::memset(buffer.get() + b * 4096, 0x5a, static_cast<size_t>((e - b) * 4096));
  });
  const bool avx2 = cpu_features().avx2;
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.run_on_all([&](int t) {
      const auto [b, e] = split_range(buffer_bytes / 4096, threads, t);
      const uint8_t* p = buffer.get() + b * 4096;
      const int64_t n = (e - b) * 4096;
      sink.fetch_xor(avx2 ? read_slice_avx2(p, n) : read_slice_scalar(p, n),
                     std::memory_order_relaxed);
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(buffer_bytes) / seconds / 1e9);
  }
  if (sink.load() == 0x1234) best += 0;  // keep the reads observable
  return {best, buffer_bytes, threads};
}

}  // namespace strata
