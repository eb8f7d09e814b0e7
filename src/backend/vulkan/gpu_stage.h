#pragma once
// One device's share of a model: a run of consecutive layers with their weights, keys and values
// and the step's buffers on that device. A model on one GPU is one stage; a plan that splits the
// layers across GPUs has one stage per run of layers on the same GPU. A step runs the stages in
// order; between two, the hidden states hop through host memory (each stage's own host-visible
// buffer: two Vulkan devices share no memory).

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/vulkan/activation_input.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/device_kv.h"
#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_attention.h"
#include "backend/vulkan/gpu_decoder_parts.h"
#include "backend/vulkan/gpu_ops.h"
#include "model/hparams.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "util/thread_pool.h"

namespace strata::vk {

// Layers [first, last) on device `device` (an index into the decoder's devices).
struct StageLayers {
  int device = 0;
  int64_t first = 0, last = 0;
  bool contains(int64_t il) const { return il >= first && il < last; }
};
// The runs of consecutive layers on the same device (layer_device: [n_layer] device indices;
// empty: every layer on device 0).
std::vector<StageLayers> stage_layers(const std::vector<int>& layer_device, int64_t n_layer);

class GpuStage {
  // First: the device outlives every buffer below (members are destroyed in reverse order).
  std::shared_ptr<Device> device_;
  const ModelHParams& hp_;
  StageLayers layers_;

 public:
  // kv_layers: [n_layer] the model's layers with keys and values (only this stage's are kept);
  // shared_ff: the shared expert's hidden size (0 without one).
  GpuStage(std::shared_ptr<Device> device, const ModelHParams& hp, StageLayers layers,
           const std::vector<bool>& kv_layers, int64_t shared_ff);

  Device& device() const { return *device_; }
  const std::shared_ptr<Device>& shared_device() const { return device_; }
  const StageLayers& layers() const { return layers_; }
  bool contains(int64_t il) const { return layers_.contains(il); }

  // Room for a step of n tokens (attention, FFN, hidden states, the hop buffer).
  void ensure(int64_t n);
  // Starts the stage's recording: a stage after the first begins by copying in the hidden states
  // the previous one handed over (hop_in: that stage's hop buffer, already waited for).
  void begin(GpuOps& ops, int64_t n, bool first_stage);
  // Ends a stage before the last: its hidden states go to its hop buffer.
  void hand_over(GpuOps& ops, int64_t n);
  // After this stage ran: the next stage's input is this one's output.
  void pass_to(GpuStage& next, int64_t n);
  void release_retired();

  std::unique_ptr<DeviceWeights> weights;
  std::unique_ptr<DeviceKv> kv;
  std::unique_ptr<CommandList> cmd;
  GpuStepParams step;
  std::unique_ptr<GpuAttention> attention;
  std::unique_ptr<GpuFfn> ffn;
  ActivationScratch normed_in;  // rounded copies of the normed states
  uint64_t inv_freq = 0;        // this device's RoPE frequency table
  Buffer x, normed, delta;      // [n][n_embd] hidden states, normed states, block outputs

 private:
  const Buffer& hop();  // allocated when the first hop needs it
  int64_t tokens_ = 0;
  Buffer hop_;  // host-visible [n][n_embd]: hidden states handed over or received
};

// The model's tensors outside its layers: the token embeddings on the first stage (or in RAM),
// the output norm and head on the last; every stage gets its own RoPE frequency table. A head
// tied to the embeddings reads the same upload on one stage, its own copy on a split model.
struct ModelEnds {
  const ops::WeightMatrix& token_embd;
  const ops::WeightMatrix& output;
  const float* output_norm;
  bool embeddings_on_device = true;

  bool tied() const { return output.data == token_embd.data; }
  // Bytes stage `index` of n_stages holds of them (for its DeviceWeights' total).
  uint64_t upload_bytes(const ModelHParams& hp, size_t index, size_t n_stages) const;
};
struct GpuModelEnds {
  GpuMatrix token_embd, output;  // token_embd address 0: in RAM
  uint64_t output_norm = 0;
};
// Uploads stage `index`'s share (sets its inv_freq) into `out`.
void upload_model_ends(const ModelEnds& ends, const ModelHParams& hp, GpuStage& stage, size_t index,
                       size_t n_stages, GpuModelEnds& out);

// The stages' CPU work of the last step as one timeline (layers in order, step times summed).
HybridTimeline merged_timeline(const std::vector<std::unique_ptr<GpuStage>>& stages);
// Each distinct device's memory (for /props and /metrics).
std::vector<Model::DeviceMemory> stages_memory(
    const std::vector<std::unique_ptr<GpuStage>>& stages);
// Encodings of every stage's command list.
int64_t stages_encodings(const std::vector<std::unique_ptr<GpuStage>>& stages);

}  // namespace strata::vk
