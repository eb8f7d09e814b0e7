#include "backend/vulkan/bandwidth_probe.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <vector>

#include "util/error.h"

namespace strata::vk {
namespace {

double seconds_of(const auto& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

constexpr uint32_t kGroups = 2048;  // enough workgroups to fill any GPU; grid-stride loop

}  // namespace

GpuBandwidth measure_gpu_bandwidth(Device& device, uint64_t max_bytes) {
  const DeviceInfo& info = device.info();
  uint64_t bytes = max_bytes;
  if (info.max_allocation_bytes) bytes = std::min(bytes, info.max_allocation_bytes);
  if (info.device_local_budget) bytes = std::min(bytes, info.device_local_budget / 4);
  bytes = std::clamp<uint64_t>(bytes / 16 * 16, 1 << 20, 16ull << 30);
  GpuBandwidth out;
  out.bytes = bytes;

  // The probe's buffers are freed before the model's next step: they are not part of the room
  // --vram-budget gives the model (a smaller card reproduced on this one), so the cap is lifted
  // while they exist.
  struct RestoreLimit {
    Device& device;
    uint64_t limit;
    ~RestoreLimit() { device.set_memory_limit(limit); }
  } restore{device, device.memory_limit()};
  device.set_memory_limit(0);
  Buffer data = device.allocate(bytes, MemoryKind::device, "the bandwidth probe's buffer");
  Buffer sums = device.allocate(kGroups * 4, MemoryKind::device, "the bandwidth probe's sums");
  std::vector<uint8_t> host(bytes, 1);

  // Upload: the staging ring's real rate (what weights and expert moves get).
  double best = 1e30;
  for (int r = 0; r < 3; ++r)
    best = std::min(best, seconds_of([&] { device.upload(data, 0, host.data(), bytes); }));
  out.upload_gbps = static_cast<double>(bytes) / best / 1e9;

  // Read: `passes` kernels in one submission, enough for the run to last >= ~50 ms.
  struct {
    uint64_t x, out;
    uint32_t n, pad = 0;
  } push{data.address(), sums.address(), static_cast<uint32_t>(bytes / 16)};
  CommandList cmd(device);
  const auto record = [&](int passes) {
    cmd.begin();
    for (int p = 0; p < passes; ++p) cmd.dispatch(device.kernel("read_bandwidth"), push, kGroups);
    cmd.end();
  };
  record(1);
  const double once = seconds_of([&] { cmd.submit_and_wait(); });  // also warms up
  const int passes = static_cast<int>(std::clamp(0.05 / std::max(once, 1e-6), 2.0, 200.0));
  record(passes);
  best = 1e30;
  for (int r = 0; r < 3; ++r) best = std::min(best, seconds_of([&] { cmd.submit_and_wait(); }));
  out.read_gbps = static_cast<double>(bytes) * passes / best / 1e9;
  return out;
}

}  // namespace strata::vk
