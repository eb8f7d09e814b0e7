#pragma once
// Predicted time per generated token and prompt-processing speed of a placement. Every constant is
// in CostConstants with where its value comes from; the FIELD replay tests (tests/unit/plan)
// check the model against the published cases C1 and C2.

#include <cstdint>
#include <string>
#include <vector>

#include "plan/hardware.h"
#include "plan/inventory.h"

namespace strata::plan {

// Devices: 0 is the CPU (RAM), 1..n are hw.gpus[0..n-1].
constexpr int kCpuDevice = 0;

struct LayerPlacement {
  int attention_device = kCpuDevice;  // attention or recurrent weights, router, shared expert,
                                      // dense FFN and this layer's KV cache / recurrent state
  std::vector<int> expert_device;     // per routed expert
};

struct Placement {
  std::vector<LayerPlacement> layers;
  int output_device = kCpuDevice;      // LM head and output norm
  int embeddings_device = kCpuDevice;  // token_embd (llama.cpp keeps it in RAM)
};

struct CostConstants {
  // Fraction of spec VRAM bandwidth a quantized GEMV reaches. Assumed (typical 75-85% on
  // GDDR6); FIELD cannot pin it: in C2 the GPU reads are under 10% of a token.
  double gpu_bandwidth_efficiency = 0.80;
  // Fraction of the *measured* RAM read bandwidth the CPU kernels reach on dense weights. 1.0: the
  // measurement is itself a streaming read by every core (C2's 29.1 GB/s is "~65% of peak").
  double cpu_bandwidth_efficiency = 1.0;
  // Hidden factor, named: the fraction of the active routed-expert bytes of CPU-resident layers
  // that come from DRAM each token. FIELD C2 says 15.2 ms of a 25.6 ms token read CPU-resident
  // weights with 34 expert layers on CPU (IQ4_XS, the only quant that gives 15.2 / 0.448 = 34):
  // 34 x 20.25 MB in 15.2 ms is 45 GB/s, 1.55x the measured 29.1 GB/s and above DDR5-5600's
  // 44.8 GB/s single-channel peak. So ~36% of those bytes did not come from DRAM in C2 (experts
  // reused by consecutive tokens and still cached is the usual explanation; C2 cannot tell it
  // from a pessimistic bandwidth measurement). 0.642 = 15.2 ms x 29.1 GB/s / (34 x 20.25 MB).
  double cpu_expert_dram_fraction = 0.642;
  // Fixed cost per layer per token (kernel launches, small ops, thread barriers). FIELD C2: of
  // the 25.6 ms token, 10.4 ms is not CPU expert reading; minus the GPU reads (2.6 ms at 0.8 of
  // 448 GB/s) and 34 round trips (2.0 ms) that leaves 5.8 ms over 48 layers = 0.12 ms.
  double layer_fixed_ms = 0.12;
  // Extra fixed cost of a recurrent (Gated DeltaNet) layer in today's engines. Chosen together
  // with C1's hop latency (0.38 ms per hop, 15x C2's; passed as --hop-ms in the C1 replay; a
  // Windows/WDDM driver is the likely reason, not shown) so that C1's two published speeds come
  // out: two unknowns, two figures, so the C1 replay is a fit, not an independent check. C1's token
  // at 262,144 context is 72.7 ms where bytes over bandwidth give ~13 ms.
  double recurrent_layer_fixed_ms = 0.75;
  // Prompt processing. llama.cpp-style engines run batches of >= 32 tokens on the GPU and stream
  // CPU-resident weights over PCIe once per micro-batch. Efficiency of that stream (pageable
  // memory): FIELD C2 final run, 438.73 tok/s with 32 UD-Q3_K_XL expert layers (8.74 GB) on CPU:
  // 512 / 438.73 = 1.167 s per micro-batch, 0.19 s of compute, so 8.74 GB in 0.98 s = 8.96 GB/s
  // = 0.56 of PCIe 3.0 x16's 16 GB/s.
  double pcie_stream_efficiency = 0.56;
  int prefill_micro_batch = 512;  // llama.cpp's default -ub
  // GPU prefill throughput per GB/s of VRAM bandwidth (FLOP per byte). Assumed: ~40 for the
  // int8/fp16 matrix kernels of consumer cards (RTX 2070 SUPER: ~18 TFLOP/s effective); a
  // small share of C2's prefill time, so C2 barely constrains it.
  double gpu_flops_per_byte = 40;
  // CPU prefill throughput per physical core, GFLOP/s. Assumed (quantized GEMM in llama.cpp-style
  // kernels); no FIELD case measures CPU-only prefill. Calibrate with `strata bench`.
  double cpu_gflops_per_core_avx2 = 40;
  double cpu_gflops_per_core_avx512 = 80;
  // Speculative decoding's verify steps (2-16 tokens): each token past the first costs this many
  // times its arithmetic in a prompt micro-batch (small batches use the tiles poorly), on top of
  // the experts the extra tokens add. Measured with `strata bench --verify 8` on the
  // Qwen3-30B-A3B-shaped 8-layer Q4_K_M model (Zen 5, 2 threads): 3.9 ms per extra token, of
  // which 0.6 ms reading the extra experts, against 1.39 ms per token at pp512: 3.3 / 1.39 = 2.4.
  double small_batch_arithmetic_factor = 2.4;
};

const CostConstants& default_cost_constants();

// Bytes per KV cache element: f16 2, q8_0 34/32, q4_0 18/32.
double kv_type_bytes(const std::string& kv_type);

struct DecodeEstimate {
  double total_ms = 0;
  double cpu_weight_bytes = 0;    // weight bytes read from RAM per token (for the effective rate)
  std::vector<double> weight_ms;  // per device: reading weights (experts included)
  double cpu_expert_ms = 0;       // part of weight_ms[0]: routed experts read from RAM
  std::vector<double> kv_ms;      // per device: KV cache and recurrent state
  double fixed_ms = 0;
  double hop_ms = 0;
  // total_ms is what engines that take turns spend (llama.cpp: the GPU waits while the CPU
  // computes a layer's experts, then the other way round). strata's hybrid executor computes a
  // layer's RAM experts while the GPU computes the experts and shared expert it holds for the same
  // layer: overlap_ms is the time that hides, sum over layers of min(CPU experts, GPU experts and
  // shared expert).
  double overlap_ms = 0;
  double tokens_per_second() const { return total_ms > 0 ? 1000.0 / total_ms : 0; }
  double overlapped_ms() const { return total_ms - overlap_ms; }
  double overlapped_tokens_per_second() const {
    return overlapped_ms() > 0 ? 1000.0 / overlapped_ms() : 0;
  }
};

struct PrefillEstimate {
  double micro_batch_ms = 0;
  double compute_ms = 0;
  double stream_ms = 0;     // CPU-resident weights over PCIe (GPU prefill)
  double memory_ms = 0;     // CPU-only: weights read from RAM
  double attention_ms = 0;  // calibrated CPU: attention over the batch's own positions, or the
                            // Gated DeltaNet recurrence
  double serial_ms = 0;     // calibrated CPU: norms, quantization, dispatches, output head
  double tokens_per_second = 0;
};

// Effective bandwidth of a device in GB/s (= bytes per microsecond / 1000).
double device_bandwidth_gbps(const HardwareProfile& hw, int device, const CostConstants& c);
std::string device_name(const HardwareProfile& hw, int device);

// A calibrated CPU's decode rate for a weight type (GB/s); the slowest measured quantized type
// stands in for a type that was not measured.
double calibrated_gemv_gbps(const CpuCalibration& cal, GgmlType type);

// Time of the small single-threaded ops of one layer per token in strata's decoder: values each
// op touches (norms, residual adds, activation quantization, q/k norms and RoPE, KV store, SwiGLU,
// the experts' weighted sum) x its measured ns per value. `parallel_part_ms` receives the share
// that runs inside a pool task per token (q/k norms, RoPE, KV store: spread over threads in a
// batch).
double serial_ms_per_token(const CpuCalibration& cal, const ModelInventory& inv,
                           const LayerInventory& layer, double* parallel_part_ms = nullptr);

// Decode cost of one token with `context_tokens` already in the KV cache. On a CPU with a
// calibration (hw.cpu_calibration), per layer on the CPU:
//   weights:  dense: sum over weight types of bytes / gemv_gbps(type); active routed experts:
//             bytes / expert_gemv_gbps(type) for gate and up, / expert_down_gemv_gbps(type) for
//             down (every byte from RAM; the GEMV rate when those were not measured);
//   fixed:    matrix products x gemv_fixed_us (the MoE block's two only when its rates were not
//             measured: they include them) + other pool dispatches x dispatch_us
//             + serial_ms_per_token;
//   KV:       max(KV bytes / RAM bandwidth, ceil(KV heads / threads) x context x head_dim x
//             (attention_kv_ns + query heads per KV head x attention_head_ns));
//   state:    (Gated DeltaNet layers) 2 x state bytes / RAM bandwidth + ceil(value heads /
//             threads) x d_k x d_v x delta_rule_ns;
// plus the output head (bytes / rate + one product). Elsewhere the FIELD constants apply.
DecodeEstimate estimate_decode(const ModelInventory& inv, const HardwareProfile& hw,
                               const Placement& placement, double kv_bytes_per_element,
                               int64_t context_tokens, const CostConstants& c);
// Expected number of distinct experts a batch of `tokens` tokens selects in a layer whose
// selections follow `popularity` (sums to 1): all of them for uniform routing and a big batch,
// fewer when the routing is skewed.
double expected_active_experts(const std::vector<double>& popularity, int n_used, double tokens);

// Prompt processing of one micro-batch. On a calibrated CPU without GPUs: per layer,
//   dense elements x batch / gemm_gmacs(type)
//   + expert slice elements x used experts x batch / expert_(down_)gemm_gmacs(type)
//   + expected active experts x slice bytes / expert_(down_)gemm_gbps(type)
//   + KV heads x batch (batch + 1) / 2 x head_dim
//     x (attention_block_kv_ns + group x attention_block_head_ns) / threads
//     (Gated DeltaNet layers: ceil(value heads / threads) x batch x d_k x d_v x delta_rule_ns)
//   + batch x serial_ms_per_token (its per-token pool part / threads) + dispatches,
// plus one output-head product for the last token.
PrefillEstimate estimate_prefill(const ModelInventory& inv, const HardwareProfile& hw,
                                 const Placement& placement, const CostConstants& c);

// One sentence naming the largest share of a token, e.g. "62% of each token is reading experts
// from RAM at 29 GB/s".
std::string bottleneck_sentence(const DecodeEstimate& d, const HardwareProfile& hw,
                                const CostConstants& c);

}  // namespace strata::plan
