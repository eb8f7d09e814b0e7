#pragma once
// Before strata plans for a GPU's free memory: a warning when other processes hold much of it,
// naming them where NVML knows the device.

#include "backend/vulkan/instance.h"

namespace strata::vk {

// Warns (once per device and process) when the device's budget is well below its size.
void warn_memory_in_use(const DeviceInfo& d);

}  // namespace strata::vk
