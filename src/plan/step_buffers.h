#pragma once
// GPU memory strata's Vulkan executor allocates for its steps, besides weights and the KV cache:
// hidden states, queries and keys, expert work, activations rounded for the quantized products,
// the recurrent layers' inputs, attention block states and the logits. The planner counts it on
// every GPU that holds a layer, so a plan that fits its budget also runs in it.

#include <algorithm>
#include <cstdint>

#include "plan/inventory.h"
#include "plan/placement.h"

namespace strata::plan {

struct StepShape {
  int64_t tokens = 512;     // the most tokens one step carries (a prompt micro-batch)
  int64_t logit_rows = 64;  // the most rows of logits one step returns (sequences x drafts)
  int64_t context = 4096;   // positions cached (flash-decoding's block states grow with them)

  // Steps over `context` positions: prompt batches of Session's 512 tokens, at most the context.
  static StepShape for_context(int64_t context, int64_t logit_rows = 64) {
    return {std::min<int64_t>(context, 512), logit_rows, context};
  }
};

// An upper bound: buffers grow by doubling, so they hold up to twice the largest step, and a
// step's retired buffers live until it ends.
uint64_t gpu_step_buffer_bytes(const ModelInventory& inv, const StepShape& shape);

// The memory rules of a plan strata's own executor runs (run, bench, serve, and `strata plan`
// for the GPUs it probes): its step buffers kept free on each GPU, plus a margin for the driver
// and alignment of a sixteenth of the smallest GPU budget, at most the FIELD runtime margin.
MemoryConstants executor_memory(const ModelInventory& inv, const StepShape& shape,
                                uint64_t smallest_gpu_bytes);

}  // namespace strata::plan
