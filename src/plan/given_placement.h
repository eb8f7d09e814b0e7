#pragma once
// The placement a user already runs with llama.cpp-style flags, so `strata plan` can price it next
// to its own: `-ngl N` (--gpu-layers), `--n-cpu-moe N`, `--cpu-moe` and `-ot REGEX=DEVICE`
// overrides (the regexes guides publish, e.g. `blk\.([5-9]|[1-9][0-9])\.ffn_.*_exps=CPU`).

#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"

namespace strata::plan {

struct GivenFlags {
  int gpu_layers = -1;  // -ngl N: the last N layers on the GPUs (-1: all, llama.cpp's -ngl 99)
  int n_cpu_moe = -1;   // experts of layers 0..N-1 in RAM (-1: not given)
  bool cpu_moe = false;
  std::vector<std::string> overrides;  // "REGEX=DEVICE", DEVICE: CPU, GPUn, CUDAn, Vulkann
  bool any() const { return gpu_layers >= 0 || n_cpu_moe >= 0 || cpu_moe || !overrides.empty(); }
};

// The placement the flags describe on hw, llama.cpp's way: layers split over the GPUs by
// capacity, -ngl then --n-cpu-moe / --cpu-moe, then the overrides in order (the first regex that
// finds a tensor's name, e.g. blk.7.ffn_up_exps.weight, places it). A layer's routed experts move
// as a whole (gate, up and down together); attention tensors move the layer's attention, KV and
// norms. Throws strata::Error for a bad regex or device, or a split this placement cannot hold.
Placement placement_from_flags(const ModelInventory& inv, const HardwareProfile& hw,
                               const GivenFlags& flags);

// A given placement priced as plan_placement prices its own: bytes per device (does it fit?),
// decode with an empty and a full cache, prompt processing.
struct GivenEvaluation {
  Placement placement;
  std::vector<DeviceUsage> devices;
  bool fits = true;
  std::string fit_error;  // the first device that overflows, with the numbers
  DecodeEstimate decode, decode_full;
  PrefillEstimate prefill;
};
GivenEvaluation evaluate_given(const ModelInventory& inv, const HardwareProfile& hw,
                               const GivenFlags& flags, int64_t context,
                               const std::string& kv_type);

}  // namespace strata::plan
