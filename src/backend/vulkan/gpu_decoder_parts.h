#pragma once
// Parts of a whole-model GPU forward that decoders record the same way: the feed-forward block
// (dense SwiGLU, or routed experts with an optional sigmoid-gated shared expert), where a
// batch's keys and values go (device store, slots, page tables), the output head, the RoPE
// frequency table. Each owns the device buffers it needs for a step, grown on demand.

#include <cstdint>
#include <span>
#include <vector>

#include "backend/vulkan/activation_input.h"
#include "backend/vulkan/cpu_experts.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_ops.h"
#include "backend/vulkan/ram_experts.h"
#include "model/blocks.h"
#include "model/hparams.h"
#include "model/model.h"
#include "util/error.h"

namespace strata::vk {

// ---- feed-forward -----------------------------------------------------------------------

struct GpuFfnWeights {
  GpuMatrix gate, up, down;                         // dense FFN
  GpuMatrix router, gate_exps, up_exps, down_exps;  // MoE (expert 0 of each stack)
  GpuMatrix shared_gate_w, shared_up, shared_down;  // shared expert
  GpuMatrix shared_gate_inp;                        // [1][n_embd] F32, or address 0
  uint64_t router_bias = 0, selection_bias = 0;     // [n_expert] f32, or 0
  // Per-expert biases (gpt-oss): [n_expert][n_ff_exp] gate and up, [n_expert][n_embd] down; or 0.
  uint64_t gate_bias = 0, up_bias = 0, down_bias = 0;
  // Experts split between the device and RAM (hybrid plans): the stacks hold held_experts
  // experts; expert_slots ([n_expert] int32 on the device) gives each expert's slot, -1 for one in
  // RAM. expert_slots 0: the stacks hold every expert.
  uint64_t expert_slots = 0;
  int64_t held_experts = 0;
  RamExperts ram;  // the experts the CPU computes (empty: none)
  // Prompt batches may upload the RAM experts instead (GpuFfn): ram_slots ([n_expert] int32 on
  // the device) gives each one's slot in the uploaded stack, -1 for the held ones.
  uint64_t ram_slots = 0;
};

// Which of a layer's routed experts the device holds (empty: all of them), and that per layer
// (layers past its end: all of them).
using ExpertsOnDevice = std::vector<bool>;
using ExpertPlacement = std::vector<ExpertsOnDevice>;
// What a decoder keeps on its device besides attention, norms, routers and the output head.
struct GpuPlacement {
  ExpertPlacement experts;
  bool embeddings_on_device = true;  // false: token_embd stays in RAM (unless tied to the head)
  // [n_layer] the device (index into the decoder's devices) of each layer's attention, norms,
  // router, shared expert and GPU experts, -1 for a layer the CPU runs from RAM; empty: all on
  // the first. The token embeddings go to layer 0's device, the output head to the last
  // layer's.
  std::vector<int> layer_device;
  bool head_on_device = true;  // false: the CPU computes the output head from RAM
};
const ExpertsOnDevice& layer_experts(const ExpertPlacement& placement, int64_t il);

// Bytes upload_ffn places (for DeviceWeights' total).
uint64_t ffn_upload_bytes(const DenseFfnWeights& dense, const MoeFfnWeights& moe,
                          const ModelHParams& hp, const ExpertsOnDevice& on_device = {});
// Uploads layer il's FFN (dense or MoE, whichever is declared); of the routed experts only those
// on_device names.
GpuFfnWeights upload_ffn(DeviceWeights& w, const DenseFfnWeights& dense, const MoeFfnWeights& moe,
                         const ModelHParams& hp, int64_t il, const ExpertsOnDevice& on_device = {});

// The FFN of every layer of a step: its buffers (hidden states, router logits, expert ids of
// every layer, kept for the stats) and the rounded copies of its inputs.
class GpuFfn {
 public:
  // shared_ff: the shared expert's hidden size (0 without one).
  GpuFfn(Device& device, const ModelHParams& hp, int64_t shared_ff);

  // A new recording of n tokens: room for them (contents are per step).
  void begin_step(int64_t n);
  // out[n][n_embd] = FFN of layer il over x[n][n_embd] (`input`: x's rounded copies, shared with
  // whatever else reads x). Experts in RAM are handed to the CPU (run_step computes them).
  // next: layer il + 1's weights when the same recording runs it (its RAM experts' upload then
  // starts once this layer is done reading the stack).
  void record(GpuOps& ops, const GpuFfnWeights& l, int64_t il, ActivationInput& input,
              const Buffer& x, uint64_t out, int64_t n, const GpuFfnWeights* next = nullptr);
  // Whether a batch of n tokens uploads layer l's RAM experts to compute them here, rather than
  // have the CPU compute them: STRATA_PROMPT_EXPERTS=gpu|cpu, else the cost model
  // (plan::choose_ram_experts_path; never on a CPU-type device, never for decode steps, never
  // for experts that are not in host-visible memory).
  bool uploads(const GpuFfnWeights& l, int64_t n) const;
  // The largest upload of the layers this FFN records (RamExperts::total_bytes): the stack is
  // allocated at that size once, not grown layer by layer.
  void expect_uploads(const GpuFfnWeights& l) {
    largest_upload_ = std::max(largest_upload_, l.ram.pinned ? l.ram.total_bytes() : 0);
  }
  // How the CPU's products of the experts in RAM run.
  void set_matmul_settings(const ops::MatmulSettings& settings) {
    cpu_.set_matmul_settings(settings);
  }
  // Submits the ended recording, computes the experts in RAM on `pool` as the GPU hands them
  // over, and waits for the step.
  void run_step(CommandList& cmd, ThreadPool& pool);
  const HybridTimeline& timeline() const { return timeline_; }
  // Call after the step ran: frees scratch replaced during it.
  void release_retired();
  // Records the copy of the step's expert selections (n tokens, every layer) to host memory;
  // after the step ran, add_stats adds those of layers [first_layer, last_layer) to stats.
  void record_stats(GpuOps& ops, int64_t n);
  void add_stats(ForwardStats& stats, int64_t n, int64_t first_layer, int64_t last_layer);

 private:
  Device& device_;
  const ModelHParams& hp_;
  int64_t shared_ff_ = 0, tokens_ = 0;
  Buffer hidden_, hidden2_, down_, router_, ids_all_, weights_, shared_, shared_logit_;
  Buffer ids_host_;       // host-visible copy of ids_all_ for the stats
  Buffer order_, tiles_;  // prompt batches: pairs grouped by expert (GpuOps::moe_group)
  ActivationScratch hidden_in_, shared_in_;
  CpuExperts cpu_;
  // Uploads of RAM experts: one device stack the layers take in turn, allocated by the first
  // batch that uploads and grown for the largest layer. A layer's copy runs on the transfer queue
  // from the end of the previous layer's reads of the stack (while the GPU computes the rest of
  // that layer and this one's attention, router and held experts) to its own expert products.
  enum class UploadMode { automatic, gpu, cpu } upload_mode_ = UploadMode::automatic;
  Buffer uploaded_;     // the layer's RAM experts: gate, up, down stacks (RamExperts' layout)
  Buffer staged_down_;  // [pairs][n_embd] the uploaded experts' outputs
  std::vector<ExpertUploadSpan> uploads_;  // this recording's
  uint64_t largest_upload_ = 0;
  int64_t prefetched_layer_ = -1;  // the layer whose copy is recorded, and its transfer
  int prefetched_transfer_ = -1;
  // Records layer il's copy (prefetch: from the previous layer): returns its transfer.
  int record_upload(GpuOps& ops, const GpuFfnWeights& l, int64_t il, bool prefetch);
  HybridTimeline timeline_;
  std::vector<Buffer> retired_;
  // Room on the device for layer l's uploaded experts and their outputs; false when it does not
  // fit in the GPU's memory (every later batch then keeps them on the CPU).
  bool make_room(const GpuFfnWeights& l);
  void give_up_uploads(const Error& e);  // no room: every later batch uses the CPU
};

// ---- keys and values --------------------------------------------------------------------

// Where the tokens of a batch store and read keys and values: every sequence of a batch lives in
// one host cache or pool (its first KV layer's keys identify the device store).
struct KvPlacement {
  const void* key = nullptr;
  GgmlType type = GgmlType::F16;
  int64_t page_size = 0;       // 0: slot = position (no pages)
  int64_t n_slots = 0;         // slots the device store needs
  int64_t max_slots = 0;       // the most it may ever need (its growth limit)
  std::vector<int32_t> slot;   // [n] slot of each token
  std::vector<int32_t> pages;  // every sequence's page table, concatenated (at least one entry)
  std::vector<int32_t> page_offset;  // [sequences] where its table starts (-1: no tokens)

  // kv_layer: a layer with keys and values (its views describe the caches).
  void build(std::span<const int32_t> sequence, std::span<const int64_t> position,
             std::span<const SequenceKv> kv, int64_t kv_layer);
};

// What a step's kernels read from host-visible memory, written before each submission: token
// ids, positions, cache slots and per token {positions to attend, page-table offset} (one
// 32-bit word each), and the batch's page tables.
class GpuStepParams {
 public:
  explicit GpuStepParams(Device& device) : device_(device) {}

  // Rows in the order the step computes them; kv: where they keep keys and values (null when no
  // layer keeps any: slots and page offsets are 0).
  void write(std::span<const int32_t> tokens, std::span<const int64_t> positions,
             std::span<const int32_t> sequence, const KvPlacement* kv);

  uint64_t tokens() const { return params_.address(); }
  uint64_t positions() const { return params_.address() + 4 * static_cast<uint64_t>(n_); }
  uint64_t slots() const { return params_.address() + 8 * static_cast<uint64_t>(n_); }
  uint64_t attention_info() const { return params_.address() + 12 * static_cast<uint64_t>(n_); }
  uint64_t pages() const { return pages_.address(); }
  int64_t max_positions() const { return max_positions_; }  // the most any token attends

 private:
  Device& device_;
  int64_t n_ = 0, capacity_ = 0, pages_capacity_ = 0, max_positions_ = 0;
  Buffer params_, pages_;
};

// ---- output head ------------------------------------------------------------------------

class GpuOutputHead {
 public:
  GpuOutputHead(Device& device, const ModelHParams& hp, const GpuMatrix& output, uint64_t norm);

  // Records logits for rows `rows` of x ([n][n_embd] in buffer x) into the host-visible copy.
  void record(GpuOps& ops, const Buffer& x, std::span<const int32_t> rows);
  // After the step ran: copies the logits of the recorded rows to `logits`.
  void read(float* logits, int64_t rows);
  void release_retired() { head_in_.release_retired(); }

 private:
  Device& device_;
  const ModelHParams& hp_;
  GpuMatrix output_;
  uint64_t norm_ = 0;
  int64_t rows_ = 0;
  Buffer selected_, logits_, logits_host_;
  ActivationScratch head_in_;
};

// The CPU's RoPE frequencies (progressive products of base^(-2/n_rot)), so angles agree.
std::vector<float> rope_frequencies(const ModelHParams& hp);

}  // namespace strata::vk
