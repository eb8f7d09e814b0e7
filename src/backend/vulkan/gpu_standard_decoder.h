#pragma once
// StandardDecoder (llama, qwen3, qwen3moe) on Vulkan devices: the weights are uploaded once, a
// forward call records each stage's layers (the first also the embedding, the last the output
// head for the rows that want logits) into its command list, and the host waits once per stage
// (once per step on one GPU), the last time for the logits. Expert ids never leave the device: the
// router's top-k feeds the expert products. The runtime's KV caches keep their page tables; the
// keys and values live on the device (DeviceKv).

#include <memory>
#include <vector>

#include "backend/vulkan/activation_input.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/device_kv.h"
#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_attention.h"
#include "backend/vulkan/gpu_decoder_parts.h"
#include "backend/vulkan/gpu_embeddings.h"
#include "backend/vulkan/gpu_stage.h"
#include "model/batch_layout.h"
#include "model/standard_decoder.h"

namespace strata::vk {

class GpuStandardDecoder : public Model {
 public:
  // Takes over `cpu` (its weights are read from the file it maps) and uploads it to `devices`.
  // placement: which device holds each layer, which routed experts of each layer it holds (the
  // rest are computed by the CPU from RAM during the step; empty: all of them), and where the
  // token embeddings live.
  GpuStandardDecoder(std::unique_ptr<StandardDecoder> cpu,
                     std::vector<std::shared_ptr<Device>> devices, GpuPlacement placement = {});
  ~GpuStandardDecoder() override;

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  int64_t dense_bytes_per_token() const override { return cpu_->dense_bytes_per_token(); }
  int64_t expert_bytes() const override { return cpu_->expert_bytes(); }
  void kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) override;

  Device& device() { return stages_.front()->device(); }  // the first stage's
  std::string placement_summary() const override { return placement_summary_; }
  std::vector<DeviceMemory> device_memory() const override { return stages_memory(stages_); }
  void set_placement_summary(std::string s) { placement_summary_ = std::move(s); }
  // What the CPU did in the last step (layers with experts in RAM).
  const HybridTimeline& hybrid_timeline() const { return timeline_; }
  int64_t step_encodings() const { return stages_encodings(stages_); }
  // Timestamp queries on every device's segments (the timeline's GPU segments).
  void set_timestamps(bool on) {
    for (auto& s : stages_) s->device().set_timestamps(on);
  }

 private:
  struct Layer {
    uint64_t attn_norm = 0, ffn_norm = 0;
    GpuAttentionWeights attn;
    GpuFfnWeights ffn;
  };

  void upload_weights(const std::vector<std::shared_ptr<Device>>& devices);
  void record_stage(GpuStage& s, const ForwardBatch& batch, int64_t n, bool first_run,
                    bool last_run, bool with_stats);

  std::unique_ptr<StandardDecoder> cpu_;
  GpuPlacement placement_plan_;
  std::string placement_summary_;
  StagePlan plan_;
  std::vector<std::unique_ptr<GpuStage>> stages_;  // the plan's GPU runs, in order
  GpuModelEnds ends_;
  std::unique_ptr<GpuEmbeddings> embeddings_;  // null: the CPU runs the first layers
  std::unique_ptr<GpuOutputHead> head_;        // null: the CPU computes the head
  std::vector<Layer> layers_;
  std::vector<float> host_x_;  // hidden states on their way through the CPU's layers
  BatchLayout layout_;
  KvPlacement placement_;
  HybridTimeline timeline_;
};

}  // namespace strata::vk
