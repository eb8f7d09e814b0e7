// `strata plan`: where every tensor should live on this (or a hypothetical) machine, and how fast
// that will run, before anything is loaded.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>

#include "cli/commands.h"
#include "cli/distributed_plan.h"
#include "cli/plan_quality.h"
#include "cli/plan_report.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "plan/given_placement.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "plan/report.h"
#include "plan/run_records.h"
#include "plan/step_buffers.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

int expert_layers_in_ram(const plan::Placement& p) {
  int n = 0;
  for (const auto& l : p.layers)
    n += std::any_of(l.expert_device.begin(), l.expert_device.end(),
                     [](int d) { return d == plan::kCpuDevice; });
  return n;
}

// The placement the user gave (llama.cpp flags) next to strata's own plan.
std::string given_text(const plan::GivenEvaluation& g, const plan::Plan& p) {
  std::string out = fmt::format(
      "\nThe given placement: {} layers with experts in RAM; decode {:.1f} tok/s (empty cache), "
      "{:.1f} at {} tokens; prompt {:.0f} tok/s; {}.\n",
      expert_layers_in_ram(g.placement), g.decode.tokens_per_second(),
      g.decode_full.tokens_per_second(), p.context, g.prefill.tokens_per_second,
      g.fits ? "fits" : "does NOT fit: " + g.fit_error);
  if (p.fits && g.decode.tokens_per_second() > 0) {
    out += fmt::format("strata's plan: decode {:.1f} tok/s ({:.2f}x the given placement).\n",
                       p.decode.tokens_per_second(),
                       p.decode.tokens_per_second() / g.decode.tokens_per_second());
  }
  return out;
}

nlohmann::json given_json(const plan::GivenEvaluation& g, const plan::Plan& p) {
  nlohmann::json j = {{"fits", g.fits},
                      {"cpu_expert_layers", expert_layers_in_ram(g.placement)},
                      {"decode_tok_s", g.decode.tokens_per_second()},
                      {"decode_tok_s_full_context", g.decode_full.tokens_per_second()},
                      {"prompt_tok_s", g.prefill.tokens_per_second},
                      {"devices", plan::device_usage_json(g.devices)}};
  if (!g.fits) j["fit_error"] = g.fit_error;
  if (g.decode.tokens_per_second() > 0)
    j["plan_speedup"] = p.decode.tokens_per_second() / g.decode.tokens_per_second();
  return j;
}

int64_t context_tokens(const std::string& text) {
  int64_t ctx = 0;
  try {
    size_t used = 0;
    ctx = std::stoll(text, &used);
    if (used != text.size()) ctx = 0;
  } catch (const std::exception&) {
    ctx = 0;
  }
  STRATA_CHECK(ctx > 0, "--ctx: expected a positive number of tokens or 'max', found '{}'", text);
  return ctx;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  struct Options {
    std::string model_path;
    std::string arch;
    std::string llama_cmd;  // expanded into flags before parsing (cli/llama_command.h)
    std::string quant_size;
    double bpw = 0;
    std::vector<std::string> gpus;
    std::string ram;
    int cores = 0;
    int threads = 0;
    double hop_ms = -1;
    std::string ctx = "32768";
    std::string kv_type = "f16";
    bool json = false;
    std::string svg;
    std::string profile;
    bool remeasure = false;
    bool whole_layers = false;
    std::string device = "auto";
    std::string vram_budget;  // caps each probed GPU's memory (an 8 GB card on a bigger GPU)
    plan::GivenFlags given;   // a placement to price next to the plan
    std::vector<std::string> quality;  // measured quality of files to compare (plan_quality.h)
    std::string hosts;                 // a split across hosts (plan/pipeline_plan.h)
    std::string link;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Predict the fastest placement of a model on this or a hypothetical machine");
  cmd->add_option("-m,--model,model", o->model_path,
                  "GGUF model file (-m FILE or the first argument)");
  std::string presets;
  for (const auto& name : plan::architecture_preset_names())
    presets += (presets.empty() ? "" : ", ") + name;
  cmd->add_option("--arch", o->arch, "Published architecture instead of a file: " + presets);
  cmd->add_option("--llama-cmd", o->llama_cmd,
                  "A whole llama.cpp command line, quoted as you run it ('llama-server -m F.gguf "
                  "-ngl 99 --n-cpu-moe 30 -c 32768'): its placement priced next to strata's plan; "
                  "flags plan does not know are named and left out");
  cmd->add_option("--quant-size", o->quant_size,
                  "With --arch: the quantized file's size, e.g. 18.56GB (G alone means GiB)");
  cmd->add_option("--bpw", o->bpw, "With --arch: bits per weight of the quantized matrices");
  cmd->add_option("--gpu", o->gpus,
                  "Hypothetical GPU: a name ('RTX 3060', 'RTX 4060 Ti:16G': published memory and "
                  "bandwidth), VRAM alone (8G: an RTX 2070-class 448 GB/s assumed) or "
                  "VRAM:GB/s[:PCIe GB/s] (8G:448; G = GiB); repeat for several; 'none' for a "
                  "CPU-only plan")
      ->take_all();
  cmd->add_option("--ram", o->ram,
                  "Hypothetical RAM SIZE[:GB/s], e.g. 32G:29.1 (G = GiB); SIZE alone assumes "
                  "dual-channel DDR4-3200 (35.8 GB/s read)");
  cmd->add_option("--cores", o->cores, "Physical cores (instead of the probed count)");
  cmd->add_option("-t,--threads", o->threads,
                  "Threads to plan for (default: physical cores); this machine's CPU is "
                  "calibrated at this count")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--hop-ms", o->hop_ms,
                  "CPU<->GPU latency per hop (one way), ms (default 0.029, from FIELD C2)");
  cmd->add_option("--ctx", o->ctx, "Context tokens to plan for, or 'max'")->capture_default_str();
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f16, q8_0, q4_0")->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable JSON output");
  cmd->add_option("--svg", o->svg, "Write the context-vs-speed curve to this SVG file");
  cmd->add_option("--profile", o->profile,
                  "Expert popularity profile (JSON: {\"expert_counts\": [[...] per layer]})");
  cmd->add_flag("--remeasure", o->remeasure,
                "Measure RAM and GPU bandwidth and calibrate the CPU again (ignore the cache)");
  cmd->add_option("--device", o->device,
                  "GPUs to probe and plan for: auto (every GPU, never a CPU-type Vulkan device "
                  "such as lavapipe), vk0[,vk1] (see strata devices), none (or cpu)")
      ->capture_default_str()
      ->transform([](std::string v) { return v == "cpu" ? std::string("none") : v; });
  cmd->add_option("--vram-budget", o->vram_budget,
                  "Plan each probed GPU as if it had only SIZE of memory (its measured bandwidth "
                  "kept), as run/bench/serve --vram-budget executes it, e.g. 8G");
  cmd->add_option("--quality", o->quality,
                  "`strata perplexity --kld BASE --json` results of files of this model (repeat "
                  "for each): their measured quality next to their predicted speed here")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--whole-layers", o->whole_layers,
                "Place only whole layers of experts (what llama.cpp can express)");
  cmd->add_option("--n-cpu-moe", o->given.n_cpu_moe,
                  "Price llama.cpp's --n-cpu-moe N next to the plan (experts of layers 0..N-1 "
                  "in RAM)")
      ->check(CLI::Range(0, 100000));
  cmd->add_flag("--cpu-moe", o->given.cpu_moe, "Price llama.cpp's --cpu-moe next to the plan");
  cmd->add_option("--gpu-layers,--n-gpu-layers", o->given.gpu_layers,
                  "Price llama.cpp's -ngl N next to the plan (the last N layers on the GPUs)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--override-tensor,--ot", o->given.overrides,
                  "Price llama.cpp's -ot REGEX=DEVICE next to the plan (repeatable), e.g. "
                  "'blk\\.([5-9]|[1-9][0-9])\\.ffn_.*_exps=CPU'");
  cmd->add_option("--hosts", o->hosts,
                  "Plan the model split across hosts (--distributed): NAME=RAM:GB/s:CORES,... "
                  "(e.g. desk=64G:40:8,old=32G:20:4), a JSON file, or 'measure' under mpirun "
                  "(each rank probes its host, the link is measured)");
  cmd->add_option("--link", o->link,
                  "With --hosts: the network between them, GBIT:MS (default 1:0.2, a gigabit "
                  "LAN)");
  cmd->callback([o] {
    STRATA_CHECK(o->model_path.empty() != o->arch.empty(),
                 "plan: give exactly one of -m FILE.gguf or --arch PRESET");
    plan::ModelInventory inv;
    if (!o->model_path.empty()) {
      STRATA_CHECK(o->quant_size.empty() && o->bpw == 0,
                   "plan: --quant-size and --bpw apply to --arch, not to a GGUF file");
      const GgufFile file = GgufFile::open(o->model_path);
      const std::vector<std::string> runnable = Model::supported_architectures();
      if (std::find(runnable.begin(), runnable.end(), file.architecture()) == runnable.end()) {
        log::warn(
            "{}: strata cannot run architecture '{}' yet (it runs {}); this plans its "
            "tensors as if it could",
            o->model_path, file.architecture(), fmt::join(runnable, ", "));
      }
      inv = plan::inventory_from_gguf(file);
    } else {
      const auto spec = plan::architecture_preset(o->arch);
      if (!spec) {
        std::string names;
        for (const auto& n : plan::architecture_preset_names()) names += " " + n;
        fail("plan: unknown architecture preset '{}' (expected one of:{})", o->arch, names);
      }
      STRATA_CHECK(!o->quant_size.empty() || o->bpw > 0,
                   "plan: --arch needs --quant-size SIZE or --bpw BITS for the weights' bytes");
      plan::WeightSize size;
      if (!o->quant_size.empty()) {
        // One meaning of G in strata: GiB. File sizes are usually listed in GB: say so.
        STRATA_CHECK(!std::isdigit(static_cast<unsigned char>(o->quant_size.back())),
                     "--quant-size {0}: give a unit: {0}GB as sites list file sizes, or {0}G "
                     "(G means GiB everywhere in strata)",
                     o->quant_size);
        size.file_bytes = plan::parse_size(o->quant_size, 1024);
      } else
        size.bits_per_weight = o->bpw;
      inv = plan::inventory_from_architecture(*spec, size);
    }
    if (!o->profile.empty()) plan::load_expert_popularity(inv, o->profile, o->model_path);

    STRATA_CHECK(o->link.empty() || !o->hosts.empty(), "--link describes the network of --hosts");
    if (!o->hosts.empty()) {
      plan::PlanGoals goals;
      goals.kv_type = o->kv_type;
      plan::kv_type_bytes(goals.kv_type);  // validates
      STRATA_CHECK(o->ctx != "max", "--hosts plans a given context; --ctx max is for one machine");
      goals.context = context_tokens(o->ctx);
      STRATA_CHECK(o->gpus.empty() && o->ram.empty() && o->cores == 0,
                   "--hosts describes every host; --gpu, --ram and --cores describe one machine");
      print_pipeline_plan(inv, o->hosts, o->link, goals, o->json);
      return;
    }

    MachineInputs machine;
    machine.model_path = o->model_path;
    machine.device = o->device;
    machine.threads = o->threads;
    machine.remeasure = o->remeasure;
    machine.vram_budget = o->vram_budget;
    machine.overrides.gpus = o->gpus;
    if (!o->ram.empty()) machine.overrides.ram = o->ram;
    if (o->cores != 0) machine.overrides.cores = o->cores;
    if (o->hop_ms >= 0) machine.overrides.hop_latency_ms = o->hop_ms;
    const plan::HardwareProfile hw = machine_profile(inv, machine);

    plan::PlanGoals goals;
    goals.kv_type = o->kv_type;
    plan::kv_type_bytes(goals.kv_type);  // validates
    if (goals.kv_type == "q4_0") {
      log::warn(
          "--kv-type q4_0 is priced as llama.cpp runs it; strata run and serve keep keys "
          "and values in f16 or q8_0");
    }
    goals.allow_single_experts = !o->whole_layers;
    if (o->ctx == "max") {
      goals.max_context = true;
    } else {
      goals.context = context_tokens(o->ctx);
    }
    // GPUs probed here run strata's own executor: its step buffers are counted as run counts
    // them. Hypothetical GPUs keep FIELD's runtime margin (fitted on llama.cpp's runs).
    const plan::MemoryConstants memory = planning_memory(inv, hw, goals, !o->gpus.empty());
    const plan::Plan p =
        plan::plan_placement(inv, hw, goals, plan::default_cost_constants(), memory);
    const auto table = plan::context_table(inv, hw, goals, memory);
    if (!o->svg.empty()) {
      std::ofstream out(o->svg);
      STRATA_CHECK(out.good(), "--svg: cannot write {}", o->svg);
      out << plan::context_svg(
          fmt::format("{}: predicted decode speed vs context ({} KV)", inv.name, goals.kv_type),
          table);
    }
    std::optional<plan::GivenEvaluation> given;
    if (o->given.any()) given = plan::evaluate_given(inv, hw, o->given, p.context, p.kv_type);
    std::vector<QualityRow> quality;
    if (!o->quality.empty()) quality = quality_rows(o->quality, hw, goals);
    if (o->json) {
      nlohmann::json j = plan::plan_json(inv, hw, p, table);
      if (given) j["given"] = given_json(*given, p);
      if (!quality.empty()) j["quality"] = quality_json(quality);
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{}", plan::plan_text(inv, hw, p, table));
      if (given) fmt::print("{}", given_text(*given, p));
      if (!quality.empty()) fmt::print("{}", quality_text(quality));
    }
    STRATA_CHECK(p.fits, "{}", p.fit_error);
  });
}

}  // namespace strata::cli
