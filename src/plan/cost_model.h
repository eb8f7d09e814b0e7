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

// Every part of the model on the CPU.
Placement cpu_placement(const ModelInventory& inv);

// The threads that compute on the CPU: the plan's, at most one per physical core.
int cpu_threads(const HardwareProfile& hw);

// The cost model of engines run on hardware strata has not measured (a published GPU and RAM,
// llama.cpp's flags): physical terms, bytes over each link's bandwidth, kernels and barriers,
// CPU<->GPU hops, attention over the cache, arithmetic over a throughput. Every constant below
// either is a published or derived fact or is fitted once to the published runs in
// bench/published/runs.json (plan/cost_fit.h, leave-one-source-out checked by
// tests/unit/plan/published_runs_test.cpp, which also checks these values are the fit's).
// A CPU calibrated by `strata plan` on this machine uses its measured rates instead.
struct CostConstants {
  // Decode. Fraction of the published VRAM bandwidth a token's weight reads reach. Fitted.
  double gpu_bandwidth_efficiency = 0.8788;
  // Fraction of the RAM bandwidth (published or derived from the memory configuration) the
  // CPU's weight reads reach, when enough threads read. Fitted.
  double cpu_bandwidth_efficiency = 0.7597;
  // RAM read bandwidth one thread sustains, GB/s: a CPU reads at most threads x this (a few
  // cores do not saturate the memory controller). Fitted (searched over 4..24).
  double cpu_core_gbps = 13;
  // Fractions of the bandwidth the attention over the KV cache reaches (flash-attention decode:
  // scattered reads and the softmax's arithmetic). Fitted.
  double gpu_attention_efficiency = 0.3601;
  double cpu_attention_efficiency = 0.302;
  // Cost of one GPU kernel (launch and the tail of a small grid), microseconds, times the kernels
  // a layer's parts issue (kernels_per_*); and of one CPU graph op (a barrier of the thread pool:
  // a base and a part that grows with the threads that meet at it). Fitted.
  double gpu_kernel_us = 3.398;
  double cpu_op_us = 9.028;
  double cpu_op_thread_us = 0.3862;
  // Each expert a token uses is three small matrix products (gate, up, down) whose rows are too
  // few to reach the bandwidth: a cost per product, on the GPU and on the CPU. Fitted.
  double gpu_expert_decode_us = 1.933;
  double cpu_expert_decode_us = 1.778;
  // One hop of the activations between CPU and GPU (synchronisation, copy, thread wake-up), ms,
  // for hardware given by flags (--hop-ms overrides it); a CPU-resident expert layer costs a
  // round trip, two hops. Fitted.
  double hop_ms = kDefaultHopLatencyMs;
  // Speculative decoding's verify steps (2-16 tokens): each token past the first costs this many
  // times its arithmetic in a prompt micro-batch (small batches use the tiles poorly), on top of
  // the experts the extra tokens add. Measured with `strata bench --verify 8` on the
  // Qwen3-30B-A3B-shaped 8-layer Q4_K_M model (Zen 5, 2 threads): 3.9 ms per extra token, of
  // which 0.6 ms reading the extra experts, against 1.39 ms per token at pp512: 3.3 / 1.39 = 2.4.
  double small_batch_arithmetic_factor = 2.4;

  // Prompt processing. llama.cpp-style engines run batches of >= 32 tokens on the GPU and stream
  // CPU-resident weights over PCIe once per micro-batch, at this fraction of the link. Fitted.
  double pcie_stream_efficiency = 0.764;
  int prefill_micro_batch = 512;  // llama.cpp's default -ub
  // GPU prefill throughput: this fraction of the card's published dense FP16 tensor throughput
  // (GpuInfo::tensor_tflops). Fitted.
  double gpu_tensor_efficiency = 0.3046;
  // A card whose throughput is not known: FLOP per byte of VRAM bandwidth, the efficiency above
  // times 196, the median of the published runs' cards (TFLOPS per TB/s: RX 7900 XT 129, RTX 3060
  // 142, 3090 152, 3090 Ti 159, 2080 180, 5070 Ti 196, Quadro RTX 5000 199, 4070 232, 5080 234,
  // 4080 272, RTX PRO 6000 281).
  double gpu_flops_per_byte = 59.7;
  // CPU prefill throughput per physical core, GFLOP/s, of llama.cpp's CPU kernels; AVX-512
  // cores do twice the work per instruction. Fitted.
  double cpu_gflops_per_core_avx2 = 41.32;
  double cpu_gflops_per_core_avx512 = 82.65;
  // A micro-batch multiplies each expert some token chose with its rows (three products per
  // expert): the grouped kernels pay per expert, besides the arithmetic, microseconds. Fitted.
  double gpu_expert_product_us = 9.584;
  double cpu_expert_product_us = 9.366;
  // The same three for ik_llama.cpp's prompt kernels (fitted on its runs, so its runs inform the
  // rest of the fit; strata's plans price llama.cpp).
  double ik_gpu_tensor_efficiency = 0.3414;
  double ik_pcie_stream_efficiency = 0.9605;
  double ik_cpu_gflops_per_core_avx2 = 123.1;
  double ik_gpu_expert_product_us = 9.379;
  double ik_cpu_expert_product_us = 10.22;
};

// GPU kernels (llama.cpp's graph nodes, counted from its qwen3moe/qwen3next/gpt-oss graphs:
// norms, projections, RoPE, cache stores, attention, gates, routing, expert products, adds) a
// layer's parts issue per token; a CPU-resident part issues as many graph ops.
constexpr int kKernelsPerAttention = 12;
constexpr int kKernelsPerRecurrent = 20;
constexpr int kKernelsPerMoe = 10;
constexpr int kKernelsPerDenseFfn = 5;

const CostConstants& default_cost_constants();

// Bytes per KV cache element: f16 2, q8_0 34/32, q4_0 18/32.
double kv_type_bytes(const std::string& kv_type);

struct DecodeEstimate {
  double total_ms = 0;
  double cpu_weight_bytes = 0;    // weight bytes read from RAM per token (for the effective rate)
  std::vector<double> weight_ms;  // per device: reading weights (experts included)
  double cpu_expert_ms = 0;       // part of weight_ms[0]: routed experts read from RAM
  std::vector<double> kv_ms;      // per device: KV cache and recurrent state
  double fixed_ms = 0;            // cpu_fixed_ms + gpu_fixed_ms
  double cpu_fixed_ms = 0;  // CPU: graph ops' barriers, or (calibrated) dispatches and small ops
  double gpu_fixed_ms = 0;  // GPU kernels
  // Uncalibrated: what the fixed costs count (per token): CPU graph ops, GPU kernels, and the
  // expert products on each.
  double cpu_ops = 0, gpu_kernels = 0, cpu_expert_products = 0, gpu_expert_products = 0;
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
  double stream_ms = 0;        // CPU-resident weights over PCIe (GPU prefill)
  double memory_ms = 0;        // CPU-only: weights read from RAM
  double attention_ms = 0;     // calibrated CPU: attention over the batch's own positions, or the
                               // Gated DeltaNet recurrence
  double serial_ms = 0;        // calibrated CPU: norms, quantization, dispatches, output head
  double expert_ms = 0;        // uncalibrated: the per-expert cost of the grouped products
  double expert_products = 0;  // (expert, matrix) products of one micro-batch
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
// depth: positions already cached when the micro-batch runs (its attention reads them too).
PrefillEstimate estimate_prefill(const ModelInventory& inv, const HardwareProfile& hw,
                                 const Placement& placement, const CostConstants& c,
                                 int64_t depth = 0);

// One sentence naming the largest share of a token, e.g. "62% of each token is reading experts
// from RAM at 29 GB/s".
std::string bottleneck_sentence(const DecodeEstimate& d, const HardwareProfile& hw,
                                const CostConstants& c);

}  // namespace strata::plan
