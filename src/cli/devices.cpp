// `strata devices [--json]`: every Vulkan device this machine has, what it offers (memory,
// subgroup size, fp16 / int8 / integer dot product / cooperative matrix, limits) and whether
// strata's kernels can run on it. Built with or without the Vulkan backend; without it the
// command says so and fails.

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "util/error.h"
#include "util/format_bytes.h"

#ifdef STRATA_HAVE_VULKAN
#include <fmt/ranges.h>

#include <vector>

#include "backend/vulkan/instance.h"
#endif

namespace strata::cli {
namespace {

#ifdef STRATA_HAVE_VULKAN

const char* yes_no(bool b) {
  return b ? "yes" : "no";
}

std::string budget_source(const vk::DeviceInfo& d) {
  return d.has_memory_budget ? "VK_EXT_memory_budget" : "heap size";
}

// What `--device auto` picks: usable devices that are not CPU (software) devices.
bool used_by_auto(const vk::DeviceInfo& d) {
  return d.usable() && !d.is_cpu;
}

nlohmann::ordered_json device_json(const vk::DeviceInfo& d) {
  nlohmann::ordered_json j;
  j["id"] = fmt::format("vk{}", d.index);
  j["index"] = d.index;
  j["name"] = d.name;
  j["vendor"] = d.vendor;
  j["vendor_id"] = d.vendor_id;
  j["device_id"] = d.device_id;
  j["driver"] = d.driver;
  j["driver_version"] = d.driver_version;
  j["api_version"] = d.api_version;
  j["type"] = d.type;
  j["is_cpu"] = d.is_cpu;
  j["device_local_bytes"] = d.device_local_bytes;
  j["device_local_budget_bytes"] = d.device_local_budget;
  j["has_memory_budget"] = d.has_memory_budget;
  j["uuid"] = d.uuid;
  j["budget_source"] = budget_source(d);
  j["subgroup_size"] = d.subgroup_size;
  j["fp16"] = d.fp16;
  j["int8"] = d.int8;
  j["integer_dot_product"] = d.integer_dot_product;
  j["cooperative_matrix"] = d.cooperative_matrix;
  j["max_storage_buffer_range_bytes"] = d.max_storage_buffer_range;
  j["max_shared_memory_bytes"] = d.max_shared_memory;
  j["max_allocation_bytes"] = d.max_allocation_bytes;
  j["max_workgroup_invocations"] = d.max_workgroup_invocations;
  j["timestamp_period_ns"] = d.timestamp_period_ns;
  j["usable"] = d.usable();
  j["missing"] = d.missing;
  j["used_by_auto"] = used_by_auto(d);
  return j;
}

void print_device(const vk::DeviceInfo& d) {
  const std::string id = fmt::format("vk{}", d.index);
  const auto line = [](const char* label, const std::string& value) {
    fmt::print("  {:<30} {}\n", fmt::format("{}:", label), value);
  };
  fmt::print("{}: {}\n", id, d.name);
  line("vendor", fmt::format("{}, vendor id 0x{:04x}, device id 0x{:04x}", d.vendor, d.vendor_id,
                             d.device_id));
  line("driver", fmt::format("{}, version {}", d.driver, d.driver_version));
  line("Vulkan API", d.api_version);
  line("type", d.is_cpu
                   ? fmt::format("{} (software; used only when named: --device {})", d.type, id)
                   : d.type);
  line("device-local memory", format_bytes(d.device_local_bytes));
  line("memory budget", fmt::format("{} ({})", format_bytes(d.device_local_budget),
                                    d.has_memory_budget ? "free now, from VK_EXT_memory_budget"
                                                        : "heap size: no VK_EXT_memory_budget"));
  line("uuid", d.uuid);
  line("subgroup size", fmt::format("{}", d.subgroup_size));
  line("fp16", yes_no(d.fp16));
  line("int8", yes_no(d.int8));
  line("integer dot product", yes_no(d.integer_dot_product));
  line("cooperative matrix", yes_no(d.cooperative_matrix));
  line("max storage buffer range", format_bytes(d.max_storage_buffer_range));
  line("shared memory per workgroup", format_bytes(d.max_shared_memory));
  line("max allocation size", format_bytes(d.max_allocation_bytes));
  line("max workgroup invocations", fmt::format("{}", d.max_workgroup_invocations));
  line("usable by strata", d.usable()
                               ? std::string("yes")
                               : fmt::format("no (missing: {})", fmt::join(d.missing, ", ")));
}

// The devices, or none when the loader is there but finds no driver at all (vkCreateInstance
// answers VK_ERROR_INCOMPATIBLE_DRIVER): that is "no devices", not a broken installation. A
// missing loader still throws (Instance::get() says what to install).
std::vector<vk::DeviceInfo> find_devices() {
  try {
    return vk::Instance::get().devices();
  } catch (const Error& e) {
    if (std::string(e.what()).find("VK_ERROR_INCOMPATIBLE_DRIVER") == std::string::npos) throw;
    return {};
  }
}

void list_devices(bool json) {
  const std::vector<vk::DeviceInfo> devices = find_devices();
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& d : devices) out.push_back(device_json(d));
    fmt::print("{}\n", out.dump(2));
    return;
  }
  if (devices.empty()) {
    fmt::print(
        "no Vulkan devices found: the Vulkan loader is installed, but no driver reports a "
        "device (install your GPU's Vulkan driver; mesa-vulkan-drivers provides lavapipe)\n");
    return;
  }
  std::vector<std::string> automatic;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) fmt::print("\n");
    print_device(devices[i]);
    if (used_by_auto(devices[i])) automatic.push_back(fmt::format("vk{}", devices[i].index));
  }
  fmt::print("\n--device auto uses: {}\n", automatic.empty()
                                               ? std::string("none (CPU only)")
                                               : fmt::to_string(fmt::join(automatic, ",")));
  fmt::print("CPU (software) devices such as lavapipe are used only when named with --device.\n");
}

#endif  // STRATA_HAVE_VULKAN

}  // namespace

void add_devices_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the Vulkan GPUs strata sees, their features and limits, and which it can use");
  cmd->add_flag("--json", *json, "Machine-readable JSON output (an array, raw byte counts)");
  cmd->callback([json] {
#ifdef STRATA_HAVE_VULKAN
    list_devices(*json);
#else
    (void)json;
    fail(
        "this strata build has no GPU backend: it was built without Vulkan (install libvulkan-dev "
        "and glslc, or run scripts/setup.sh, then rebuild)");
#endif
  });
}

}  // namespace strata::cli
