#include "backend/vulkan/instance.h"

#include <cstring>

#include "util/error.h"
#include "util/log.h"

namespace strata::vk {
namespace {

std::string version_string(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                     VK_API_VERSION_PATCH(v));
}

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10de:
      return "NVIDIA";
    case 0x1002:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x13b5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x106b:
      return "Apple";
    case 0x10005:
      return "Mesa (software)";
    default:
      return fmt::format("0x{:04x}", id);
  }
}

std::string driver_version_string(uint32_t vendor, uint32_t v) {
  if (vendor == 0x10de) {  // NVIDIA packs 10.8.8.6 bits
    return fmt::format("{}.{}.{}", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff);
  }
  return version_string(v);
}

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  for (const auto& e : list)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

DeviceInfo describe(VkPhysicalDevice pd, int index) {
  const Api& a = api();
  DeviceInfo d;
  d.index = index;
  d.physical = pd;

  uint32_t n_ext = 0;
  a.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  a.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n_ext, exts.data());

  VkPhysicalDeviceIDProperties id{};
  id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  driver.pNext = &id;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = &driver;
  VkPhysicalDeviceMaintenance3Properties maint3{};
  maint3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  maint3.pNext = &subgroup;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &maint3;
  a.vkGetPhysicalDeviceProperties2(pd, &props);
  const VkPhysicalDeviceProperties& p = props.properties;

  d.name = p.deviceName;
  d.vendor_id = p.vendorID;
  d.device_id = p.deviceID;
  d.vendor = vendor_name(p.vendorID);
  d.driver = driver.driverName[0] ? fmt::format("{} ({})", driver.driverName, driver.driverInfo)
                                  : "unknown";
  d.driver_version = driver_version_string(p.vendorID, p.driverVersion);
  d.api_version = version_string(p.apiVersion);
  // NVIDIA's Vulkan deviceUUID is the GPU's UUID in NVML, which writes it 8-4-4-4-12.
  d.uuid = "GPU-";
  for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) d.uuid += '-';
    d.uuid += fmt::format("{:02x}", id.deviceUUID[i]);
  }
  switch (p.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      d.type = "discrete";
      break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      d.type = "integrated";
      break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      d.type = "virtual";
      break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      d.type = "cpu";
      break;
    default:
      d.type = "other";
      break;
  }
  d.is_cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  d.subgroup_size = subgroup.subgroupSize;
  d.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  d.max_allocation_bytes = maint3.maxMemoryAllocationSize;
  d.max_shared_memory = p.limits.maxComputeSharedMemorySize;
  d.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  uint32_t n_queue = 0;
  a.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_queue, nullptr);
  std::vector<VkQueueFamilyProperties> queues(n_queue);
  a.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_queue, queues.data());
  for (const auto& q : queues) {
    if ((q.queueFlags & VK_QUEUE_COMPUTE_BIT) && q.timestampValidBits > 0) {
      d.timestamp_period_ns = p.limits.timestampPeriod;
      break;
    }
  }

  // Memory: device-local heaps, and the budget when the driver reports one.
  d.has_memory_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  VkPhysicalDeviceMemoryProperties2 mem{};
  mem.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  if (d.has_memory_budget) mem.pNext = &budget;
  a.vkGetPhysicalDeviceMemoryProperties2(pd, &mem);
  for (uint32_t h = 0; h < mem.memoryProperties.memoryHeapCount; ++h) {
    if (!(mem.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    const uint64_t size = mem.memoryProperties.memoryHeaps[h].size;
    d.device_local_bytes += size;
    if (d.has_memory_budget) {
      const uint64_t b = budget.heapBudget[h], used = budget.heapUsage[h];
      d.device_local_budget += b > used ? b - used : 0;
    } else {
      d.device_local_budget += size;
    }
  }

  // Features.
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.pNext = &dot;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f11;
  const bool v12 =
      VK_API_VERSION_MINOR(p.apiVersion) >= 2 || VK_API_VERSION_MAJOR(p.apiVersion) > 1;
  if (v12) a.vkGetPhysicalDeviceFeatures2(pd, &features);
  d.fp16 = f12.shaderFloat16;
  d.int8 = f12.shaderInt8;
  d.integer_dot_product = dot.shaderIntegerDotProduct;
  d.cooperative_matrix = has_extension(exts, "VK_KHR_cooperative_matrix");

  if (!v12) d.missing.push_back("Vulkan 1.2");
  if (!f12.bufferDeviceAddress) d.missing.push_back("bufferDeviceAddress");
  if (!f12.timelineSemaphore) d.missing.push_back("timelineSemaphore");
  if (!f11.storageBuffer16BitAccess) d.missing.push_back("storageBuffer16BitAccess");
  if (!features.features.shaderInt16) d.missing.push_back("shaderInt16");
  if (!features.features.shaderInt64) d.missing.push_back("shaderInt64");
  if (d.max_workgroup_invocations < 256) d.missing.push_back("256 invocations per workgroup");
  if (d.max_shared_memory < 16384) d.missing.push_back("16 KiB shared memory");
  return d;
}

}  // namespace

Instance& Instance::get() {
  static Instance instance;
  return instance;
}

Instance::Instance() {
  load_loader();
  const Api& a = api();
  uint32_t version = VK_API_VERSION_1_0;
  if (a.vkEnumerateInstanceVersion) a.vkEnumerateInstanceVersion(&version);
  STRATA_CHECK(version >= VK_API_VERSION_1_2,
               "Vulkan: the loader supports Vulkan {} only; strata needs 1.2 or later",
               version_string(version));
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "strata";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  STRATA_VK(a.vkCreateInstance(&info, nullptr, &instance_));
  load_instance_functions(instance_);

  uint32_t n = 0;
  STRATA_VK(api().vkEnumeratePhysicalDevices(instance_, &n, nullptr));
  std::vector<VkPhysicalDevice> physical(n);
  STRATA_VK(api().vkEnumeratePhysicalDevices(instance_, &n, physical.data()));
  for (uint32_t i = 0; i < n; ++i) devices_.push_back(describe(physical[i], static_cast<int>(i)));
}

Instance::~Instance() {
  // Destroyed at exit, after every Device (they are owned by shorter-lived objects).
  if (instance_) api().vkDestroyInstance(instance_, nullptr);
}

std::vector<int> parse_device_list(const std::string& text) {
  std::vector<int> out;
  if (text == "none" || text.empty()) return out;
  const auto& devices = Instance::get().devices();
  if (text == "auto") {
    for (const auto& d : devices)
      if (!d.is_cpu && d.usable()) out.push_back(d.index);
    return out;
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int index = -1;
    if (item.size() > 2 && item.rfind("vk", 0) == 0 &&
        item.find_first_not_of("0123456789", 2) == std::string::npos) {
      index = std::stoi(item.substr(2));
    }
    STRATA_CHECK(index >= 0, "--device: expected none, auto or vkN[,vkM] (e.g. vk0), got '{}'",
                 item);
    STRATA_CHECK(index < static_cast<int>(devices.size()),
                 "--device {}: there {} {} Vulkan device(s) (see strata devices)", item,
                 devices.size() == 1 ? "is" : "are", devices.size());
    const DeviceInfo& d = devices[static_cast<size_t>(index)];
    STRATA_CHECK(d.usable(), "--device {}: {} lacks what strata's kernels need: {}", item, d.name,
                 fmt::join(d.missing, ", "));
    out.push_back(index);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace strata::vk
