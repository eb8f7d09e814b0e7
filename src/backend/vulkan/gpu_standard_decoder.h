#pragma once
// StandardDecoder (llama, qwen3, qwen3moe) with every layer on one Vulkan device: the weights
// are uploaded once, a forward call records the whole step (embedding, every layer, the output
// head for the rows that want logits) into one command list, and the host waits once, for the
// logits. Expert ids never leave the device: the router's top-k feeds the expert products.
// The runtime's KV caches keep their page tables; the keys and values live on the device
// (DeviceKv).

#include <memory>
#include <vector>

#include "backend/vulkan/activation_input.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/device_kv.h"
#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_attention.h"
#include "backend/vulkan/gpu_decoder_parts.h"
#include "backend/vulkan/gpu_embeddings.h"
#include "model/batch_layout.h"
#include "model/standard_decoder.h"

namespace strata::vk {

class GpuStandardDecoder : public Model {
 public:
  // Takes over `cpu` (its weights are read from the file it maps) and uploads it to `device`.
  // placement: which routed experts of each layer the device holds (the rest are computed by
  // the CPU from RAM during the step; empty: all of them), and where the token embeddings live.
  GpuStandardDecoder(std::unique_ptr<StandardDecoder> cpu, std::shared_ptr<Device> device,
                     GpuPlacement placement = {});
  ~GpuStandardDecoder() override;

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  int64_t dense_bytes_per_token() const override { return cpu_->dense_bytes_per_token(); }
  int64_t expert_bytes() const override { return cpu_->expert_bytes(); }
  void kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) override;

  Device& device() { return *device_; }
  std::string placement_summary() const override { return placement_summary_; }
  std::vector<DeviceMemory> device_memory() const override {
    return {{device_->label(), device_->device_local_bytes(), device_->memory_budget()}};
  }
  void set_placement_summary(std::string s) { placement_summary_ = std::move(s); }
  // What the CPU did in the last step (layers with experts in RAM).
  const HybridTimeline& hybrid_timeline() const { return ffn_->timeline(); }
  int64_t step_encodings() const { return cmd_->encodings(); }

 private:
  struct Layer {
    uint64_t attn_norm = 0, ffn_norm = 0;
    GpuAttentionWeights attn;
    GpuFfnWeights ffn;
  };

  void upload_weights();
  void ensure_work(int64_t n_tokens);

  std::unique_ptr<StandardDecoder> cpu_;
  std::shared_ptr<Device> device_;
  GpuPlacement placement_plan_;
  std::string placement_summary_;
  std::unique_ptr<DeviceWeights> weights_;
  std::unique_ptr<DeviceKv> kv_;
  GpuMatrix token_embd_, output_;  // token_embd_ address 0: in RAM
  std::unique_ptr<GpuEmbeddings> embeddings_;
  uint64_t output_norm_ = 0, inv_freq_ = 0;
  std::vector<Layer> layers_;
  // A step's hidden states, normed states and block outputs ([n][n_embd]), grown on demand.
  int64_t tokens_ = 0;
  Buffer x_, normed_, delta_;
  std::unique_ptr<CommandList> cmd_;
  GpuStepParams step_;
  std::unique_ptr<GpuAttention> attention_;
  std::unique_ptr<GpuFfn> ffn_;
  std::unique_ptr<GpuOutputHead> head_;
  ActivationScratch normed_in_;  // rounded copies of the normed states
  BatchLayout layout_;
  KvPlacement placement_;
};

}  // namespace strata::vk
