#include "cli/model_options.h"

#include "cli/distributed_model.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "model/decode_prefetch.h"
#include "ops/matmul.h"
#include "plan/cpu_settings.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "runtime/kv_cache.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

#ifdef STRATA_HAVE_VULKAN
#include "backend/vulkan/gpu_model.h"
#include "backend/vulkan/instance.h"
#endif

namespace strata::cli {

int ModelOptions::thread_count() const {
  return threads > 0 ? threads : physical_core_count();
}

LoadMode ModelOptions::load_mode() const {
  if (load == "mmap") return LoadMode::mmap;
  if (load == "ram") return LoadMode::ram;
  fail("--load must be mmap or ram, got '{}'", load);
}

GgmlType ModelOptions::kv_cache_type() const {
  return KvCache::parse_type(kv_type);
}

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("-m,--model,model", o.path, "GGUF model file (-m FILE or the first argument)")
      ->required();
  cmd->add_option("-t,--threads", o.threads, "Threads (default: physical cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--ctx", o.ctx, "Context size in tokens (KV cache capacity)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--kv-type", o.kv_type, "KV cache type: f16 or q8_0")->capture_default_str();
  cmd->add_option("--load", o.load,
                  "mmap: use weights in place from the file; ram: read the file into memory")
      ->capture_default_str();
  cmd->add_option("--repack", o.repack,
                  "on: prompt batches repack weight rows into interleaved tiles, and weights read "
                  "into RAM whose type has compact tiles (on AVX-512: Q4_K, Q6_K, IQ4_XS, Q8_0, "
                  "Q4_0, IQ4_NL, MXFP4) are rewritten into "
                  "them once (fast, same results); off: row-by-row kernels")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--device", o.device,
                  "GPU to run on: vk0 (see strata devices), none (or cpu) for the CPU, auto for "
                  "the first GPU the model fits on (never a CPU-type Vulkan device)")
      ->capture_default_str()
      ->transform([](std::string v) { return v == "cpu" ? std::string("none") : v; });
  cmd->add_option("--vram-budget", o.vram_budget,
                  "Use at most SIZE of the GPU's memory (e.g. 8G: what an 8 GiB card holds), "
                  "whatever the device has; the plan keeps what does not fit in RAM");
  PlacementRequest& p = o.placement;
  cmd->add_option("--plan", p.plan_file, "Run the placement of a saved `strata plan --json` file");
  cmd->add_option("--n-cpu-moe", p.flags.n_cpu_moe,
                  "Keep the routed experts of the first N layers in RAM (llama.cpp's flag)")
      ->check(CLI::Range(0, 100000));
  cmd->add_flag("--cpu-moe", p.flags.cpu_moe, "Keep every routed expert in RAM (llama.cpp's flag)");
  cmd->add_option("--override-tensor,--ot", p.flags.overrides,
                  "llama.cpp's -ot REGEX=DEVICE (repeatable): tensors whose name the regex finds "
                  "go to DEVICE (CPU or GPU0); a layer's experts move together");
  cmd->add_option("--gpu-layers,--n-gpu-layers", p.flags.gpu_layers,
                  "The last N layers on the GPU, the others on the CPU from RAM (llama.cpp's "
                  "-ngl; N >= the layer count: every layer and the output head on the GPU)")
      ->check(CLI::Range(0, 100000));
  cmd->add_flag("--distributed", o.distributed,
                "Split the layers across the ranks of an MPI job (mpirun -np N [-H host1,...] "
                "strata ... --distributed): rank 0 runs the command, each rank holds a "
                "contiguous range of layers (each host needs the same file at the same path)");
  cmd->add_option("--layer-split", o.layer_split,
                  "With --distributed: layers per rank, rank 0 first (e.g. 20,28; default: in "
                  "proportion to each host's available RAM)");
  cmd->add_option("--hot-experts", p.hot_experts,
                  "Expert popularity profile (from `strata profile` or serve's "
                  "--expert-profile): the planner keeps the busiest experts on the GPU");
}

namespace {

// The devices --device names; empty means the CPU. `auto` never fails: no loader, no device or
// a CPU-type device only all mean the CPU.
std::vector<int> chosen_devices(const ModelOptions& options) {
  if (options.device == "none") return {};
#ifdef STRATA_HAVE_VULKAN
  if (options.device == "auto") {
    try {
      return vk::parse_device_list("auto");
    } catch (const Error& e) {
      log::debug("--device auto: {}; running on the CPU", e.what());
      return {};
    }
  }
  return vk::parse_device_list(options.device);
#else
  STRATA_CHECK(options.device == "auto",
               "--device {}: this strata was built without the Vulkan GPU backend (install "
               "libvulkan-dev and glslc, then rebuild)",
               options.device);
  return {};
#endif
}

}  // namespace

namespace {

#ifdef STRATA_HAVE_VULKAN
// Tests only: STRATA_VK_LOSE_DEVICE_AFTER=N makes the GPU look lost at the (N+1)-th model step
// (tests/server/run_device_lost.sh covers the server's recovery on any machine).
void inject_device_loss(Model& model) {
  const char* steps = std::getenv("STRATA_VK_LOSE_DEVICE_AFTER");
  if (!steps || !*steps) return;
  if (vk::Device* device = vk::gpu_device(model))
    device->lose_after_model_steps(std::strtol(steps, nullptr, 10));
}
#endif

// Settings that cannot run are refused, and settings that run but not as the user likely hopes
// are said, before the model loads.
void warn_about_settings(const ModelOptions& options) {
  options.kv_cache_type();  // an unknown --kv-type is refused before the weights load
  const int cores = physical_core_count();
  if (options.threads > 2 * cores) {
    log::warn(
        "-t {}: this machine has {} physical cores; decoding is bound by memory, and more "
        "threads than cores slow it down (leave -t unset for one per core)",
        options.threads, cores);
  }
}

// After loading: a context past the one the model was trained on.
void warn_about_context(const Model& model, const ModelOptions& options) {
  const int64_t trained = model.hparams().n_ctx_train;
  if (trained > 0 && options.ctx > trained) {
    log::warn("--ctx {} is beyond the {} positions {} was trained on: answers degrade past them",
              options.ctx, trained, model.hparams().arch);
  }
}

}  // namespace

namespace {

// The model on the CPU, with the CPU's matrix settings.
std::unique_ptr<Model> load_on_cpu(const ModelOptions& options, LoadMode mode) {
  auto model = Model::load(options.path, mode);
  apply_matmul_settings(*model, options);
  warn_about_context(*model, options);
  const ModelHParams& hp = model->hparams();
  log::info("loaded {} ({}, {} layers{}), {} threads", options.path, hp.arch, hp.n_layer,
            hp.n_expert ? fmt::format(", {} experts, {} used", hp.n_expert, hp.n_expert_used) : "",
            options.thread_count());
  return model;
}

}  // namespace

void apply_matmul_settings(Model& model, const ModelOptions& options,
                           const std::function<bool(const GgufTensorInfo&)>& held) {
  ops::MatmulSettings settings;
  settings.tile_gemm = options.repack == "on";
  const int64_t cpu_weights = weight_matrix_bytes(model.file(), held);
  settings.tile_min_tokens = ops::tile_min_tokens(cpu_weights);
  // Weights that stay in cache are packed into tiles once (a copy: at most 64 MiB more).
  settings.pack_tiles = cpu_weights < ops::kStreamedWeightBytes;
  // Weights streamed from RAM: rewritten into compact tiles where their type has them (in place).
  settings.compact_tiles = settings.tile_gemm && !settings.pack_tiles;
  settings.gemv_prefetch = tune_decode_prefetch(model.file(), {}, held).prefetch;
  model.set_matmul_settings(settings);
}

std::unique_ptr<Model> load_model(const ModelOptions& options) {
  warn_about_settings(options);
  if (options.distributed) return load_distributed_model(options);
  STRATA_CHECK(options.layer_split.empty(),
               "--layer-split {} splits layers across MPI ranks; it needs --distributed",
               options.layer_split);
  const LoadMode mode = options.load_mode();
#ifdef STRATA_HAVE_VULKAN
  const uint64_t budget =
      options.vram_budget.empty() ? 0 : plan::parse_size(options.vram_budget, 1024);
  STRATA_CHECK(options.vram_budget.empty() || budget > 0,
               "--vram-budget: expected a size such as 8G, found '{}'", options.vram_budget);
  if (const std::vector<int> devices = chosen_devices(options); !devices.empty()) {
    try {
      const std::vector<uint64_t> budgets = vk::device_budgets(devices, budget);
      const std::optional<plan::Placement> placement = choose_gpu_placement(options, budgets);
      if (placement && plan::runs_on_cpu_only(*placement)) {
        log::warn(
            "{}: {} of GPU memory holds no layer of it (the planner keeps every part on the "
            "CPU); running on the CPU",
            options.path, format_bytes(*std::min_element(budgets.begin(), budgets.end())));
        return load_on_cpu(options, mode);
      }
      auto model =
          vk::load_gpu_model(options.path, devices, budget, placement ? &*placement : nullptr);
      apply_matmul_settings(*model, options);  // experts the plan keeps in RAM decode on the CPU
      warn_about_context(*model, options);
      inject_device_loss(*model);
      return model;
    } catch (const Error& e) {
      if (options.device != "auto" || options.placement.any_flag()) throw;
      log::warn("{}; running on the CPU instead", e.what());
    }
  }
#else
  chosen_devices(options);
#endif
  if (options.placement.any_flag()) {
    // With --device auto and no usable GPU, a pasted llama.cpp command (-ngl 99 -ncmoe 30) runs
    // on the CPU as llama.cpp's CPU build would; asking for none and a placement contradicts.
    STRATA_CHECK(options.device == "auto",
                 "--plan, --n-cpu-moe, --cpu-moe and --gpu-layers place a model on a GPU, and "
                 "this run has none (--device {})",
                 options.device);
    log::warn(
        "no usable GPU: the placement flags (--plan, --n-cpu-moe, --cpu-moe, --gpu-layers, "
        "--ot) have nothing to place; every layer runs on the CPU");
  }
  if (!options.vram_budget.empty())
    log::warn("--vram-budget {}: no GPU runs this model, so there is nothing to cap",
              options.vram_budget);
  return load_on_cpu(options, mode);
}

void apply_cpu_plan(const CLI::App& cmd, ModelOptions& o, int64_t kv_positions) {
  const bool threads_given = cmd.count("--threads") > 0;
  const bool load_given = cmd.count("--load") > 0;
  const bool kv_given = cmd.count("--kv-type") > 0;
  if (threads_given && load_given && kv_given) return;
  const plan::ModelInventory inventory = plan::inventory_from_gguf(GgufFile::open(o.path));
  const plan::CpuRunSettings s = plan::choose_cpu_settings(inventory, plan::available_ram_bytes(),
                                                           physical_core_count(), kv_positions);
  if (!threads_given) o.threads = s.threads;
  if (!load_given) o.load = s.load == LoadMode::ram ? "ram" : "mmap";
  if (!kv_given) o.kv_type = s.kv_type == GgmlType::F16 ? "f16" : "q8_0";
  log::info(
      "plan: {}{}", s.reason,
      threads_given || load_given || kv_given ? " (flags given on the command line win)" : "");
}

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    int32_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || value < 0) {
      fail("token list: '{}' is not a token id (expected comma-separated non-negative integers)",
           item);
    }
    out.push_back(value);
    start = end + 1;
  }
  return out;
}

}  // namespace strata::cli
