#include "plan/given_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <regex>

#include "model/layer_spec.h"
#include "plan/placement.h"
#include "util/error.h"

namespace strata::plan {
namespace {

struct Override {
  std::regex pattern;
  int device = kCpuDevice;
  std::string text;
};

// "CPU" -> 0, "GPU1" / "CUDA1" / "Vulkan1" -> 2.
int device_of(const std::string& name, const HardwareProfile& hw, const std::string& flag) {
  if (name == "CPU") return kCpuDevice;
  for (const char* prefix : {"GPU", "CUDA", "Vulkan"}) {
    const std::string p = prefix;
    if (name.size() > p.size() && name.compare(0, p.size(), p) == 0 &&
        name.find_first_not_of("0123456789", p.size()) == std::string::npos) {
      int g = 0;
      const auto [end, ec] = std::from_chars(name.data() + p.size(), name.data() + name.size(), g);
      STRATA_CHECK(ec == std::errc() && end == name.data() + name.size(),
                   "-ot {}: '{}' is not a device number", flag, name);
      STRATA_CHECK(g < static_cast<int>(hw.gpus.size()),
                   "-ot {}: {} names GPU {}, and the plan has {} GPU(s)", flag, name, g,
                   hw.gpus.size());
      return g + 1;
    }
  }
  fail("-ot {}: unknown device '{}' (expected CPU, GPU0, CUDA0 or Vulkan0)", flag, name);
}

std::vector<Override> parse_overrides(const std::vector<std::string>& flags,
                                      const HardwareProfile& hw) {
  std::vector<Override> out;
  for (const std::string& f : flags) {
    const size_t eq = f.rfind('=');
    STRATA_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < f.size(),
                 "-ot {}: expected REGEX=DEVICE, e.g. blk\\.[0-9]\\.ffn_.*_exps=CPU", f);
    Override o;
    o.text = f;
    try {
      o.pattern = std::regex(f.substr(0, eq));
    } catch (const std::regex_error& e) {
      fail("-ot {}: not a regular expression ({})", f, e.what());
    }
    o.device = device_of(f.substr(eq + 1), hw, f);
    out.push_back(std::move(o));
  }
  return out;
}

// The device the first matching override gives `tensor`, if any.
std::optional<int> override_for(const std::vector<Override>& overrides, const std::string& tensor) {
  for (const Override& o : overrides)
    if (std::regex_search(tensor, o.pattern)) return o.device;
  return std::nullopt;
}

}  // namespace

Placement placement_from_flags(const ModelInventory& inv, const HardwareProfile& hw,
                               const GivenFlags& flags) {
  const int n_layer = inv.n_layer;
  const int moe = flags.cpu_moe ? n_layer : std::max(flags.n_cpu_moe, 0);
  Placement p = n_cpu_moe_placement(inv, hw, std::min(moe, n_layer));
  if (flags.gpu_layers >= 0 && flags.gpu_layers < n_layer) {  // -ngl N: the last N layers
    const int on_cpu = n_layer - flags.gpu_layers;
    for (int l = 0; l < on_cpu; ++l) {
      p.layers[l].attention_device = kCpuDevice;
      std::fill(p.layers[l].expert_device.begin(), p.layers[l].expert_device.end(), kCpuDevice);
    }
  }
  // llama.cpp puts the output layer on a GPU only when -ngl exceeds the layer count.
  if (flags.gpu_layers >= 0 && flags.gpu_layers <= n_layer) p.output_device = kCpuDevice;
  const std::vector<Override> overrides = parse_overrides(flags.overrides, hw);
  if (overrides.empty()) return p;
  for (int l = 0; l < n_layer; ++l) {
    LayerPlacement& lp = p.layers[static_cast<size_t>(l)];
    const auto name = [l](LayerTensor t) { return layer_tensor_name(t, l); };
    if (inv.n_expert > 0) {
      std::optional<int> d[3];
      int i = 0;
      for (LayerTensor t : {LayerTensor::gate_exps, LayerTensor::up_exps, LayerTensor::down_exps})
        d[i++] = override_for(overrides, name(t));
      STRATA_CHECK(d[0] == d[1] && d[1] == d[2],
                   "-ot: layer {}'s expert tensors (gate, up, down) go to different devices; "
                   "strata places an expert's three matrices together",
                   l);
      if (d[0]) std::fill(lp.expert_device.begin(), lp.expert_device.end(), *d[0]);
    }
    // A layer's attention (or Gated DeltaNet) goes where a rule sends its projections.
    for (LayerTensor t : {LayerTensor::attn_q, LayerTensor::attn_k, LayerTensor::attn_v,
                          LayerTensor::attn_output, LayerTensor::gdn_qkv, LayerTensor::gdn_out}) {
      if (const std::optional<int> d = override_for(overrides, name(t))) {
        lp.attention_device = *d;
        break;
      }
    }
  }
  if (const auto d = override_for(overrides, kOutputTensor)) p.output_device = *d;
  if (const auto d = override_for(overrides, kTokenEmbdTensor)) p.embeddings_device = *d;
  return p;
}

GivenEvaluation evaluate_given(const ModelInventory& inv, const HardwareProfile& hw,
                               const GivenFlags& flags, int64_t context,
                               const std::string& kv_type) {
  GivenEvaluation e;
  e.placement = placement_from_flags(inv, hw, flags);
  const double kv = kv_type_bytes(kv_type);
  const CostConstants& c = default_cost_constants();
  e.devices = device_usage(inv, hw, e.placement, context, kv, MemoryConstants{});
  for (const DeviceUsage& d : e.devices) {
    if (d.used() <= d.capacity_bytes) continue;
    e.fits = false;
    e.fit_error = fmt::format("{} needs {:.2f} GiB of its {:.2f} GiB", d.name,
                              static_cast<double>(d.used()) / 1073741824.0,
                              static_cast<double>(d.capacity_bytes) / 1073741824.0);
    break;
  }
  e.decode = estimate_decode(inv, hw, e.placement, kv, 0, c);
  e.decode_full = estimate_decode(inv, hw, e.placement, kv, context, c);
  e.prefill = estimate_prefill(inv, hw, e.placement, c);
  return e;
}

}  // namespace strata::plan
