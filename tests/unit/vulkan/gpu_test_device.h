#pragma once
// The Vulkan device the GPU tests run on: $STRATA_TEST_DEVICE (e.g. vk1), else the first usable
// device, which on CI machines is lavapipe (Mesa's CPU driver). No device is a test failure,
// never a skip: the GPU path must be covered wherever the suite runs.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/instance.h"
#include "util/error.h"

namespace strata::vk::test {

inline int test_device_index() {
  if (const char* name = std::getenv("STRATA_TEST_DEVICE"); name && *name) {
    return parse_device_list(name).at(0);
  }
  for (const DeviceInfo& d : Instance::get().devices())
    if (d.usable()) return d.index;
  throw Error(
      "no usable Vulkan device for the GPU tests (install mesa-vulkan-drivers for lavapipe)");
}

// One device for the whole test binary (creating pipelines is the slow part on lavapipe).
inline std::shared_ptr<Device> shared_test_device() {
  static std::shared_ptr<Device> device = [] {
    const int index = test_device_index();
    return std::make_shared<Device>(Instance::get().devices()[static_cast<size_t>(index)]);
  }();
  return device;
}
// The same GPU opened a second time: a second logical device (its own memory, queue and
// kernels), as --device vk0,vk0 makes, for the multi-GPU tests.
inline std::shared_ptr<Device> second_test_device() {
  static std::shared_ptr<Device> device =
      std::make_shared<Device>(shared_test_device()->info(), /*opening=*/1);
  return device;
}
inline Device& test_device() {
  return *shared_test_device();
}

template <typename T>
Buffer upload(Device& device, const std::vector<T>& data, const char* what = "test data") {
  Buffer b =
      device.allocate(std::max<uint64_t>(data.size() * sizeof(T), 16), MemoryKind::device, what);
  if (!data.empty()) device.upload(b, 0, data.data(), data.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> download(Device& device, const Buffer& b, size_t count) {
  std::vector<T> out(count);
  device.download(b, 0, out.data(), count * sizeof(T));
  return out;
}

// Runs `record(ops)` as one command list and waits.
template <typename Fn>
void run(Device& device, Fn record) {
  CommandList cmd(device);
  cmd.begin();
  record(cmd);
  cmd.end();
  cmd.submit_and_wait();
}

}  // namespace strata::vk::test
