#include "plan/placement.h"

#include <algorithm>
#include <numeric>

#include "plan/tile_copy.h"
#include "util/error.h"

namespace strata::plan {
namespace {

uint64_t layer_kv_bytes(const ModelInventory& inv, size_t layer, int64_t context, double kv_elem) {
  const LayerInventory& l = inv.layers[layer];
  if (!l.has_kv_cache) return l.recurrent_state_bytes;
  return static_cast<uint64_t>(inv.layer_kv_bytes_per_token(kv_elem) *
                               static_cast<double>(context));
}

std::vector<uint64_t> capacities(const HardwareProfile& hw, const MemoryConstants& memory) {
  std::vector<uint64_t> cap(hw.gpus.size() + 1, 0);
  const uint64_t total = hw.ram_total_bytes;
  cap[0] = hw.ram_bandwidth_source == "given"
               ? (total > memory.os_reserve_bytes ? total - memory.os_reserve_bytes : 0)
               : hw.ram_available_bytes;
  for (size_t g = 0; g < hw.gpus.size(); ++g) {
    const uint64_t free = hw.gpus[g].vram_free_bytes;
    const uint64_t kept = memory.gpu_runtime_margin_bytes + memory.gpu_work_bytes;
    cap[g + 1] = free > kept ? free - kept : 0;
  }
  return cap;
}

// GPUs fastest first (device ids).
std::vector<int> gpus_by_speed(const HardwareProfile& hw) {
  std::vector<int> order(hw.gpus.size());
  std::iota(order.begin(), order.end(), 1);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return hw.gpus[static_cast<size_t>(a - 1)].bandwidth_gbps >
           hw.gpus[static_cast<size_t>(b - 1)].bandwidth_gbps;
  });
  return order;
}

// Attention, dense weights and KV of consecutive layers go to the GPUs (fastest first), split
// in proportion to their capacity so every GPU keeps room for experts; layers that do not fit
// stay on the CPU. The output head goes to the last GPU used when it fits.
Placement place_dense(const ModelInventory& inv, const HardwareProfile& hw,
                      const std::vector<uint64_t>& cap, std::vector<uint64_t>& used,
                      int64_t context, double kv_elem, bool ignore_capacity) {
  Placement p = cpu_placement(inv);
  const std::vector<int> order = gpus_by_speed(hw);
  if (order.empty()) return p;
  double total_need = static_cast<double>(inv.output_bytes), total_cap = 0;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    total_need +=
        static_cast<double>(inv.layers[l].dense_bytes() + layer_kv_bytes(inv, l, context, kv_elem));
  }
  for (int g : order) total_cap += static_cast<double>(cap[static_cast<size_t>(g)]);
  size_t gi = 0;
  double assigned = 0;  // need assigned to GPUs before the current one
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const uint64_t need = inv.layers[l].dense_bytes() + layer_kv_bytes(inv, l, context, kv_elem);
    while (gi < order.size()) {
      const size_t dev = static_cast<size_t>(order[gi]);
      const bool last = gi + 1 == order.size();
      const double share =
          ignore_capacity
              ? total_need / static_cast<double>(order.size()) * (gi + 1)
              : total_need *
                    std::accumulate(order.begin(), order.begin() + gi + 1, 0.0,
                                    [&](double s, int g) {
                                      return s + static_cast<double>(cap[static_cast<size_t>(g)]);
                                    }) /
                    std::max(total_cap, 1.0);
      const bool fits = ignore_capacity || used[dev] + need <= cap[dev];
      const bool within_share = last || assigned + static_cast<double>(need) / 2 <= share;
      if (fits && within_share) break;
      ++gi;
    }
    if (gi == order.size()) break;  // the rest stays on the CPU
    const size_t dev = static_cast<size_t>(order[gi]);
    p.layers[l].attention_device = order[gi];
    used[dev] += need;
    assigned += static_cast<double>(need);
  }
  // The LM head on the GPU of the last layer, when it fits there: the executors run the head
  // where the last layer's output is (a GPU holding only earlier layers would cost a hop back).
  if (!inv.layers.empty()) {
    const int dev = p.layers.back().attention_device;
    if (dev != kCpuDevice &&
        (ignore_capacity ||
         used[static_cast<size_t>(dev)] + inv.output_bytes <= cap[static_cast<size_t>(dev)])) {
      p.output_device = dev;
      used[static_cast<size_t>(dev)] += inv.output_bytes;
    }
  }
  if (inv.layers.empty() && !order.empty() &&
      used[static_cast<size_t>(order[0])] + inv.output_bytes <=
          cap[static_cast<size_t>(order[0])]) {
    p.output_device = order[0];
  }
  return p;
}

struct Unit {
  size_t layer;
  size_t expert;
  double popularity;
};

// Experts go to the GPU that holds their layer's attention (no extra hop). Whole layers first
// (last layers first, as llama.cpp's --n-cpu-moe keeps the first N in RAM), then, when single
// experts are allowed, the most popular remaining experts into what is left.
void place_experts(const ModelInventory& inv, Placement& p, const std::vector<uint64_t>& cap,
                   std::vector<uint64_t>& used, bool whole_layers_first, bool single_experts) {
  if (inv.n_expert == 0) return;
  if (whole_layers_first) {
    for (size_t l = inv.layers.size(); l-- > 0;) {
      const int dev = p.layers[l].attention_device;
      if (dev == kCpuDevice) continue;
      const uint64_t bytes = inv.layers[l].expert_slice_bytes * static_cast<uint64_t>(inv.n_expert);
      if (used[static_cast<size_t>(dev)] + bytes > cap[static_cast<size_t>(dev)]) continue;
      used[static_cast<size_t>(dev)] += bytes;
      std::fill(p.layers[l].expert_device.begin(), p.layers[l].expert_device.end(), dev);
    }
  }
  if (!single_experts) return;
  std::vector<Unit> units;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    if (p.layers[l].attention_device == kCpuDevice) continue;
    for (size_t e = 0; e < static_cast<size_t>(inv.n_expert); ++e) {
      if (p.layers[l].expert_device[e] == kCpuDevice) units.push_back({l, e, inv.popularity[l][e]});
    }
  }
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) {
    if (a.popularity != b.popularity) return a.popularity > b.popularity;
    return a.layer > b.layer;
  });
  for (const Unit& u : units) {
    const int dev = p.layers[u.layer].attention_device;
    const uint64_t bytes = inv.layers[u.layer].expert_slice_bytes;
    if (used[static_cast<size_t>(dev)] + bytes > cap[static_cast<size_t>(dev)]) continue;
    used[static_cast<size_t>(dev)] += bytes;
    p.layers[u.layer].expert_device[u.expert] = dev;
  }
}

int count_cpu_expert_layers(const ModelInventory& inv, const Placement& p, int* partial) {
  int cpu = 0, split = 0;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const auto& ed = p.layers[l].expert_device;
    if (ed.empty()) continue;
    const long on_cpu = std::count(ed.begin(), ed.end(), kCpuDevice);
    cpu += on_cpu > 0 ? 1 : 0;
    split += on_cpu > 0 && on_cpu < static_cast<long>(ed.size()) ? 1 : 0;
  }
  if (partial) *partial = split;
  return cpu;
}

Plan plan_at(const ModelInventory& inv, const HardwareProfile& hw, const PlanGoals& goals,
             int64_t context, const CostConstants& costs, const MemoryConstants& memory) {
  Plan plan;
  plan.context = context;
  plan.kv_type = goals.kv_type;
  const double kv_elem = kv_type_bytes(goals.kv_type);
  const std::vector<uint64_t> cap = capacities(hw, memory);
  std::vector<uint64_t> dense_used(cap.size(), 0);
  const Placement dense = place_dense(inv, hw, cap, dense_used, context, kv_elem, false);

  // Candidates: whole layers only (what llama.cpp can express); whole layers then single
  // experts; single experts by popularity alone. The fastest wins.
  struct Candidate {
    Placement placement;
    DecodeEstimate decode;
  };
  std::vector<Candidate> candidates;
  const bool singles = goals.allow_single_experts;
  for (int variant = 0; variant < (singles ? 3 : 1); ++variant) {
    Placement p = dense;
    std::vector<uint64_t> used = dense_used;
    place_experts(inv, p, cap, used, variant != 2, variant != 0);
    candidates.push_back({p, estimate_decode(inv, hw, p, kv_elem, 0, costs)});
  }
  plan.whole_layer_placement = candidates[0].placement;
  plan.whole_layer_decode = candidates[0].decode;
  plan.whole_layer_cpu_expert_layers =
      count_cpu_expert_layers(inv, candidates[0].placement, nullptr);
  const auto best = std::min_element(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.decode.total_ms < b.decode.total_ms; });
  plan.placement = best->placement;
  plan.decode = best->decode;
  plan.decode_full = estimate_decode(inv, hw, plan.placement, kv_elem, context, costs);
  plan.prefill = estimate_prefill(inv, hw, plan.placement, costs);
  plan.bottleneck = bottleneck_sentence(plan.decode, hw, costs);
  plan.cpu_expert_layers = count_cpu_expert_layers(inv, plan.placement, &plan.partial_layers);
  plan.devices = device_usage(inv, hw, plan.placement, context, kv_elem, memory);
  plan.fits = true;
  for (const auto& d : plan.devices) {
    if (d.used() > d.capacity_bytes) {
      plan.fits = false;
      plan.fit_error = fmt::format(
          "does not fit: {} needs {:.2f} GiB for weights and {:.2f} GiB of KV cache at {} tokens, "
          "but has {:.2f} GiB usable",
          d.name, d.weight_bytes / 1073741824.0, d.kv_bytes / 1073741824.0, context,
          d.capacity_bytes / 1073741824.0);
    }
  }
  return plan;
}

}  // namespace

bool runs_on_cpu_only(const Placement& p) {
  if (p.output_device != kCpuDevice || p.embeddings_device != kCpuDevice) return false;
  return std::all_of(p.layers.begin(), p.layers.end(), [](const LayerPlacement& l) {
    return l.attention_device == kCpuDevice &&
           std::all_of(l.expert_device.begin(), l.expert_device.end(),
                       [](int d) { return d == kCpuDevice; });
  });
}

std::vector<DeviceUsage> device_usage(const ModelInventory& inv, const HardwareProfile& hw,
                                      const Placement& p, int64_t context, double kv_elem,
                                      const MemoryConstants& memory) {
  const std::vector<uint64_t> cap = capacities(hw, memory);
  std::vector<DeviceUsage> usage(cap.size());
  for (size_t d = 0; d < cap.size(); ++d) {
    usage[d].name = device_name(hw, static_cast<int>(d));
    usage[d].capacity_bytes = cap[d];
    if (d > 0) usage[d].work_bytes = memory.gpu_work_bytes;
  }
  usage[static_cast<size_t>(p.embeddings_device)].weight_bytes +=
      inv.embeddings_bytes + inv.other_bytes;
  usage[static_cast<size_t>(p.output_device)].weight_bytes += inv.output_bytes;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const auto& lp = p.layers[l];
    auto& a = usage[static_cast<size_t>(lp.attention_device)];
    a.weight_bytes += inv.layers[l].dense_bytes();
    a.kv_bytes += layer_kv_bytes(inv, l, context, kv_elem);
    for (int dev : lp.expert_device) {
      usage[static_cast<size_t>(dev)].weight_bytes += inv.layers[l].expert_slice_bytes;
    }
    // The runtime's host copies of a recurrent state, in RAM wherever the layer runs: the one
    // the prefix cache resumes from, and the one a drafted step is restored from after a
    // rejected draft (runtime/scheduler_slot.h).
    if (!inv.layers[l].has_kv_cache)
      usage[kCpuDevice].kv_bytes += 2 * inv.layers[l].recurrent_state_bytes;
  }
  usage[kCpuDevice].tile_bytes = packed_tile_copy_bytes(inv);
  usage[kCpuDevice].weight_bytes += usage[kCpuDevice].tile_bytes;
  return usage;
}

Placement n_cpu_moe_placement(const ModelInventory& inv, const HardwareProfile& hw, int n_cpu_moe) {
  std::vector<uint64_t> cap(hw.gpus.size() + 1, 0), used(hw.gpus.size() + 1, 0);
  for (size_t g = 0; g < hw.gpus.size(); ++g) cap[g + 1] = hw.gpus[g].vram_free_bytes;
  Placement p = place_dense(inv, hw, cap, used, 0, 2.0, true);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const int dev = static_cast<int>(l) < n_cpu_moe ? kCpuDevice : p.layers[l].attention_device;
    std::fill(p.layers[l].expert_device.begin(), p.layers[l].expert_device.end(), dev);
  }
  return p;
}

Plan plan_placement(const ModelInventory& inv, const HardwareProfile& hw, const PlanGoals& goals,
                    const CostConstants& costs, const MemoryConstants& memory) {
  if (!goals.max_context) {
    STRATA_CHECK(goals.context > 0, "context: expected a positive number of tokens, found {}",
                 goals.context);
    return plan_at(inv, hw, goals, goals.context, costs, memory);
  }
  // The largest context (a multiple of 256, up to the trained context) whose plan fits.
  const int64_t limit = inv.n_ctx_train > 0 ? inv.n_ctx_train : int64_t{1} << 20;
  Plan best = plan_at(inv, hw, goals, 256, costs, memory);
  if (!best.fits) return best;
  int64_t lo = 1, hi = limit / 256;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    Plan p = plan_at(inv, hw, goals, mid * 256, costs, memory);
    if (p.fits) {
      lo = mid;
      best = std::move(p);
    } else {
      hi = mid - 1;
    }
  }
  if (best.context != lo * 256) best = plan_at(inv, hw, goals, lo * 256, costs, memory);
  return best;
}

}  // namespace strata::plan
