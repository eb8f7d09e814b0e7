#include "cli/plan_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "gguf/gguf_file.h"
#include "plan/report.h"
#include "plan/run_records.h"
#include "plan/step_buffers.h"
#include "util/error.h"

#ifdef STRATA_HAVE_VULKAN
#include "backend/vulkan/gpu_probe.h"
#endif

namespace strata::cli {

plan::HardwareProfile machine_profile(const plan::ModelInventory& inv, const MachineInputs& in) {
  plan::ProbeOptions probe;
  probe.remeasure = in.remeasure;
  probe.calibration.threads = in.threads;
  auto& types = probe.calibration.types;
  for (const auto& t : inv.tensors) {
    if (t.matrix && std::find(types.begin(), types.end(), t.type) == types.end())
      types.push_back(t.type);
  }
#ifdef STRATA_HAVE_VULKAN
  probe.probe_gpus = [device = in.device](const plan::ProbeOptions& options) {
    return vk::probe_vulkan_gpus(device, options);
  };
#else
  STRATA_CHECK(in.device == "auto" || in.device == "none",
               "--device {}: this strata was built without the Vulkan GPU backend", in.device);
#endif
  plan::HardwareProfile hw = plan::make_hardware_profile(in.overrides, probe);
  // This machine's recorded runs correct its calibrated CPU (--remeasure ignores them with the
  // rest of the cache).
  if (!in.remeasure)
    plan::apply_run_records(hw, plan::default_hardware_cache_path(), in.model_path);
  if (!in.vram_budget.empty()) {
    const uint64_t budget = plan::parse_size(in.vram_budget, 1024);
    STRATA_CHECK(budget > 0, "--vram-budget: expected a size such as 8G, found '{}'",
                 in.vram_budget);
    STRATA_CHECK(!hw.gpus.empty(), "--vram-budget {}: there is no GPU to plan for (--device {})",
                 in.vram_budget, in.device);
    for (plan::GpuInfo& g : hw.gpus) {
      g.vram_total_bytes = std::min(g.vram_total_bytes, budget);
      g.vram_free_bytes = std::min(g.vram_free_bytes, budget);
    }
  }
  return hw;
}

plan::MemoryConstants planning_memory(const plan::ModelInventory& inv,
                                      const plan::HardwareProfile& hw, const plan::PlanGoals& goals,
                                      bool hypothetical_gpus) {
  if (hypothetical_gpus || hw.gpus.empty()) return {};
  uint64_t smallest = hw.gpus[0].vram_free_bytes;
  for (const plan::GpuInfo& g : hw.gpus) smallest = std::min(smallest, g.vram_free_bytes);
  const plan::StepShape shape = plan::StepShape::for_context(
      goals.max_context ? std::max<int64_t>(inv.n_ctx_train, 1) : goals.context);
  return plan::executor_memory(inv, shape, smallest);
}

nlohmann::json plan_report_json(const std::string& model_path, const MachineInputs& in,
                                const plan::PlanGoals& goals) {
  const plan::ModelInventory inv = plan::inventory_from_gguf(GgufFile::open(model_path));
  const plan::HardwareProfile hw = machine_profile(inv, in);
  const plan::MemoryConstants memory = planning_memory(inv, hw, goals, false);
  const plan::Plan p = plan::plan_placement(inv, hw, goals, plan::default_cost_constants(), memory);
  const auto table = plan::context_table(inv, hw, goals, memory);
  return {{"text", plan::plan_text(inv, hw, p, table)},
          {"svg", plan::context_svg(fmt::format("{}: predicted decode speed vs context ({} KV)",
                                                inv.name, goals.kv_type),
                                    table)},
          {"plan", plan::plan_json(inv, hw, p, table)}};
}

}  // namespace strata::cli
