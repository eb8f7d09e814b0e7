#pragma once
// DecoderModel (every supported architecture) on Vulkan devices: the weights are uploaded once,
// a forward call records each stage's layers (the first also the embedding, the last the output
// head for the rows that want logits) into its command list, walking the model's ModelSpec as
// the CPU does, and the host waits once per stage (once per step on one GPU), the last time for
// the logits. Expert ids never leave the device: the router's top-k feeds the expert products.
// The runtime's KV caches keep their page tables; the keys and values live on the device
// (DeviceKv, attention layers only).
//
// Recurrent states (models with Gated DeltaNet layers): each stage keeps a copy of its layers'
// part of every host state buffer the batches name (same float layout, keyed by the buffer's
// address). The header (tokens consumed) stays on the host and is updated by each forward, so
// the consumed-tokens check works as on the CPU. The rest is the device's until the runtime
// reads the buffer (Model::recurrent_state_read: downloaded) and the host's again once it writes
// it (recurrent_state_written: uploaded on the next forward).

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
#include "backend/vulkan/gpu_stage.h"
#include "model/batch_layout.h"
#include "model/decoder_model.h"

namespace strata::vk {

class GpuDecoder : public Model {
 public:
  // Takes over `cpu` (its weights are read from the file it maps) and uploads it to `devices`.
  // placement: which device holds each layer, which routed experts of each layer it holds (the
  // rest are computed by the CPU from RAM during the step; empty: all of them), and where the
  // token embeddings live.
  GpuDecoder(std::unique_ptr<DecoderModel> cpu, std::vector<std::shared_ptr<Device>> devices,
             GpuPlacement placement = {});
  ~GpuDecoder() override;

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
  void set_matmul_settings(const ops::MatmulSettings& settings) override;

  Device& device() { return stages_.front()->device(); }  // the first stage's
  std::string placement_summary() const override { return placement_summary_; }
  std::vector<DeviceMemory> device_memory() const override { return stages_memory(stages_); }
  void set_placement_summary(std::string s) { placement_summary_ = std::move(s); }
  std::vector<LayerDevices> layer_devices() const override;
  std::string output_head_device() const override;
  // What the CPU did in the last step (layers with experts in RAM).
  const HybridTimeline& hybrid_timeline() const { return timeline_; }
  int64_t step_encodings() const { return stages_encodings(stages_); }
  // Timestamp queries on every device's segments (the timeline's GPU segments).
  void set_timestamps(bool on) {
    for (auto& s : stages_) s->device().set_timestamps(on);
  }
  // Device bytes of recurrent states held (for tests and logs).
  uint64_t state_bytes() const;

 private:
  struct GdnLayer {
    GpuMatrix qkv, gate, beta, alpha, out;
    uint64_t conv = 0, dt_bias = 0, a_neg = 0, norm = 0;
    int64_t state_offset = 0;  // floats into the state buffer
  };
  struct Layer {
    uint64_t attn_norm = 0, ffn_norm = 0;
    GpuAttentionWeights attn;  // attention layers
    GdnLayer gdn;              // Gated DeltaNet layers
    GpuFfnWeights ffn;
  };
  struct GdnWork;

  void upload_weights(const std::vector<std::shared_ptr<Device>>& devices);
  // Bytes stage layers [first, last) upload.
  uint64_t layers_upload_bytes(int64_t first, int64_t last) const;
  Layer upload_layer(DeviceWeights& w, int64_t il, GdnWork* gdn) const;
  // The device copy of each run's state on stage si, current (uploads what the host changed).
  std::vector<uint64_t> prepare_states(size_t si, const ForwardBatch& batch);
  void write_runs(size_t si, const ForwardBatch& batch);
  void record_stage(size_t si, int64_t n, bool first_run, bool last_run, bool with_stats);
  void record_gdn(GpuOps& ops, GpuStage& s, GdnWork& w, const GdnLayer& l, int64_t n, uint64_t runs,
                  int64_t n_runs, ActivationInput& normed);
  // After a step: the host headers count its tokens, the devices hold the states.
  void advance_states(const ForwardBatch& batch);

  std::unique_ptr<DecoderModel> cpu_;
  GpuPlacement placement_plan_;
  std::string placement_summary_;
  std::vector<std::string> device_labels_;  // [device index of the placement]
  StagePlan plan_;
  std::vector<std::unique_ptr<GpuStage>> stages_;  // the plan's GPU runs, in order
  std::vector<std::unique_ptr<GdnWork>> gdn_;      // [stage], null without recurrent layers
  GpuModelEnds ends_;
  std::unique_ptr<GpuEmbeddings> embeddings_;  // null: the CPU runs the first layers
  std::unique_ptr<GpuOutputHead> head_;        // null: the CPU computes the head
  std::vector<Layer> layers_;
  std::vector<float> host_x_;      // hidden states on their way through the CPU's layers
  BlockWorkspace head_workspace_;  // the CPU's output head
  int64_t first_kv_layer_ = -1;
  BatchRows rows_;
  KvPlacement placement_;
  HybridTimeline timeline_;
};

}  // namespace strata::vk
