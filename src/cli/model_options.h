#pragma once
// Options shared by the commands that load and run a model.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/gpu_placement.h"
#include "model/model.h"
#include "util/mapped_file.h"

namespace strata::cli {

struct ModelOptions {
  std::string path;
  int threads = 0;  // 0: physical cores
  int64_t ctx = 4096;
  // What one command allocates, so its placement is planned for it: KV positions (0: ctx, as a
  // server allocates) and rows of logits one step returns.
  int64_t kv_positions = 0;
  int64_t logit_rows = 64;
  int64_t planned_positions() const { return kv_positions > 0 ? kv_positions : ctx; }
  std::string kv_type = "f16";
  std::string load = "mmap";
  std::string repack = "on";
  std::string device = "auto";  // --device: none, auto, or vkN[,vkM]
  std::string vram_budget;      // --vram-budget SIZE ("" = the device's free memory)
  PlacementRequest placement;   // --plan, --n-cpu-moe, --cpu-moe, --gpu-layers, --hot-experts
  bool distributed = false;     // --distributed: layers split across the ranks of an MPI job
  std::string layer_split;      // --layer-split N0,N1,...: layers per rank ("": by RAM)

  int thread_count() const;
  LoadMode load_mode() const;
  GgmlType kv_cache_type() const;
};

// -m/--model, -t/--threads, --ctx, --kv-type, --load, --repack, --device, --vram-budget, the
// placement flags and --distributed / --layer-split.
void add_model_options(CLI::App* cmd, ModelOptions& options);

// Loads the model on the devices --device names (a GPU when given one; `auto` takes the usable
// GPUs, never a CPU-type Vulkan device, and runs on the CPU when there is none or the model
// does not fit; an explicit device that fails is an error). On a GPU it runs the placement
// choose_gpu_placement picks: routed experts the GPU cannot hold stay in RAM and the CPU computes
// them during each step.
std::unique_ptr<Model> load_model(const ModelOptions& options);

// --repack, and whether decode GEMVs prefetch (measured on the file's weights), for the CPU's
// matrix products of `model` (a GPU model's CPU layers and RAM experts too).
// held: the tensors this process reads (null: all), for the prefetch measurement.
void apply_matmul_settings(Model& model, const ModelOptions& options,
                           const std::function<bool(const GgufTensorInfo&)>& held = nullptr);

// For each of --threads, --load and --kv-type the user did not give on `cmd`, takes the value
// the planner chooses for a CPU-only run keeping kv_positions positions (plan/cpu_settings.h),
// and logs why.
void apply_cpu_plan(const CLI::App& cmd, ModelOptions& options, int64_t kv_positions);

// "1,2,3" -> {1, 2, 3}; throws naming the bad item.
std::vector<int32_t> parse_token_list(const std::string& text);

}  // namespace strata::cli
