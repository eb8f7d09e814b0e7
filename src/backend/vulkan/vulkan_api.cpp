#include "backend/vulkan/vulkan_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "util/error.h"

namespace strata::vk {

Api& api() {
  static Api table;
  return table;
}

void load_loader() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    const char* name = std::getenv("STRATA_VULKAN_LOADER");
    if (!name || !*name) name = "libvulkan.so.1";
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      failure = fmt::format(
          "no Vulkan loader: cannot open {} ({}); install the Vulkan loader (Debian: libvulkan1) "
          "and a driver for your GPU",
          name, dlerror());
      return;
    }
    Api& a = api();
    a.vkGetInstanceProcAddr =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (!a.vkGetInstanceProcAddr) {
      failure = fmt::format("{} has no vkGetInstanceProcAddr: not a Vulkan loader", name);
      return;
    }
#define STRATA_VK_LOAD(fn) \
  a.fn = reinterpret_cast<PFN_##fn>(a.vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn));
    STRATA_VK_GLOBAL_FUNCTIONS(STRATA_VK_LOAD)
#undef STRATA_VK_LOAD
    if (!a.vkCreateInstance) failure = fmt::format("{} does not provide vkCreateInstance", name);
  });
  if (!failure.empty()) throw Error(failure);
}

void load_instance_functions(VkInstance instance) {
  Api& a = api();
#define STRATA_VK_LOAD(fn)                                                   \
  a.fn = reinterpret_cast<PFN_##fn>(a.vkGetInstanceProcAddr(instance, #fn)); \
  if (!a.fn) fail("Vulkan: the loader does not provide {}", #fn);
  STRATA_VK_INSTANCE_FUNCTIONS(STRATA_VK_LOAD)
#undef STRATA_VK_LOAD
}

void load_device_functions(VkDevice device) {
  Api& a = api();
  if (a.vkDestroyDevice) return;  // already loaded
#define STRATA_VK_LOAD(fn)                                               \
  a.fn = reinterpret_cast<PFN_##fn>(a.vkGetDeviceProcAddr(device, #fn)); \
  if (!a.fn) fail("Vulkan: the driver does not provide {}", #fn);
  STRATA_VK_DEVICE_FUNCTIONS(STRATA_VK_LOAD)
#undef STRATA_VK_LOAD
}

std::string result_name(VkResult result) {
  switch (result) {
#define STRATA_VK_CASE(r) \
  case r:                 \
    return #r;
    STRATA_VK_CASE(VK_NOT_READY)
    STRATA_VK_CASE(VK_TIMEOUT)
    STRATA_VK_CASE(VK_INCOMPLETE)
    STRATA_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    STRATA_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    STRATA_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    STRATA_VK_CASE(VK_ERROR_DEVICE_LOST)
    STRATA_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    STRATA_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    STRATA_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    STRATA_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    STRATA_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    STRATA_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    STRATA_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    STRATA_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    STRATA_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
#undef STRATA_VK_CASE
    default:
      return fmt::format("VkResult {}", static_cast<int>(result));
  }
}

std::string failure_message(std::string_view call, VkResult result) {
  // The Vulkan function the failing expression calls ("a.vkCreateInstance(&info, ...)").
  std::string_view fn = call;
  if (const size_t at = fn.find("vk"); at != std::string_view::npos) fn.remove_prefix(at);
  fn = fn.substr(0, fn.find('('));
  std::string words;
  switch (result) {
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      words =
          "no Vulkan driver for this GPU: install mesa-vulkan-drivers (AMD, Intel, and "
          "lavapipe for the CPU) or your vendor's driver (NVIDIA)";
      break;
    case VK_ERROR_INITIALIZATION_FAILED:
      words =
          "the Vulkan driver failed to start (another program holding the GPU, or a driver "
          "that does not match the kernel module: reboot after a driver update)";
      break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      words = "the GPU is out of memory (close what else uses it, or lower --vram-budget)";
      break;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      words = "the system is out of memory";
      break;
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_LAYER_NOT_PRESENT:
      words = "the Vulkan driver lacks something strata needs: update the GPU driver";
      break;
    case VK_ERROR_MEMORY_MAP_FAILED:
      words = "the driver could not map GPU memory for the CPU";
      break;
    default:
      words = "the Vulkan driver reported an error";
  }
  return fmt::format("{} ({} returned {})", words, fn, result_name(result));
}

}  // namespace strata::vk
