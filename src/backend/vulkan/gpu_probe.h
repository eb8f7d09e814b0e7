#pragma once
// The planner's view of the machine's Vulkan GPUs: name, VRAM total and free (the memory
// budget), VRAM read bandwidth measured by a kernel and host-to-device upload bandwidth measured
// by a timed staged copy. Measurements are cached in hardware.json with their date and driver,
// like the RAM probe, and taken again when the driver changes or on --remeasure.

#include <string>
#include <vector>

#include "plan/hardware.h"

namespace strata::vk {

// `devices`: what --device names ("auto": the usable non-CPU devices; "none": no GPU; "vk0,vk1").
// Throws strata::Error for a named device that does not exist or cannot be used; with "auto" a
// missing loader or driver means no GPUs.
std::vector<plan::GpuInfo> probe_vulkan_gpus(const std::string& devices,
                                             const plan::ProbeOptions& options);

}  // namespace strata::vk
