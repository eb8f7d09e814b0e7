#include "plan/cost_model.h"

#include <fmt/format.h>
#include <algorithm>

#include <cmath>

#include "ops/attention.h"
#include "util/error.h"

namespace strata::plan {

const CostConstants& default_cost_constants() {
  static const CostConstants constants;
  return constants;
}

double kv_type_bytes(const std::string& kv_type) {
  if (kv_type == "f16") return 2.0;
  if (kv_type == "q8_0") return 34.0 / 32.0;
  if (kv_type == "q4_0") return 18.0 / 32.0;
  fail("KV cache type '{}': expected f16, q8_0 or q4_0", kv_type);
}

Placement cpu_placement(const ModelInventory& inv) {
  Placement p;
  p.layers.resize(inv.layers.size());
  for (auto& l : p.layers) l.expert_device.assign(static_cast<size_t>(inv.n_expert), kCpuDevice);
  return p;
}

int cpu_threads(const HardwareProfile& hw) {
  return std::max(1, std::min(hw.threads, hw.physical_cores));
}

namespace {

// A bandwidth measured on this machine (by every core reading) is what its threads reach; a
// given one is the memory's (published or derived from its configuration).
bool measured_ram(const HardwareProfile& hw) {
  return hw.ram_bandwidth_source != "given";
}

// What the CPU's threads can read: the RAM's bandwidth, or less when too few threads read.
double cpu_read_gbps(const HardwareProfile& hw, const CostConstants& c) {
  if (measured_ram(hw)) return hw.ram_bandwidth_gbps;
  return std::min(hw.ram_bandwidth_gbps, cpu_threads(hw) * c.cpu_core_gbps);
}

// Raw read bandwidth of a device (GB/s) before the efficiency of what reads it.
double raw_gbps(const HardwareProfile& hw, int device, const CostConstants& c) {
  if (device == kCpuDevice) return cpu_read_gbps(hw, c);
  return hw.gpus.at(static_cast<size_t>(device - 1)).bandwidth_gbps;
}

}  // namespace

double device_bandwidth_gbps(const HardwareProfile& hw, int device, const CostConstants& c) {
  if (device == kCpuDevice)
    return cpu_read_gbps(hw, c) * (measured_ram(hw) ? 1.0 : c.cpu_bandwidth_efficiency);
  return raw_gbps(hw, device, c) * c.gpu_bandwidth_efficiency;
}

std::string device_name(const HardwareProfile& /*hw*/, int device) {
  if (device == kCpuDevice) return "CPU";
  return fmt::format("GPU{}", device - 1);
}

namespace {

// GB/s is bytes per nanosecond: bytes / (GB/s) / 1e6 = milliseconds.
double ms_for(double bytes, double gbps) {
  return gbps > 0 ? bytes / gbps / 1e6 : 0.0;
}

const TypeCalibration& slowest_quantized(const CpuCalibration& cal) {
  STRATA_CHECK(!cal.types.empty(), "CPU calibration without measured types");
  const TypeCalibration* slowest = nullptr;
  for (const auto& t : cal.types) {
    if (t.type == GgmlType::F32 && cal.types.size() > 1) continue;
    if (!slowest || t.gemv_gbps < slowest->gemv_gbps) slowest = &t;
  }
  return *slowest;
}

const TypeCalibration& rates_of(const CpuCalibration& cal, GgmlType type) {
  const TypeCalibration* t = cal.find(type);
  return t ? *t : slowest_quantized(cal);
}

// Whether a type's routed experts have rates measured through the MoE block (decode ones, and
// prefill ones measured alongside): those include the block's two dispatches.
bool expert_decode_measured(const TypeCalibration& r) {
  return r.expert_gemv_gbps > 0 && r.expert_down_gemv_gbps > 0;
}

// Decode rate of weights: the long-GEMV rate of their type, or for routed expert slices their
// measured expert rate (the GEMV rate when those were not measured).
double decode_gbps(const CpuCalibration& cal, const TypedWeights& w, bool routed_experts) {
  const TypeCalibration& r = rates_of(cal, w.type);
  if (!routed_experts || !expert_decode_measured(r)) return r.gemv_gbps;
  return w.expert_down ? r.expert_down_gemv_gbps : r.expert_gemv_gbps;
}

// Milliseconds a calibrated CPU takes to read `scale` x the given weights in decode.
double calibrated_stream_ms(const CpuCalibration& cal, const std::vector<TypedWeights>& weights,
                            double scale = 1.0, bool routed_experts = false) {
  double ms = 0;
  for (const auto& w : weights) {
    ms += ms_for(scale * static_cast<double>(w.bytes), decode_gbps(cal, w, routed_experts));
  }
  return ms;
}

// Whether every routed expert type of the layer has measured decode rates.
bool layer_expert_rates_measured(const CpuCalibration& cal, const LayerInventory& layer) {
  if (layer.expert_slice_by_type.empty()) return false;
  for (const auto& w : layer.expert_slice_by_type) {
    if (!expert_decode_measured(rates_of(cal, w.type))) return false;
  }
  return true;
}

// Dispatch cost of one forward of a layer on a calibrated CPU (any number of tokens).
double calibrated_dispatch_ms(const CpuCalibration& cal, const LayerInventory& layer) {
  // strata's MoE block: gate and up in one dispatch, down in another (already part of the
  // expert rates when those were measured through the block).
  const bool moe_in_rates = layer_expert_rates_measured(cal, layer);
  const int products = layer.dense_matrices + (layer.expert_matrices > 0 && !moe_in_rates ? 2 : 0);
  // Attention: q/k norm + RoPE + KV store, and the attention itself.
  // (A Gated DeltaNet layer: the delta rule; its small ops run on the calling thread.)
  const int other = layer.has_kv_cache ? 2 : 1;
  return (products * cal.gemv_fixed_us + other * cal.dispatch_us) / 1e3;
}

// Per-token fixed cost of a layer in decode: dispatches and the small serial ops.
double calibrated_layer_fixed_ms(const CpuCalibration& cal, const ModelInventory& inv,
                                 const LayerInventory& layer) {
  return calibrated_dispatch_ms(cal, layer) + serial_ms_per_token(cal, inv, layer);
}

// The Gated DeltaNet recurrence of `tokens` tokens in one layer: each value head (d_k x d_v
// state values per token) is a task, the heads spread over the threads.
double delta_rule_ms(const CpuCalibration& cal, const ModelInventory& inv, double tokens,
                     int threads) {
  if (inv.recurrent_d_k <= 0) return 0;
  const double heads = static_cast<double>(inv.recurrent_v_dim) / inv.recurrent_d_k;
  const double rounds = std::ceil(heads / std::max(1, threads));
  return rounds * tokens * inv.recurrent_d_k * inv.recurrent_d_k * cal.delta_rule_ns / 1e6;
}

// Attention over `positions` cached positions (summed over the tokens), ns of work on one thread:
// token by token as decode runs it, or in blocks of consecutive tokens as prefill does (the
// per-token costs when the block costs were not measured).
double attention_work_ns(const CpuCalibration& cal, const ModelInventory& inv, double positions,
                         double kv_heads, bool blocked = false) {
  const double group = inv.n_head_kv > 0 ? static_cast<double>(inv.n_head) / inv.n_head_kv : 1.0;
  const bool use_block = blocked && cal.attention_block_kv_ns > 0;
  const double kv = use_block ? cal.attention_block_kv_ns : cal.attention_kv_ns;
  const double head = use_block ? cal.attention_block_head_ns : cal.attention_head_ns;
  return kv_heads * positions * inv.head_dim * (kv + group * head);
}

// A decode step's attention over `positions`, ms on `threads` threads, scheduled as the model
// does (ops::attention_by_ranges): ranges of positions over every KV head, or the KV heads.
double decode_attention_ms(const CpuCalibration& cal, const ModelInventory& inv, double positions,
                           int threads) {
  const auto p = static_cast<int64_t>(std::ceil(positions));
  if (ops::attention_by_ranges({{1, p, p}}, inv.n_head_kv, inv.n_head, inv.head_dim, threads)) {
    const double per_thread =
        std::ceil(static_cast<double>(ops::attention_ranges(p)) / threads) * ops::kAttentionRange;
    return attention_work_ns(cal, inv, std::min(positions, per_thread), inv.n_head_kv) / 1e6;
  }
  const double rounds = std::ceil(static_cast<double>(inv.n_head_kv) / threads);
  return attention_work_ns(cal, inv, positions, rounds) / 1e6;
}

double hop_cost_ms(const ModelInventory& inv, const HardwareProfile& hw, int a, int b) {
  if (a == b) return 0.0;
  const int gpu = a != kCpuDevice ? a : b;
  const double pcie = hw.gpus.at(static_cast<size_t>(gpu - 1)).pcie_gbps;
  return hw.hop_latency_ms + ms_for(4.0 * inv.n_embd, pcie);  // f32 activations of one token
}

}  // namespace

DecodeEstimate estimate_decode(const ModelInventory& inv, const HardwareProfile& hw,
                               const Placement& placement, double kv_bytes_per_element,
                               int64_t context_tokens, const CostConstants& c) {
  const size_t n_devices = hw.gpus.size() + 1;
  DecodeEstimate d;
  d.weight_ms.assign(n_devices, 0.0);
  d.kv_ms.assign(n_devices, 0.0);
  std::vector<double> bw(n_devices), attention_bw(n_devices);
  for (size_t i = 0; i < n_devices; ++i) {
    const int dev = static_cast<int>(i);
    bw[i] = device_bandwidth_gbps(hw, dev, c);
    attention_bw[i] = raw_gbps(hw, dev, c) *
                      (dev == kCpuDevice ? c.cpu_attention_efficiency : c.gpu_attention_efficiency);
  }
  // Fixed cost of `kernels` kernels (GPU) or graph ops (CPU) on a device.
  const auto add_kernels = [&](int device, double kernels) {
    (device == kCpuDevice ? d.cpu_ops : d.gpu_kernels) += kernels;
  };
  const CpuCalibration* cal = hw.cpu_calibration ? &*hw.cpu_calibration : nullptr;

  int previous = placement.embeddings_device;
  std::vector<double> mass(n_devices);
  for (size_t li = 0; li < inv.layers.size(); ++li) {
    const LayerInventory& layer = inv.layers[li];
    const LayerPlacement& lp = placement.layers.at(li);
    const int a = lp.attention_device;
    d.hop_ms += hop_cost_ms(inv, hw, previous, a);
    previous = a;
    const bool calibrated = cal && a == kCpuDevice;
    if (calibrated) {
      d.weight_ms[a] += calibrated_stream_ms(*cal, layer.dense_by_type);
    } else {
      d.weight_ms[a] += ms_for(static_cast<double>(layer.dense_bytes()), bw[a]);
    }
    if (a == kCpuDevice) d.cpu_weight_bytes += static_cast<double>(layer.dense_bytes());
    if (layer.has_kv_cache) {
      // A sliding-window layer reads only the window's positions.
      const double positions = layer.attended_positions(static_cast<double>(context_tokens));
      const double kv_bytes = inv.layer_kv_bytes_per_token(kv_bytes_per_element) * positions;
      if (calibrated) {
        const double compute_ms = decode_attention_ms(*cal, inv, positions, hw.threads);
        d.kv_ms[a] += std::max(compute_ms, ms_for(kv_bytes, hw.ram_bandwidth_gbps));
      } else {
        d.kv_ms[a] += ms_for(kv_bytes, attention_bw[a]);
      }
    } else {
      // The state is read and written once per token (it does not stay cached between tokens),
      // streamed as weights are.
      const double state_ms = ms_for(2.0 * static_cast<double>(layer.recurrent_state_bytes), bw[a]);
      if (calibrated) {
        // strata: plus the delta rule's arithmetic, value heads spread over the threads.
        d.kv_ms[a] += state_ms + delta_rule_ms(*cal, inv, 1.0, hw.threads);
      } else {
        d.weight_ms[a] += state_ms;
      }
    }
    if (calibrated) {
      d.cpu_fixed_ms += calibrated_layer_fixed_ms(*cal, inv, layer);
    } else {
      add_kernels(a, (layer.has_kv_cache ? kKernelsPerAttention : kKernelsPerRecurrent) +
                         (layer.expert_bytes > 0 ? kKernelsPerMoe : kKernelsPerDenseFfn));
    }
    if (layer.expert_bytes == 0) continue;
    // What the layer's GPU computes while the CPU computes its RAM experts: the shared expert...
    double gpu_side_ms =
        a == kCpuDevice ? 0.0 : ms_for(static_cast<double>(layer.shared_expert_bytes), bw[a]);
    double cpu_side_ms = 0;
    // Expected bytes per device: popularity mass it holds x experts used x one expert's bytes.
    std::fill(mass.begin(), mass.end(), 0.0);
    for (size_t e = 0; e < lp.expert_device.size(); ++e) {
      mass[static_cast<size_t>(lp.expert_device[e])] += inv.popularity[li][e];
    }
    for (size_t dev = 0; dev < n_devices; ++dev) {
      if (mass[dev] <= 0) continue;
      double bytes = mass[dev] * inv.n_expert_used * static_cast<double>(layer.expert_slice_bytes);
      double ms = 0;
      if (dev == kCpuDevice && cal) {
        // Measured expert decode rates from RAM: every active expert byte is read (no reuse).
        ms = calibrated_stream_ms(*cal, layer.expert_slice_by_type, mass[dev] * inv.n_expert_used,
                                  true);
      } else {
        ms = ms_for(bytes, bw[dev]);
        // Experts computed away from their layer: their products and activation there.
        if (static_cast<int>(dev) != a) add_kernels(static_cast<int>(dev), kKernelsPerDenseFfn);
        (dev == kCpuDevice ? d.cpu_expert_products : d.gpu_expert_products) +=
            3.0 * mass[dev] * inv.n_expert_used;
      }
      if (dev == kCpuDevice) d.cpu_weight_bytes += bytes;
      d.weight_ms[dev] += ms;
      if (dev == kCpuDevice) d.cpu_expert_ms += ms;
      if (a != kCpuDevice && static_cast<int>(dev) == a) gpu_side_ms += ms;  // ... its experts
      if (a != kCpuDevice && dev == kCpuDevice) cpu_side_ms += ms;
      if (static_cast<int>(dev) != a) {
        // A round trip when at least one of the token's experts lives there.
        const double p_any = 1.0 - std::pow(std::max(0.0, 1.0 - mass[dev]), inv.n_expert_used);
        d.hop_ms += 2.0 * p_any * hop_cost_ms(inv, hw, a, static_cast<int>(dev));
      }
    }
    if (cpu_side_ms > 0) d.overlap_ms += std::min(cpu_side_ms, gpu_side_ms);
  }
  d.hop_ms += hop_cost_ms(inv, hw, previous, placement.output_device);
  if (cal && placement.output_device == kCpuDevice) {
    d.weight_ms[kCpuDevice] += calibrated_stream_ms(*cal, inv.output_by_type);
    // One product, the output norm and the activation quantization.
    d.cpu_fixed_ms += cal->gemv_fixed_us / 1e3 +
                      inv.n_embd * (cal->serial.norm_ns + cal->serial.quantize_ns) / 1e6;
  } else {
    d.weight_ms[placement.output_device] +=
        ms_for(static_cast<double>(inv.output_bytes), bw[placement.output_device]);
    add_kernels(placement.output_device, 2);  // the output norm and product
  }
  if (placement.output_device == kCpuDevice)
    d.cpu_weight_bytes += static_cast<double>(inv.output_bytes);
  if (cal && cal->decode_correction != 1) {  // learned from this machine's runs
    d.weight_ms[kCpuDevice] *= cal->decode_correction;
    d.kv_ms[kCpuDevice] *= cal->decode_correction;
    d.cpu_expert_ms *= cal->decode_correction;
    d.cpu_fixed_ms *= cal->decode_correction;
  }
  d.cpu_fixed_ms += (d.cpu_ops * (c.cpu_op_us + c.cpu_op_thread_us * cpu_threads(hw)) +
                     d.cpu_expert_products * c.cpu_expert_decode_us) /
                    1e3;
  d.gpu_fixed_ms +=
      (d.gpu_kernels * c.gpu_kernel_us + d.gpu_expert_products * c.gpu_expert_decode_us) / 1e3;
  d.fixed_ms = d.cpu_fixed_ms + d.gpu_fixed_ms;
  d.total_ms = d.fixed_ms + d.hop_ms;
  for (size_t i = 0; i < n_devices; ++i) d.total_ms += d.weight_ms[i] + d.kv_ms[i];
  return d;
}

PrefillEstimate estimate_prefill(const ModelInventory& inv, const HardwareProfile& hw,
                                 const Placement& placement, const CostConstants& c,
                                 int64_t depth) {
  PrefillEstimate p;
  const double batch = c.prefill_micro_batch;
  // Attention over the batch itself and the `depth` positions before it: QK^T and PV.
  double attention_pairs = 0;
  for (const LayerInventory& layer : inv.layers) {
    if (!layer.has_kv_cache) continue;
    const double behind = static_cast<double>(depth) + batch / 2.0;
    attention_pairs +=
        batch *
        (layer.kv_window > 0 ? std::min(behind, static_cast<double>(layer.kv_window)) : behind);
  }
  const double attention_flops = 4.0 * inv.n_head * inv.head_dim * attention_pairs;
  const double flops = 2.0 * static_cast<double>(inv.active_params()) * batch + attention_flops;
  for (size_t li = 0; li < inv.layers.size(); ++li) {
    if (inv.layers[li].expert_bytes == 0) continue;
    p.expert_products +=
        3.0 * expected_active_experts(inv.popularity.at(li), inv.n_expert_used, batch);
  }
  if (!hw.gpus.empty()) {
    // The whole batch computes on the GPUs (each layer on the GPU holding its attention, else the
    // first); CPU-resident weights travel over PCIe once per micro-batch.
    double cpu_bytes = 0;
    for (size_t li = 0; li < inv.layers.size(); ++li) {
      const auto& layer = inv.layers[li];
      const auto& lp = placement.layers[li];
      if (lp.attention_device == kCpuDevice) cpu_bytes += static_cast<double>(layer.dense_bytes());
      for (int dev : lp.expert_device) {
        if (dev == kCpuDevice) cpu_bytes += static_cast<double>(layer.expert_slice_bytes);
      }
    }
    if (placement.output_device == kCpuDevice) cpu_bytes += static_cast<double>(inv.output_bytes);
    double best_flops = 0;
    double pcie = 0;
    for (const auto& g : hw.gpus) {
      best_flops = std::max(best_flops, g.tensor_tflops > 0
                                            ? g.tensor_tflops * 1e12 * c.gpu_tensor_efficiency
                                            : g.bandwidth_gbps * 1e9 * c.gpu_flops_per_byte);
      pcie = std::max(pcie, g.pcie_gbps);
    }
    p.compute_ms = flops / best_flops * 1e3;
    p.stream_ms = ms_for(cpu_bytes, pcie * c.pcie_stream_efficiency);
    p.expert_ms = p.expert_products * c.gpu_expert_product_us / 1e3;
    p.micro_batch_ms = p.compute_ms + p.stream_ms + p.expert_ms;
  } else if (hw.cpu_calibration) {
    const CpuCalibration& cal = *hw.cpu_calibration;
    const double threads = hw.threads;
    for (size_t li = 0; li < inv.layers.size(); ++li) {
      const LayerInventory& layer = inv.layers[li];
      for (const auto& w : layer.dense_by_type) {
        const auto& r = rates_of(cal, w.type);
        p.compute_ms += static_cast<double>(w.elements) * batch / (r.gemm_gmacs * 1e9) * 1e3;
      }
      // Routed experts: every (token, chosen expert) row, plus each expert that gets any token.
      const double active =
          layer.expert_slice_by_type.empty()
              ? 0.0
              : expected_active_experts(inv.popularity.at(li), inv.n_expert_used, batch);
      for (const auto& w : layer.expert_slice_by_type) {
        const auto& r = rates_of(cal, w.type);
        const double gmacs = w.expert_down ? r.expert_down_gemm_gmacs : r.expert_gemm_gmacs;
        const double gbps = w.expert_down ? r.expert_down_gemm_gbps : r.expert_gemm_gbps;
        p.compute_ms +=
            static_cast<double>(w.elements) * inv.n_expert_used * batch / (gmacs * 1e9) * 1e3;
        if (gbps > 0) p.compute_ms += ms_for(active * static_cast<double>(w.bytes), gbps);
      }
      if (layer.has_kv_cache) {
        // Token i attends over i + 1 positions (at most the window in sliding layers); (token,
        // KV head) tasks spread over the threads.
        p.attention_ms +=
            attention_work_ns(cal, inv, layer.causal_pairs(batch), inv.n_head_kv, true) / threads /
            1e6;
      } else {
        // The recurrence over the batch, one task per value head.
        p.attention_ms += delta_rule_ms(cal, inv, batch, hw.threads);
      }
      double pool_part = 0;
      const double serial = serial_ms_per_token(cal, inv, layer, &pool_part);
      p.serial_ms +=
          batch * (serial - pool_part + pool_part / threads) + calibrated_dispatch_ms(cal, layer);
    }
    // Logits of the last token only: one product.
    p.serial_ms += calibrated_stream_ms(cal, inv.output_by_type) + cal.gemv_fixed_us / 1e3;
    // Learned from this machine's runs.
    p.compute_ms *= cal.prefill_correction;
    p.attention_ms *= cal.prefill_correction;
    p.serial_ms *= cal.prefill_correction;
    p.micro_batch_ms = p.compute_ms + p.attention_ms + p.serial_ms;
  } else {
    const double per_core = hw.simd.find("avx512") != std::string::npos
                                ? c.cpu_gflops_per_core_avx512
                                : c.cpu_gflops_per_core_avx2;
    p.compute_ms = flops / (per_core * 1e9 * cpu_threads(hw)) * 1e3;
    // Each micro-batch touches nearly every expert: all weights are read once, by the same
    // threads that compute (the two add up).
    const double bytes = static_cast<double>(inv.total_bytes() - inv.embeddings_bytes);
    p.memory_ms = ms_for(bytes, device_bandwidth_gbps(hw, kCpuDevice, c));
    p.expert_ms = p.expert_products * c.cpu_expert_product_us / 1e3;
    p.micro_batch_ms = p.compute_ms + p.memory_ms + p.expert_ms;
  }
  p.tokens_per_second = p.micro_batch_ms > 0 ? batch / p.micro_batch_ms * 1e3 : 0;
  return p;
}

double expected_active_experts(const std::vector<double>& popularity, int n_used, double tokens) {
  double active = 0;
  for (double p : popularity) {
    // A token picks this expert in one of its n_used slots with probability ~ n_used x p.
    const double pick = std::clamp(n_used * p, 0.0, 1.0);
    active += 1.0 - std::pow(1.0 - pick, tokens);
  }
  return active;
}

double calibrated_gemv_gbps(const CpuCalibration& cal, GgmlType type) {
  return rates_of(cal, type).gemv_gbps;
}

double serial_ms_per_token(const CpuCalibration& cal, const ModelInventory& inv,
                           const LayerInventory& layer, double* parallel_part_ms) {
  const SerialCosts& c = cal.serial;
  const double e = inv.n_embd, hd = inv.head_dim;
  const double q = static_cast<double>(inv.n_head) * hd,
               kv = static_cast<double>(inv.n_head_kv) * hd;
  // Two norms, two residual adds; the block inputs quantized (attention: two activation types,
  // e.g. Q8_K and Q8_0; the FFN one).
  double ns = 2 * e * c.norm_ns + 2 * e * c.axpy_ns + 3 * e * c.quantize_ns;
  double pool_ns = 0;
  if (layer.has_kv_cache) {
    // Per token inside a pool task: q/k norms, RoPE, the K/V store (f16 conversion).
    pool_ns = (q + kv) * (c.norm_ns + c.rope_ns) + 2 * kv * c.quantize_ns;
    ns += pool_ns + q * c.quantize_ns;  // and the attention output quantized
  } else if (inv.recurrent_v_dim > 0) {
    // Gated DeltaNet, per token (pool tasks in a prompt batch): the causal convolution + SiLU
    // over the q, k and v channels, the q/k L2 norms, and the gated RMS norm of the output (a
    // norm and a SiLU per value).
    const double k_dim = inv.recurrent_k_dim, v_dim = inv.recurrent_v_dim;
    pool_ns = (2 * k_dim + v_dim) * cal.gdn_conv_ns + 2 * k_dim * c.norm_ns +
              v_dim * (c.norm_ns + c.swiglu_ns);
    ns += pool_ns + v_dim * c.quantize_ns;  // and the output quantized
  }
  if (layer.expert_matrices > 0) {
    // Each used expert's hidden row: SwiGLU and quantization; the weighted sum of the outputs.
    const double k = inv.n_expert_used;
    ns += k * inv.n_ff_exp * (c.swiglu_ns + c.quantize_ns) + k * e * c.axpy_ns;
  }
  if (parallel_part_ms) *parallel_part_ms = pool_ns / 1e6;
  return ns / 1e6;
}

std::string bottleneck_sentence(const DecodeEstimate& d, const HardwareProfile& hw,
                                const CostConstants& c) {
  struct Part {
    double ms;
    std::string what;
  };
  std::vector<Part> parts;
  // A calibrated CPU reads at its measured kernel rates: name the effective one.
  const double cpu_gbps = hw.cpu_calibration && d.weight_ms[0] > 0
                              ? d.cpu_weight_bytes / d.weight_ms[0] / 1e6
                              : hw.ram_bandwidth_gbps;
  parts.push_back(
      {d.cpu_expert_ms, fmt::format("reading experts from RAM at {:.0f} GB/s", cpu_gbps)});
  parts.push_back({d.weight_ms[0] - d.cpu_expert_ms,
                   fmt::format("reading dense weights from RAM at {:.0f} GB/s", cpu_gbps)});
  for (size_t g = 0; g < hw.gpus.size(); ++g) {
    parts.push_back(
        {d.weight_ms[g + 1], fmt::format("reading weights from GPU{} VRAM at {:.0f} GB/s", g,
                                         hw.gpus[g].bandwidth_gbps)});
  }
  double kv = 0;
  for (double v : d.kv_ms) kv += v;
  parts.push_back({kv, "reading the KV cache and recurrent state"});
  parts.push_back(
      {d.cpu_fixed_ms, hw.cpu_calibration
                           ? std::string("fixed per-layer costs (dispatches, small ops)")
                           : fmt::format("CPU graph ops ({:.1f} us each)", c.cpu_op_us)});
  parts.push_back(
      {d.gpu_fixed_ms, fmt::format("GPU kernel launches ({:.1f} us each)", c.gpu_kernel_us)});
  parts.push_back(
      {d.hop_ms, fmt::format("CPU<->GPU round trips ({:.3f} ms each)", hw.hop_latency_ms)});
  const auto top = std::max_element(parts.begin(), parts.end(),
                                    [](const Part& x, const Part& y) { return x.ms < y.ms; });
  return fmt::format("{:.0f}% of each token is {}", 100.0 * top->ms / d.total_ms, top->what);
}

}  // namespace strata::plan
