#pragma once
// The placement search: a pure function from (inventory, hardware, goals) to a Plan that says
// where every layer's attention, KV cache and each routed expert live, how many bytes each device
// holds, and how fast it is predicted to run. Nothing is allocated.

#include <cstdint>
#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/inventory.h"

namespace strata::plan {

struct MemoryConstants {
  // VRAM kept free per GPU for the runtime: compute buffers (~0.5 GB for a 30B MoE at a 512-token
  // micro-batch), cuBLAS workspace and fragmentation. FIELD C2 bounds it: its published
  // --n-cpu-moe counts (36 / 34 / 32 for Q4_K_M / IQ4_XS / UD-Q3_K_XL at 36,864 q8_0 context on
  // ~7.6 GiB usable) fit and one layer fewer in RAM does not, for a margin between 0.64 and
  // 0.94 GiB (for UD-Q3_K_XL one more layer would have fit). 0.8 GiB is the middle.
  uint64_t gpu_runtime_margin_bytes = uint64_t{800} << 20;
  // Work buffers of strata's own executor on each GPU (plan::gpu_step_buffer_bytes), kept free
  // besides the margin; 0 where the margin stands for another engine's compute buffers (the
  // FIELD cases, llama.cpp's flags priced).
  uint64_t gpu_work_bytes = 0;
  // RAM left to the OS and other programs when the RAM size is given (probed machines use
  // MemAvailable instead). Assumed: a desktop's idle footprint.
  uint64_t os_reserve_bytes = uint64_t{3} << 30;
};

struct PlanGoals {
  int64_t context = 32768;      // tokens of KV cache to allocate
  bool max_context = false;     // find the largest context that fits instead
  std::string kv_type = "f16";  // f16, q8_0, q4_0
  bool allow_single_experts = true;
};

struct DeviceUsage {
  std::string name;
  uint64_t capacity_bytes = 0;  // usable: after the runtime margin / OS reserve
  uint64_t weight_bytes = 0;
  uint64_t tile_bytes = 0;  // CPU: of weight_bytes, the weights packed into tiles (tile_copy.h)
  uint64_t kv_bytes = 0;    // KV cache and recurrent state
  uint64_t work_bytes = 0;  // GPUs: the executor's step buffers, kept out of capacity_bytes
  uint64_t used() const { return weight_bytes + kv_bytes; }
};

struct Plan {
  bool fits = false;
  std::string fit_error;
  int64_t context = 0;
  std::string kv_type;
  Placement placement;
  std::vector<DeviceUsage> devices;
  DecodeEstimate decode;       // empty cache (the speed at the start of a conversation)
  DecodeEstimate decode_full;  // cache filled to `context`
  PrefillEstimate prefill;
  std::string bottleneck;
  int partial_layers = 0;     // layers whose experts are split between devices
  int cpu_expert_layers = 0;  // layers with any routed expert in RAM
  // The nearest plan llama.cpp can express (whole per-layer expert tensors), for its flags.
  Placement whole_layer_placement;
  DecodeEstimate whole_layer_decode;
  int whole_layer_cpu_expert_layers = 0;
};

// Whether every tensor of the placement is on the CPU (no GPU part at all).
bool runs_on_cpu_only(const Placement& placement);

Plan plan_placement(const ModelInventory& inv, const HardwareProfile& hw, const PlanGoals& goals,
                    const CostConstants& costs = default_cost_constants(),
                    const MemoryConstants& memory = MemoryConstants{});

// llama.cpp's `-ngl 99 --n-cpu-moe N` (experts of layers 0..N-1 in RAM, everything else on the
// GPUs, layers split over GPUs by capacity) for replaying published configurations.
Placement n_cpu_moe_placement(const ModelInventory& inv, const HardwareProfile& hw, int n_cpu_moe);

// Bytes each device holds under a placement (weights; KV for `context` tokens).
std::vector<DeviceUsage> device_usage(const ModelInventory& inv, const HardwareProfile& hw,
                                      const Placement& placement, int64_t context,
                                      double kv_bytes_per_element, const MemoryConstants& memory);

}  // namespace strata::plan
