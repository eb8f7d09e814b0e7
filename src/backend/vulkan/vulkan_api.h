#pragma once
// The Vulkan entry points strata uses, loaded at run time from the system's loader
// (libvulkan.so.1) so the binary starts, and runs on the CPU, on machines without Vulkan.

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>
#include <string_view>

namespace strata::vk {

#define STRATA_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance)                 \
  X(vkEnumerateInstanceVersion)       \
  X(vkEnumerateInstanceExtensionProperties)

#define STRATA_VK_INSTANCE_FUNCTIONS(X)       \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceMemoryProperties2)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

#define STRATA_VK_DEVICE_FUNCTIONS(X) \
  X(vkDestroyDevice)                  \
  X(vkDeviceWaitIdle)                 \
  X(vkGetDeviceQueue)                 \
  X(vkCreateBuffer)                   \
  X(vkDestroyBuffer)                  \
  X(vkGetBufferMemoryRequirements)    \
  X(vkAllocateMemory)                 \
  X(vkFreeMemory)                     \
  X(vkBindBufferMemory)               \
  X(vkMapMemory)                      \
  X(vkUnmapMemory)                    \
  X(vkGetBufferDeviceAddress)         \
  X(vkCreateShaderModule)             \
  X(vkDestroyShaderModule)            \
  X(vkCreatePipelineLayout)           \
  X(vkDestroyPipelineLayout)          \
  X(vkCreateComputePipelines)         \
  X(vkDestroyPipeline)                \
  X(vkCreateCommandPool)              \
  X(vkDestroyCommandPool)             \
  X(vkAllocateCommandBuffers)         \
  X(vkFreeCommandBuffers)             \
  X(vkBeginCommandBuffer)             \
  X(vkEndCommandBuffer)               \
  X(vkResetCommandBuffer)             \
  X(vkCmdBindPipeline)                \
  X(vkCmdPushConstants)               \
  X(vkCmdDispatch)                    \
  X(vkCmdPipelineBarrier)             \
  X(vkCmdCopyBuffer)                  \
  X(vkCmdFillBuffer)                  \
  X(vkQueueSubmit)                    \
  X(vkCreateFence)                    \
  X(vkDestroyFence)                   \
  X(vkWaitForFences)                  \
  X(vkResetFences)                    \
  X(vkGetFenceStatus)                 \
  X(vkCreateQueryPool)                \
  X(vkDestroyQueryPool)               \
  X(vkCmdResetQueryPool)              \
  X(vkCmdWriteTimestamp)              \
  X(vkGetQueryPoolResults)            \
  X(vkCreateSemaphore)                \
  X(vkDestroySemaphore)               \
  X(vkWaitSemaphores)                 \
  X(vkSignalSemaphore)                \
  X(vkGetSemaphoreCounterValue)

struct Api {
#define STRATA_VK_DECLARE(name) PFN_##name name = nullptr;
  STRATA_VK_GLOBAL_FUNCTIONS(STRATA_VK_DECLARE)
  STRATA_VK_INSTANCE_FUNCTIONS(STRATA_VK_DECLARE)
  STRATA_VK_DEVICE_FUNCTIONS(STRATA_VK_DECLARE)
#undef STRATA_VK_DECLARE
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
};

// The process-wide table. Device functions are loaded through vkGetDeviceProcAddr of the first
// device created; with one loader they dispatch correctly for every device.
Api& api();

// Opens the loader (once; $STRATA_VULKAN_LOADER overrides the library name, e.g. to test a
// machine without one) and fills the global entry points. Throws strata::Error saying what is
// missing and which package provides it.
void load_loader();
void load_instance_functions(VkInstance instance);
void load_device_functions(VkDevice device);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
std::string result_name(VkResult result);
// What a failed call means for a user, in words, then the call and the result name for a bug
// report: "no Vulkan driver for this GPU: install ... (vkCreateInstance returned
// VK_ERROR_INCOMPATIBLE_DRIVER)". call: the failing expression, or the function's name.
std::string failure_message(std::string_view call, VkResult result);

}  // namespace strata::vk

// Checks a VkResult; throws strata::Error naming the call and the result.
#define STRATA_VK(call)                                                                     \
  do {                                                                                      \
    const VkResult strata_vk_result = (call);                                               \
    if (strata_vk_result != VK_SUCCESS)                                                     \
      ::strata::fail("Vulkan: {}", ::strata::vk::failure_message(#call, strata_vk_result)); \
  } while (0)
