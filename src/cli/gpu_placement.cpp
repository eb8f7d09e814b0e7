#include "cli/gpu_placement.h"

#include <algorithm>
#include <fstream>

#include "cli/model_options.h"
#include "gguf/gguf_file.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "plan/report.h"
#include "plan/step_buffers.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/json_error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

// Nominal bandwidths for the default plan: which experts stay on the GPU depends on memory and
// popularity; the speeds only rank near-equal choices (`strata plan` measures them).
constexpr double kNominalGpuGbps = 300;
constexpr double kNominalRamGbps = 20;

// budgets: each GPU's memory (0: not limited).
plan::HardwareProfile nominal_gpus(const std::vector<uint64_t>& budgets) {
  plan::HardwareOverrides overrides;
  for (uint64_t b : budgets)
    overrides.gpus.push_back(fmt::format("{}:{}", b ? b : uint64_t{1} << 50, kNominalGpuGbps));
  overrides.ram = fmt::format("{}:{}", plan::available_ram_bytes(), kNominalRamGbps);
  overrides.cores = physical_core_count();
  plan::ProbeOptions probe;
  probe.calibrate = false;
  return plan::make_hardware_profile(overrides, probe);
}

plan::Placement read_plan_file(const std::string& path, const plan::ModelInventory& inv,
                               size_t n_gpus) {
  std::ifstream in(path);
  STRATA_CHECK(in, "--plan {}: cannot read the file", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    fail("--plan {}: not valid JSON: {}", path, plain_json_error(e.what()));
  }
  try {
    return plan::placement_from_json(j, inv, static_cast<int>(n_gpus));
  } catch (const Error& e) {
    fail("--plan {}: {}", path, e.what());
  }
}

}  // namespace

std::optional<plan::Placement> choose_gpu_placement(const ModelOptions& options,
                                                    const std::vector<uint64_t>& budgets) {
  STRATA_CHECK(!budgets.empty(), "choose_gpu_placement: no GPU");
  const size_t n_gpus = budgets.size();
  const uint64_t budget_bytes = *std::min_element(budgets.begin(), budgets.end());
  const PlacementRequest& r = options.placement;
  STRATA_CHECK(r.plan_file.empty() || !r.flags.any(),
               "--plan gives the whole placement: drop --n-cpu-moe, --cpu-moe, --gpu-layers and "
               "--override-tensor");
  plan::ModelInventory inv = plan::inventory_from_gguf(GgufFile::open(options.path));
  if (!r.hot_experts.empty()) plan::load_expert_popularity(inv, r.hot_experts, options.path);
  STRATA_CHECK(r.flags.gpu_layers != 0,
               "--gpu-layers 0 keeps every layer on the CPU: run with --device none");
  if (!r.plan_file.empty()) return read_plan_file(r.plan_file, inv, n_gpus);
  const plan::HardwareProfile hw = nominal_gpus(budgets);
  if (r.flags.any()) return plan::placement_from_flags(inv, hw, r.flags);
  const bool split = n_gpus > 1;
  if (!split && budget_bytes == 0) return std::nullopt;
  // Plan as the planner would for this budget; when everything lands on the GPU, run whole.
  plan::PlanGoals goals;
  goals.context = options.planned_positions();
  goals.kv_type = options.kv_type;
  const plan::MemoryConstants memory = plan::executor_memory(
      inv, plan::StepShape::for_context(goals.context, options.logit_rows), budget_bytes);
  const plan::Plan p = plan::plan_placement(inv, hw, goals, plan::default_cost_constants(), memory);
  STRATA_CHECK(p.fits, "{} does not fit this machine with {} GPU(s) of {}: {}", options.path,
               n_gpus, format_bytes(budget_bytes), p.fit_error);
  bool all_on_gpu = p.placement.output_device != plan::kCpuDevice;
  bool any_on_gpu = false;
  for (const plan::LayerPlacement& l : p.placement.layers) {
    any_on_gpu = any_on_gpu || l.attention_device != plan::kCpuDevice;
    all_on_gpu = all_on_gpu && l.attention_device != plan::kCpuDevice &&
                 std::none_of(l.expert_device.begin(), l.expert_device.end(),
                              [](int d) { return d == plan::kCpuDevice; });
  }
  // A budget too small for even one layer: the plan is the CPU's (the caller runs it there).
  if (!any_on_gpu) return p.placement;
  if (!split && all_on_gpu) return std::nullopt;
  // The speed is a nominal one (the placement needs only the ranking): say so, and where the
  // measured prediction comes from.
  const std::string nominal = fmt::format(
      "{:.1f} tok/s at nominal bandwidths ({:.0f} GB/s GPU, {:.0f} GB/s RAM; `strata "
      "plan --device ...` predicts with this machine's)",
      p.decode.tokens_per_second(), kNominalGpuGbps, kNominalRamGbps);
  if (split) {
    log::info("plan: {} split across {} GPUs; {}", options.path, n_gpus, nominal);
    return p.placement;
  }
  log::info("plan: {} ({}) needs more than the {} of GPU memory; {}", options.path,
            format_bytes(inv.total_bytes()), format_bytes(budget_bytes), nominal);
  return p.placement;
}

}  // namespace strata::cli
