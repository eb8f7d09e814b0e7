#pragma once
// The planner's steps for a model on this machine, shared by `strata plan` and the Plan view of
// `strata serve`'s page: the hardware profile (probed, calibrated, corrected by recorded runs),
// the memory the executor keeps free on probed GPUs, the plan and its context table.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"

namespace strata::cli {

struct MachineInputs {
  std::string model_path;  // its recorded runs correct the CPU (empty: every large model's)
  std::string device = "auto";
  int threads = 0;  // 0: the physical cores
  bool remeasure = false;
  std::string vram_budget;  // caps each probed GPU's memory (empty: its free memory)
  plan::HardwareOverrides overrides;
};

// This machine (or the hypothetical one the overrides describe) for `inv`.
plan::HardwareProfile machine_profile(const plan::ModelInventory& inv, const MachineInputs& in);

// What the planner keeps free on GPUs: strata's step buffers on probed GPUs, FIELD's margin on
// hypothetical ones.
plan::MemoryConstants planning_memory(const plan::ModelInventory& inv,
                                      const plan::HardwareProfile& hw, const plan::PlanGoals& goals,
                                      bool hypothetical_gpus);

// For the page: the plan for `goals` as `strata plan` prints it, and the context-vs-speed curve
// (text, SVG, and the plan's JSON).
nlohmann::json plan_report_json(const std::string& model_path, const MachineInputs& in,
                                const plan::PlanGoals& goals);

}  // namespace strata::cli
