#pragma once
// HybridDecoder (qwen35moe: Gated DeltaNet layers and gated full attention, MoE FFNs) with every
// layer on one Vulkan device, recorded like GpuStandardDecoder: one command list per forward,
// one wait for the logits. The runtime's KV caches keep their page tables, the keys and values
// live on the device (DeviceKv, full-attention layers only).
//
// Recurrent states: the device keeps a copy of every host state buffer the batches name (same
// float layout, keyed by the buffer's address). The header (tokens consumed) stays on the host
// and is updated by each forward, so the consumed-tokens check works as on the CPU. The rest is
// the device's until the runtime reads the buffer (Model::recurrent_state_read: downloaded) and
// the host's again once it writes it (recurrent_state_written: uploaded on the next forward).

#include <map>
#include <memory>
#include <vector>

#include "backend/vulkan/activation_input.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/device_kv.h"
#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_attention.h"
#include "backend/vulkan/gpu_decoder_parts.h"
#include "backend/vulkan/gpu_embeddings.h"
#include "backend/vulkan/gpu_ops.h"
#include "model/batch_layout.h"
#include "model/hybrid_decoder.h"

namespace strata::vk {

class GpuHybridDecoder : public Model {
 public:
  // Takes over `cpu` (its weights are read from the file it maps) and uploads it to `device`.
  // placement: which routed experts of each layer the device holds (the rest are computed by
  // the CPU from RAM during the step; empty: all of them), and where the token embeddings live.
  GpuHybridDecoder(std::unique_ptr<HybridDecoder> cpu, std::shared_ptr<Device> device,
                   GpuPlacement placement = {});
  ~GpuHybridDecoder() override;

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  int64_t dense_bytes_per_token() const override { return cpu_->dense_bytes_per_token(); }
  int64_t expert_bytes() const override { return cpu_->expert_bytes(); }
  int64_t recurrent_bytes_per_token() const override { return cpu_->recurrent_bytes_per_token(); }
  int64_t recurrent_state_floats() const override { return cpu_->recurrent_state_floats(); }
  bool layer_has_kv(int64_t layer) const override { return cpu_->layer_has_kv(layer); }
  void kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) override;
  void recurrent_state_read(float* state) override;
  void recurrent_state_written(const float* state) override;
  void recurrent_state_released(const float* state) override;

  Device& device() { return *device_; }
  std::string placement_summary() const override { return placement_summary_; }
  std::vector<DeviceMemory> device_memory() const override {
    return {{device_->label(), device_->device_local_bytes(), device_->memory_budget()}};
  }
  void set_placement_summary(std::string s) { placement_summary_ = std::move(s); }
  // What the CPU did in the last step (layers with experts in RAM).
  const HybridTimeline& hybrid_timeline() const { return ffn_->timeline(); }
  int64_t step_encodings() const;
  // Device bytes of recurrent states held (for tests and logs).
  uint64_t state_bytes() const;

 private:
  struct Layer {
    uint64_t attn_norm = 0, post_norm = 0;
    GpuAttentionWeights attn;  // full attention (gated queries), wq.address 0 otherwise
    // Gated DeltaNet.
    GpuMatrix qkv, gate, beta, alpha, out;
    uint64_t conv = 0, dt_bias = 0, a_neg = 0, ssm_norm = 0;
    int64_t state_offset = 0;  // floats into the state buffer
    GpuFfnWeights ffn;
  };
  struct Work;
  // One host state buffer's device copy.
  struct State {
    Buffer buffer;
    bool host_newer = true;     // the host wrote it since the device last had it
    bool device_newer = false;  // forwards ran on it since the host last had it
    int64_t consumed = -1;      // the header when the device copy was last in step with it
  };

  void upload_weights();
  void ensure_work(int64_t n_tokens);  // runs fit too (a run has at least one token)
  // The device copy of each run's state, current (uploads what the host changed).
  std::vector<uint64_t> prepare_states(const ForwardBatch& batch);
  void record_gdn(GpuOps& ops, const Layer& l, int64_t n, uint64_t runs, int64_t n_runs,
                  ActivationInput& normed);

  std::unique_ptr<HybridDecoder> cpu_;
  std::shared_ptr<Device> device_;
  GpuPlacement placement_plan_;
  std::string placement_summary_;
  std::unique_ptr<DeviceWeights> weights_;
  std::unique_ptr<DeviceKv> kv_;
  GpuMatrix token_embd_, output_;  // token_embd_ address 0: in RAM
  std::unique_ptr<GpuEmbeddings> embeddings_;
  uint64_t output_norm_ = 0, inv_freq_ = 0;
  std::vector<Layer> layers_;
  std::vector<int64_t> recurrent_layers_;  // indices of the Gated DeltaNet layers
  int64_t first_kv_layer_ = -1;
  std::unique_ptr<Work> work_;
  GpuStepParams step_;
  std::unique_ptr<GpuAttention> attention_;
  std::unique_ptr<GpuFfn> ffn_;
  std::unique_ptr<GpuOutputHead> head_;
  // Rounded copies of the inputs of products: normed states, gated DeltaNet output.
  ActivationScratch normed_in_, gdn_in_;
  std::map<const float*, State> states_;
  BatchLayout layout_;
  SequenceRuns ordered_;
  KvPlacement placement_;
};

}  // namespace strata::vk
