#pragma once
// `strata plan --hosts`: the model split across hosts, planned (plan/pipeline_plan.h) for hosts
// given on the command line or in a file, or measured: `mpirun -np N -H ... strata plan -m FILE
// --hosts measure` probes each rank's host and the links between them.

#include <string>

#include "plan/inventory.h"
#include "plan/placement.h"

namespace strata::cli {

// Prints the plan (text, or JSON). Under mpirun with `measure`, only rank 0 prints; the other
// ranks send what they measured and end the process. Throws strata::Error when the split does
// not fit, naming the host.
void print_pipeline_plan(const plan::ModelInventory& inv, const std::string& hosts,
                         const std::string& link, const plan::PlanGoals& goals, bool json);

}  // namespace strata::cli
