#pragma once
// How fast a device reads its own memory (the roofline of decode, which streams the weights
// once per token) and how fast the host uploads to it (what placing weights and moving experts
// costs). Measured, not taken from the spec sheet: drivers and clocks differ.

#include <cstdint>

#include "backend/vulkan/device.h"

namespace strata::vk {

struct GpuBandwidth {
  double read_gbps = 0;    // a kernel streaming a device-local buffer
  double upload_gbps = 0;  // host memory -> device-local buffer through the staging ring
  uint64_t bytes = 0;      // size of the buffer measured
};

// Uses a buffer of at most max_bytes (less when the device's allocation limit or free memory is
// smaller); the best of a few timed runs of each kind, each long enough to hide submit latency.
GpuBandwidth measure_gpu_bandwidth(Device& device, uint64_t max_bytes = 256ull << 20);

}  // namespace strata::vk
