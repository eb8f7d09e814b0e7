#include "plan/report.h"

#include <fmt/format.h>
#include <algorithm>

#include <charconv>
#include <cmath>

#include "plan/speculation_estimate.h"
#include "util/error.h"
#include "util/format_bytes.h"

namespace strata::plan {
namespace {

double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / 1073741824.0;
}

// attention, sliding (attention over a window: gpt-oss) or recurrent (Gated DeltaNet).
const char* layer_kind(const LayerInventory& l) {
  if (!l.has_kv_cache) return "recurrent";
  return l.kv_window > 0 ? "sliding" : "attention";
}

std::string context_label(int64_t ctx) {
  return ctx % 1024 == 0 ? fmt::format("{}K", ctx / 1024) : fmt::format("{}", ctx);
}

// Layers 0..N-1 with all experts in RAM, the rest on the GPUs: what --n-cpu-moe N expresses.
int leading_cpu_expert_layers(const Placement& p) {
  int n = 0;
  for (const auto& l : p.layers) {
    if (l.expert_device.empty() || std::any_of(l.expert_device.begin(), l.expert_device.end(),
                                               [](int d) { return d != kCpuDevice; }))
      break;
    ++n;
  }
  return n;
}

std::string experts_cell(const LayerPlacement& lp, const HardwareProfile& hw) {
  if (lp.expert_device.empty()) return "-";
  std::vector<int> count(hw.gpus.size() + 1, 0);
  for (int d : lp.expert_device) ++count[static_cast<size_t>(d)];
  std::string out;
  for (size_t d = 0; d < count.size(); ++d) {
    if (count[d] == 0) continue;
    if (!out.empty()) out += " + ";
    out += count[d] == static_cast<int>(lp.expert_device.size())
               ? fmt::format("all {}", device_name(hw, static_cast<int>(d)))
               : fmt::format("{} {}", count[d], device_name(hw, static_cast<int>(d)));
  }
  return out;
}

}  // namespace

std::vector<ContextRow> context_table(const ModelInventory& inv, const HardwareProfile& hw,
                                      const PlanGoals& goals, const MemoryConstants& memory) {
  std::vector<ContextRow> rows;
  for (int64_t ctx : {16384, 32768, 65536, 131072, 262144}) {
    PlanGoals g = goals;
    g.max_context = false;
    g.context = ctx;
    const Plan p = plan_placement(inv, hw, g, default_cost_constants(), memory);
    rows.push_back({ctx, p.fits, p.cpu_expert_layers, p.decode.tokens_per_second(),
                    p.decode_full.tokens_per_second()});
  }
  return rows;
}

std::string llama_cpp_flags(const ModelInventory& /*inv*/, const HardwareProfile& hw,
                            const Plan& plan) {
  const Placement& p = plan.whole_layer_placement;
  int gpu_layers = 0;
  for (const auto& l : p.layers) gpu_layers += l.attention_device != kCpuDevice ? 1 : 0;
  std::string flags;
  if (hw.gpus.empty()) {
    flags = "-ngl 0";
  } else if (gpu_layers == static_cast<int>(p.layers.size()) && p.output_device != kCpuDevice) {
    flags = "-ngl 99";
  } else {
    flags = fmt::format("-ngl {}", gpu_layers);
  }
  const int leading = leading_cpu_expert_layers(p);
  if (leading == plan.whole_layer_cpu_expert_layers && leading > 0) {
    flags += fmt::format(" --n-cpu-moe {}", leading);
  } else if (plan.whole_layer_cpu_expert_layers > 0) {
    std::string layers;
    for (size_t l = 0; l < p.layers.size(); ++l) {
      const auto& ed = p.layers[l].expert_device;
      if (!ed.empty() && ed[0] == kCpuDevice && p.layers[l].attention_device != kCpuDevice)
        layers += (layers.empty() ? "" : "|") + std::to_string(l);
    }
    if (!layers.empty()) flags += fmt::format(" -ot \"blk\\.({})\\.ffn_.*_exps\\.=CPU\"", layers);
  }
  if (hw.gpus.size() > 1) {
    std::vector<int> per_gpu(hw.gpus.size(), 0);
    for (const auto& l : p.layers) {
      if (l.attention_device != kCpuDevice) ++per_gpu[static_cast<size_t>(l.attention_device - 1)];
    }
    std::string split;
    for (int n : per_gpu) split += (split.empty() ? "" : ",") + std::to_string(n);
    flags += " --tensor-split " + split;
  }
  flags += " -fa on";
  flags += fmt::format(" -c {}", plan.context);
  if (plan.kv_type != "f16") flags += fmt::format(" -ctk {0} -ctv {0}", plan.kv_type);
  flags += fmt::format(" -t {}", hw.cpu_calibration ? hw.threads : hw.physical_cores);
  return flags;
}

// The predicted verify costs and what drafts gain at given acceptance (plan/speculation_estimate).
std::string speculation_text(const SpeculationEstimate& s) {
  std::string out =
      "\nSpeculative decoding (predicted; `strata bench --verify 8` measures the costs)\n"
      "  a step checking B tokens costs";
  for (int b : {2, 4, 8, 16}) {
    out += fmt::format(" {:.2f}x (B {}, {:.1f} experts/layer){}", s.verify_cost[b], b,
                       s.experts_per_layer[b], b == 16 ? "" : ",");
  }
  out += "\n  acceptance  ";
  for (const auto& g : s.gains) out += fmt::format(" {:>5.2f}", g.acceptance);
  out += "\n  draft tokens";
  for (const auto& g : s.gains) out += fmt::format(" {:>5}", g.draft_tokens);
  out += "\n  speed-up    ";
  for (const auto& g : s.gains) out += fmt::format(" {:>4.2f}x", g.speedup);
  return out + "\n";
}

std::string plan_text(const ModelInventory& inv, const HardwareProfile& hw, const Plan& plan,
                      const std::vector<ContextRow>& table) {
  std::string out;
  out +=
      fmt::format("Model: {} ({}), {} layers, {} experts ({} used), {:.2f} GiB\n", inv.name,
                  inv.source, inv.n_layer, inv.n_expert, inv.n_expert_used, gib(inv.total_bytes()));
  out += fmt::format("Expert popularity: {}\n", inv.popularity_source);
  out += fmt::format("Hardware{}: {} physical cores, RAM {:.1f} GiB at {:.1f} GB/s ({})\n",
                     hw.hypothetical ? " (hypothetical values given)" : "", hw.physical_cores,
                     gib(hw.ram_total_bytes), hw.ram_bandwidth_gbps, hw.ram_bandwidth_source);
  for (size_t g = 0; g < hw.gpus.size(); ++g) {
    const auto& gpu = hw.gpus[g];
    out += fmt::format(
        "  GPU{}: {}, {:.2f} GiB ({:.2f} GiB free), {:.0f} GB/s, upload {:.1f} GB/s{}\n", g,
        gpu.name, gib(gpu.vram_total_bytes), gib(gpu.vram_free_bytes), gpu.bandwidth_gbps,
        gpu.pcie_gbps, gpu.bandwidth_source.empty() ? "" : " (" + gpu.bandwidth_source + ")");
  }
  if (hw.gpus.empty()) out += "  no GPU\n";
  if (hw.cpu_calibration) {
    const CpuCalibration& c = *hw.cpu_calibration;
    std::string rates;
    for (const auto& t : c.types) {
      rates += fmt::format("{}{} {:.1f}/{:.1f}/{:.1f}", rates.empty() ? "" : ", ",
                           ggml_type_name(t.type), t.gemv_gbps, t.expert_gemv_gbps,
                           t.expert_down_gemv_gbps);
    }
    out += fmt::format(
        "CPU calibrated with {} threads ({}): decode GB/s (matrix/expert gate+up/expert down) {}; "
        "{:.1f} us per product\n",
        c.threads, c.source, rates, c.gemv_fixed_us);
    if (c.learned_runs > 0) {
      out += fmt::format(
          "  learned from {} recorded run(s) on this machine ({}): its predictions were "
          "{:+.1f}% (decode) and {:+.1f}% (prefill) off them (median); corrected\n",
          c.learned_runs, c.learned_sources, 100 * c.learned_decode_error,
          100 * c.learned_prefill_error);
    }
  }
  out += fmt::format("Goal: context {} tokens, KV cache {}\n\n", plan.context, plan.kv_type);
  if (!plan.fits) out += fmt::format("WARNING: {}\n\n", plan.fit_error);

  out += fmt::format("Placement\n  {:>5}  {:<9}  {:<9}  {:<22}  {:>10}\n", "layer", "kind",
                     "attn+KV", "routed experts", "GPU bytes");
  for (size_t l = 0; l < plan.placement.layers.size(); ++l) {
    const auto& lp = plan.placement.layers[l];
    const auto& li = inv.layers[l];
    uint64_t gpu_bytes = lp.attention_device != kCpuDevice ? li.dense_bytes() : 0;
    for (int d : lp.expert_device) gpu_bytes += d != kCpuDevice ? li.expert_slice_bytes : 0;
    out += fmt::format("  {:>5}  {:<9}  {:<9}  {:<22}  {:>6.0f} MiB\n", l, layer_kind(li),
                       device_name(hw, lp.attention_device), experts_cell(lp, hw),
                       gpu_bytes / 1048576.0);
  }
  out += fmt::format("  output head on {}, token embeddings on {}\n\n",
                     device_name(hw, plan.placement.output_device),
                     device_name(hw, plan.placement.embeddings_device));
  out += "Memory\n";
  for (const auto& d : plan.devices) {
    out += fmt::format(
        "  {:<4} weights {:>7.2f} GiB + KV/state {:>6.2f} GiB = {:>7.2f} of {:>7.2f} GiB "
        "usable{}{}\n",
        d.name, gib(d.weight_bytes), gib(d.kv_bytes), gib(d.used()), gib(d.capacity_bytes),
        d.work_bytes ? fmt::format(" (after {:.3f} GiB of step buffers)", gib(d.work_bytes))
                     : std::string(),
        d.tile_bytes ? fmt::format("; the weights include a {} copy packed into GEMM tiles",
                                   format_bytes(d.tile_bytes))
                     : std::string());
  }
  const auto& dc = plan.decode;
  out += fmt::format(
      "\nPredicted\n  generation: {:.1f} tok/s ({:.2f} ms per token), {:.1f} tok/s "
      "with the cache full at {} tokens\n",
      dc.tokens_per_second(), dc.total_ms, plan.decode_full.tokens_per_second(), plan.context);
  if (dc.overlap_ms > 0) {
    out += fmt::format(
        "  with strata's overlap (the CPU's experts computed while the GPU computes its own): "
        "{:.1f} tok/s ({:.2f} ms hidden per token)\n",
        dc.overlapped_tokens_per_second(), dc.overlap_ms);
  }
  out += fmt::format("  prompt processing: {:.0f} tok/s ({}-token micro-batches)\n",
                     plan.prefill.tokens_per_second, default_cost_constants().prefill_micro_batch);
  out += fmt::format("  bottleneck: {}\n", plan.bottleneck);
  std::string parts;
  for (size_t d = 0; d < dc.weight_ms.size(); ++d) {
    parts += fmt::format("{} weights {:.2f} ms, ", device_name(hw, static_cast<int>(d)),
                         dc.weight_ms[d]);
  }
  double kv = 0;
  for (double v : dc.kv_ms) kv += v;
  out += fmt::format("  per token: {}KV/state {:.2f} ms, fixed {:.2f} ms, hops {:.2f} ms\n", parts,
                     kv, dc.fixed_ms, dc.hop_ms);
  out += speculation_text(estimate_speculation(inv, plan.placement, dc, plan.prefill));

  out += "\nContext vs speed (plan re-made for each context)\n";
  out += fmt::format("  {:>8}  {:>16}  {:>12}  {:>14}\n", "context", "CPU expert layers",
                     "tok/s empty", "tok/s full");
  for (const auto& r : table) {
    if (!r.fits) {
      out += fmt::format("  {:>8}  does not fit\n", context_label(r.context));
      continue;
    }
    out += fmt::format(
        "  {:>8}  {:>16}  {:>12.1f}  {:>14.1f}{}\n", context_label(r.context), r.cpu_expert_layers,
        r.tok_s_empty, r.tok_s_full,
        inv.n_ctx_train > 0 && r.context > inv.n_ctx_train ? "  (beyond trained context)" : "");
  }

  out += "\nllama.cpp equivalent\n  " + llama_cpp_flags(inv, hw, plan) + "\n";
  if (plan.partial_layers > 0) {
    out += fmt::format(
        "  strata's plan splits the experts of {} layer(s) between RAM and VRAM; llama.cpp cannot: "
        "-ot places whole tensors and one tensor holds all experts of a layer. The flags above are "
        "the nearest whole-layer plan: {:.1f} tok/s predicted ({} expert layers in RAM) vs "
        "{:.1f}.\n",
        plan.partial_layers, plan.whole_layer_decode.tokens_per_second(),
        plan.whole_layer_cpu_expert_layers, dc.tokens_per_second());
  }
  return out;
}

nlohmann::json device_usage_json(const std::vector<DeviceUsage>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : devices) {
    out.push_back({{"device", d.name},
                   {"capacity_bytes", d.capacity_bytes},
                   {"weight_bytes", d.weight_bytes},
                   {"tile_bytes", d.tile_bytes},
                   {"kv_bytes", d.kv_bytes},
                   {"work_bytes", d.work_bytes}});
  }
  return out;
}

nlohmann::json plan_json(const ModelInventory& inv, const HardwareProfile& hw, const Plan& plan,
                         const std::vector<ContextRow>& table) {
  nlohmann::json j;
  j["model"] = {{"name", inv.name},
                {"arch", inv.arch},
                {"source", inv.source},
                {"layers", inv.n_layer},
                {"experts", inv.n_expert},
                {"experts_used", inv.n_expert_used},
                {"total_bytes", inv.total_bytes()},
                {"routed_expert_bytes", inv.routed_expert_bytes()},
                {"popularity", inv.popularity_source}};
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : hw.gpus) {
    gpus.push_back({{"name", g.name},
                    {"vram_total_bytes", g.vram_total_bytes},
                    {"vram_free_bytes", g.vram_free_bytes},
                    {"bandwidth_gbps", g.bandwidth_gbps},
                    {"pcie_gbps", g.pcie_gbps},
                    {"bandwidth_source", g.bandwidth_source},
                    {"hypothetical", g.hypothetical}});
  }
  j["hardware"] = {{"cpu_model", hw.cpu_model},
                   {"physical_cores", hw.physical_cores},
                   {"simd", hw.simd},
                   {"ram_total_bytes", hw.ram_total_bytes},
                   {"ram_available_bytes", hw.ram_available_bytes},
                   {"ram_bandwidth_gbps", hw.ram_bandwidth_gbps},
                   {"ram_bandwidth_source", hw.ram_bandwidth_source},
                   {"hop_latency_ms", hw.hop_latency_ms},
                   {"hypothetical", hw.hypothetical},
                   {"threads", hw.threads},
                   {"gpus", gpus}};
  if (hw.cpu_calibration) {
    const CpuCalibration& c = *hw.cpu_calibration;
    nlohmann::json& out = j["hardware"]["cpu_calibration"] = calibration_json(c);
    out["source"] = c.source;
    out["seconds"] = c.seconds;
    if (c.learned_runs > 0) {
      out["learned"] = {{"runs", c.learned_runs},
                        {"sources", c.learned_sources},
                        {"decode_error", c.learned_decode_error},
                        {"prefill_error", c.learned_prefill_error},
                        {"decode_correction", c.decode_correction},
                        {"prefill_correction", c.prefill_correction}};
    }
  }
  j["goal"] = {{"context", plan.context}, {"kv_type", plan.kv_type}};
  j["fits"] = plan.fits;
  if (!plan.fits) j["fit_error"] = plan.fit_error;
  j["devices"] = device_usage_json(plan.devices);
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < plan.placement.layers.size(); ++l) {
    const auto& lp = plan.placement.layers[l];
    nlohmann::json experts = nlohmann::json::object();
    for (size_t e = 0; e < lp.expert_device.size(); ++e) {
      const std::string dev = device_name(hw, lp.expert_device[e]);
      if (!experts.contains(dev)) experts[dev] = nlohmann::json::array();
      experts[dev].push_back(e);
    }
    layers.push_back({{"layer", l},
                      {"kind", layer_kind(inv.layers[l])},
                      {"kv_window", inv.layers[l].kv_window},
                      {"attention", device_name(hw, lp.attention_device)},
                      {"dense_bytes", inv.layers[l].dense_bytes()},
                      {"expert_slice_bytes", inv.layers[l].expert_slice_bytes},
                      {"experts", experts}});
  }
  j["layers"] = layers;
  j["output_device"] = device_name(hw, plan.placement.output_device);
  j["embeddings_device"] = device_name(hw, plan.placement.embeddings_device);
  j["predicted"] = {{"decode_tok_s", plan.decode.tokens_per_second()},
                    {"decode_ms", plan.decode.total_ms},
                    {"decode_tok_s_full_context", plan.decode_full.tokens_per_second()},
                    {"prompt_tok_s", plan.prefill.tokens_per_second},
                    {"bottleneck", plan.bottleneck},
                    {"fixed_ms", plan.decode.fixed_ms},
                    {"hop_ms", plan.decode.hop_ms},
                    {"cpu_expert_ms", plan.decode.cpu_expert_ms},
                    {"overlap_ms", plan.decode.overlap_ms},
                    {"decode_tok_s_overlapped", plan.decode.overlapped_tokens_per_second()},
                    {"decode_weight_ms", plan.decode.weight_ms},
                    {"decode_kv_ms", plan.decode.kv_ms},
                    {"prompt_compute_ms", plan.prefill.compute_ms},
                    {"prompt_attention_ms", plan.prefill.attention_ms},
                    {"prompt_serial_ms", plan.prefill.serial_ms},
                    {"prompt_micro_batch_ms", plan.prefill.micro_batch_ms}};
  const SpeculationEstimate spec =
      estimate_speculation(inv, plan.placement, plan.decode, plan.prefill);
  nlohmann::json gains = nlohmann::json::array();
  for (const auto& g : spec.gains) {
    gains.push_back(
        {{"acceptance", g.acceptance}, {"draft_tokens", g.draft_tokens}, {"speedup", g.speedup}});
  }
  j["predicted"]["speculation"] = {{"verify_cost", spec.verify_cost},
                                   {"experts_per_layer", spec.experts_per_layer},
                                   {"gains", gains}};
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : table) {
    rows.push_back({{"context", r.context},
                    {"fits", r.fits},
                    {"cpu_expert_layers", r.cpu_expert_layers},
                    {"decode_tok_s", r.tok_s_empty},
                    {"decode_tok_s_full_context", r.tok_s_full}});
  }
  j["context_table"] = rows;
  j["llama_cpp"] = {{"flags", llama_cpp_flags(inv, hw, plan)},
                    {"cpu_expert_layers", plan.whole_layer_cpu_expert_layers},
                    {"decode_tok_s", plan.whole_layer_decode.tokens_per_second()},
                    {"single_experts_expressible", plan.partial_layers == 0}};
  return j;
}

std::string context_svg(const std::string& title, const std::vector<ContextRow>& table) {
  const double w = 640, h = 400, left = 60, right = 20, top = 40, bottom = 50;
  double max_tok = 1;
  for (const auto& r : table) max_tok = std::max({max_tok, r.tok_s_empty, r.tok_s_full});
  max_tok = std::ceil(max_tok / 10) * 10;
  const size_t n = table.size();
  auto x = [&](size_t i) {
    return left + (w - left - right) * (n > 1 ? double(i) / double(n - 1) : 0.5);
  };
  auto y = [&](double v) { return top + (h - top - bottom) * (1 - v / max_tok); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"14\">{3}</text>\n",
      w, h, left, title);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left,
                     top, h - bottom);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                     h - bottom, w - right);
  for (int k = 0; k <= 5; ++k) {
    const double v = max_tok * k / 5;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.0f}</text>\n", left - 6,
                       y(v) + 4, v);
  }
  for (size_t i = 0; i < n; ++i) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x(i),
                       h - bottom + 18, context_label(table[i].context));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">context (tokens)</text>\n",
                     (left + w - right) / 2, h - 10);
  svg += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">"
      "decode tok/s</text>\n",
      (top + h - bottom) / 2, (top + h - bottom) / 2);
  const std::pair<const char*, bool> series[] = {{"#1f77b4", true}, {"#d62728", false}};
  for (const auto& [color, empty] : series) {
    std::string points;
    for (size_t i = 0; i < n; ++i) {
      if (!table[i].fits) continue;
      const double v = empty ? table[i].tok_s_empty : table[i].tok_s_full;
      points += fmt::format("{:.1f},{:.1f} ", x(i), y(v));
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", x(i), y(v),
                         color);
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       points, color);
  }
  svg += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" fill=\"#1f77b4\">empty cache</text>\n"
      "<text x=\"{0}\" y=\"{2}\" fill=\"#d62728\">cache full</text>\n</svg>\n",
      w - right - 110, top + 10, top + 26);
  return svg;
}

namespace {

int device_from_name(const nlohmann::json& name, int gpus, const std::string& where) {
  STRATA_CHECK(name.is_string(), "plan: {} names no device (expected \"CPU\" or \"GPU0\")", where);
  const std::string s = name.get<std::string>();
  if (s == "CPU") return kCpuDevice;
  int g = -1;
  if (s.size() > 3 && s.compare(0, 3, "GPU") == 0 &&
      s.find_first_not_of("0123456789", 3) == std::string::npos) {
    const auto [end, ec] = std::from_chars(s.data() + 3, s.data() + s.size(), g);
    if (ec != std::errc() || end != s.data() + s.size()) g = -1;
  }
  STRATA_CHECK(g >= 0 && g < gpus, "plan: {} is on '{}', expected CPU or GPU0..GPU{}", where, s,
               gpus - 1);
  return g + 1;
}

}  // namespace

Placement placement_from_json(const nlohmann::json& j, const ModelInventory& inv, int gpus) {
  STRATA_CHECK(j.is_object() && j.contains("layers") && j["layers"].is_array(),
               "plan: expected the JSON of `strata plan --json` (an object with \"layers\")");
  const nlohmann::json& layers = j["layers"];
  STRATA_CHECK(static_cast<int>(layers.size()) == inv.n_layer,
               "plan: {} layers in the plan, the model {} has {}", layers.size(), inv.name,
               inv.n_layer);
  Placement p;
  p.layers.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const nlohmann::json& lj = layers[l];
    const std::string where = fmt::format("layer {}", l);
    STRATA_CHECK(lj.is_object() && lj.contains("attention"), "plan: {} has no \"attention\" device",
                 where);
    LayerPlacement& lp = p.layers[l];
    lp.attention_device = device_from_name(lj["attention"], gpus, where + "'s attention");
    lp.expert_device.assign(static_cast<size_t>(inv.n_expert), -1);
    if (lj.contains("experts")) {
      STRATA_CHECK(lj["experts"].is_object(), "plan: {}'s experts are not a device -> ids map",
                   where);
      for (const auto& [dev, ids] : lj["experts"].items()) {
        const int d = device_from_name(dev, gpus, where + "'s experts");
        STRATA_CHECK(ids.is_array(), "plan: {}'s experts on {} are not a list", where, dev);
        for (const nlohmann::json& id : ids) {
          STRATA_CHECK(
              id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < inv.n_expert,
              "plan: {} names expert {} (the model has {})", where, id.dump(), inv.n_expert);
          int& slot = lp.expert_device[id.get<size_t>()];
          STRATA_CHECK(slot < 0, "plan: {} places expert {} twice", where, id.dump());
          slot = d;
        }
      }
    }
    for (size_t e = 0; e < lp.expert_device.size(); ++e)
      STRATA_CHECK(lp.expert_device[e] >= 0, "plan: {} does not place expert {}", where, e);
  }
  const auto optional_device = [&](const char* key) {
    return j.contains(key) ? device_from_name(j[key], gpus, key) : kCpuDevice;
  };
  p.output_device = optional_device("output_device");
  p.embeddings_device = optional_device("embeddings_device");
  return p;
}

}  // namespace strata::plan
