#pragma once
// The Vulkan instance and what it says about every device it sees (strata devices).

#include <cstdint>
#include <string>
#include <vector>

#include "backend/vulkan/vulkan_api.h"

namespace strata::vk {

struct DeviceInfo {
  int index = 0;  // vk<index>
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  std::string name;
  std::string vendor;  // NVIDIA, AMD, Intel, Mesa (software), ... from the vendor id
  uint32_t vendor_id = 0, device_id = 0;
  std::string driver;  // driver name and info string
  std::string driver_version;
  std::string api_version;  // e.g. 1.3.230
  std::string uuid;         // deviceUUID as NVML writes a GPU's: GPU-xxxxxxxx-xxxx-xxxx-xxxx-...
  std::string type;         // discrete, integrated, virtual, cpu, other
  bool is_cpu = false;      // a software device (lavapipe): only used when named
  uint64_t device_local_bytes = 0;
  uint64_t device_local_budget = 0;  // VK_EXT_memory_budget when present, else the heap size
  bool has_memory_budget = false;
  uint32_t subgroup_size = 0;
  bool fp16 = false, int8 = false, integer_dot_product = false, cooperative_matrix = false;
  uint64_t max_storage_buffer_range = 0;
  uint64_t max_allocation_bytes = 0;
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  float timestamp_period_ns = 0;  // 0: no compute timestamps
  // What strata's kernels require; `missing` lists what this device lacks (empty: usable).
  std::vector<std::string> missing;
  bool usable() const { return missing.empty(); }
};

class Instance {
 public:
  // The process-wide instance, created on first use. Throws strata::Error when there is no
  // Vulkan loader or no instance can be created.
  static Instance& get();

  VkInstance handle() const { return instance_; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }

  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance();

 private:
  Instance();
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<DeviceInfo> devices_;
};

// Parses --device: "none" -> empty; "vk0,vk1" -> {0, 1}; "auto" -> the usable non-CPU devices
// (lavapipe is never chosen unless named). Throws naming the bad item or the missing device.
std::vector<int> parse_device_list(const std::string& text);

}  // namespace strata::vk
