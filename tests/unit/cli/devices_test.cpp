// `strata devices` end to end: lavapipe (Mesa's software Vulkan driver, mesa-vulkan-drivers) is
// the device every test machine has; a made-up loader path stands for a machine without Vulkan.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "cli_test_support.h"

namespace strata {
namespace {

TEST(DevicesCommand, ListsLavapipeAsAUsableCpuDevice) {
  SKIP_WITHOUT_GPU_BACKEND();
  const auto r = run_strata_env(lavapipe_only(), "devices", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto vk0 = r.output.find("vk0: llvmpipe");
  ASSERT_NE(vk0, std::string::npos) << r.output;
  const std::string first = r.output.substr(vk0, r.output.find("\nvk1:") - vk0);
  EXPECT_TRUE(contains(first, "type:")) << first;
  EXPECT_TRUE(contains(first, "cpu (software; used only when named: --device vk0)")) << first;
  EXPECT_TRUE(std::regex_search(first, std::regex("\n  subgroup size: +8\n"))) << first;
  EXPECT_TRUE(std::regex_search(first, std::regex("\n  usable by strata: +yes\n"))) << first;
  EXPECT_TRUE(contains(first, "heap size: no VK_EXT_memory_budget") ||
              contains(first, "from VK_EXT_memory_budget"))
      << first;
  for (const char* label :
       {"vendor:", "driver:", "Vulkan API:", "device-local memory:", "fp16:", "int8:",
        "integer dot product:", "cooperative matrix:", "max storage buffer range:",
        "shared memory per workgroup:", "max allocation size:"}) {
    EXPECT_TRUE(contains(first, label)) << label << "\n" << first;
  }
  EXPECT_TRUE(contains(first, " GiB")) << first;  // human-friendly sizes
  // lavapipe is never picked automatically.
  EXPECT_TRUE(contains(r.output, "--device auto uses: none (CPU only)")) << r.output;
}

TEST(DevicesCommand, JsonHasEveryFieldWithRawByteCounts) {
  SKIP_WITHOUT_GPU_BACKEND();
  const auto r = run_strata_env(lavapipe_only(), "devices --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.is_array());
  ASSERT_GE(j.size(), 1u);
  const auto& d = j[0];
  for (const char* key : {"id",
                          "index",
                          "name",
                          "vendor",
                          "vendor_id",
                          "device_id",
                          "driver",
                          "driver_version",
                          "api_version",
                          "type",
                          "is_cpu",
                          "device_local_bytes",
                          "device_local_budget_bytes",
                          "has_memory_budget",
                          "budget_source",
                          "subgroup_size",
                          "fp16",
                          "int8",
                          "integer_dot_product",
                          "cooperative_matrix",
                          "max_storage_buffer_range_bytes",
                          "max_shared_memory_bytes",
                          "max_allocation_bytes",
                          "max_workgroup_invocations",
                          "timestamp_period_ns",
                          "usable",
                          "missing",
                          "used_by_auto"}) {
    EXPECT_TRUE(d.contains(key)) << key << "\n" << d.dump(2);
  }
  EXPECT_EQ(d["id"], "vk0");
  EXPECT_EQ(d["index"], 0);
  EXPECT_TRUE(contains(d["name"].get<std::string>(), "llvmpipe")) << d["name"];
  EXPECT_EQ(d["type"], "cpu");
  EXPECT_EQ(d["is_cpu"], true);
  EXPECT_EQ(d["subgroup_size"], 8);
  EXPECT_EQ(d["usable"], true);
  EXPECT_TRUE(d["missing"].is_array() && d["missing"].empty()) << d["missing"];
  EXPECT_EQ(d["used_by_auto"], false);
  for (const char* key :
       {"device_local_bytes", "device_local_budget_bytes", "max_storage_buffer_range_bytes",
        "max_shared_memory_bytes", "max_allocation_bytes"}) {
    ASSERT_TRUE(d[key].is_number_unsigned()) << key << ": " << d[key];
    EXPECT_GT(d[key].get<uint64_t>(), 0u) << key;
  }
  EXPECT_LE(d["device_local_budget_bytes"].get<uint64_t>(),
            d["device_local_bytes"].get<uint64_t>());
  EXPECT_GE(d["max_shared_memory_bytes"].get<uint64_t>(), 16384u);
  for (const char* key :
       {"fp16", "int8", "integer_dot_product", "cooperative_matrix", "has_memory_budget"}) {
    EXPECT_TRUE(d[key].is_boolean()) << key;
  }
}

TEST(DevicesCommand, NoVulkanLoaderIsAClearError) {
  SKIP_WITHOUT_GPU_BACKEND();
  for (const char* args : {"devices", "devices --json"}) {
    SCOPED_TRACE(args);
    const auto r = run_strata_env("STRATA_VULKAN_LOADER=/nonexistent/libvulkan.so.1 ", args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "Vulkan loader")) << r.output;
    EXPECT_TRUE(contains(r.output, "/nonexistent/libvulkan.so.1")) << r.output;
  }
}

// A loader without any driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER) has no devices:
// that is said plainly, not an error.
TEST(DevicesCommand, NoDriverMeansNoDevices) {
  const std::string env =
      "VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json ";
  SKIP_WITHOUT_GPU_BACKEND();
  auto r = run_strata_env(env, "devices", false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "no Vulkan devices found")) << r.output;
  r = run_strata_env(env, "devices --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output), nlohmann::json::array());
}

}  // namespace
}  // namespace strata
