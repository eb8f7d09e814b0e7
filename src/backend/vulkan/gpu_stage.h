#pragma once
// One device's share of a model: a run of consecutive layers with their weights, keys and values
// and the step's buffers on that device. A model on one GPU is one stage; a plan that splits the
// layers across GPUs has one stage per run of layers on the same GPU. A step runs the stages in
// order; between two, the hidden states hop through host memory (each stage's own host-visible
// buffer: two Vulkan devices share no memory).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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

// Layers [first, last) on device `device` (an index into the decoder's devices; kCpuLayers:
// the CPU runs them from RAM).
constexpr int kCpuLayers = -1;
struct StageLayers {
  int device = 0;
  int64_t first = 0, last = 0;
  bool contains(int64_t il) const { return il >= first && il < last; }
  bool on_cpu() const { return device == kCpuLayers; }
};

// The runs of consecutive layers on the same device, in layer order, and which GPU stage holds
// the token embeddings and the output head.
struct StagePlan {
  std::vector<StageLayers> runs;
  bool embeddings_on_gpu = false;  // the first run is a GPU's, holding token_embd
  bool head_on_gpu = false;        // the last run is a GPU's, holding the output norm and head
  bool shared_table = false;       // both in one stage and tied: the head reads that upload
  size_t gpu_stages() const;
};
// tied: the output head is the token embedding table.
StagePlan plan_stages(const GpuPlacement& placement, int64_t n_layer, bool tied);

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
  // Starts the stage's recording: unless it is the model's first, by copying in the hidden states
  // written to its hop buffer (receive) before the step is submitted.
  void begin(GpuOps& ops, int64_t n, bool first_stage);
  // Ends a stage the model does not end in (or one the CPU's output head follows): its hidden
  // states go to its hop buffer.
  void hand_over(GpuOps& ops, int64_t n);
  // Ends the recording: the output head over `rows` when this stage computes it (head non-null),
  // else the hand-over; the copy of the expert selections when the step keeps stats.
  void end(GpuOps& ops, int64_t n, GpuOutputHead* head, std::span<const int32_t> rows,
           bool with_stats);
  // Host side of a hop, after the previous part of the step ran.
  void receive(const float* x, int64_t n);
  void send(float* x, int64_t n);
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

  // Host-visible [n][n_embd]: the hidden states handed over or received (allocated on first use).
  const Buffer& hop();

 private:
  int64_t tokens_ = 0;
  Buffer hop_;
};

// The model's tensors outside its layers: the token embeddings on the first stage (or in RAM),
// the output norm and head on the last (or in RAM); every stage gets its own RoPE frequency
// table.
struct ModelEnds {
  const ops::WeightMatrix& token_embd;
  const ops::WeightMatrix& output;
  const float* output_norm;

  // Bytes a stage holds of them (for its DeviceWeights' total).
  uint64_t upload_bytes(const ModelHParams& hp, const StagePlan& plan, size_t stage) const;
};
struct GpuModelEnds {
  GpuMatrix token_embd, output;  // address 0: in RAM
  uint64_t output_norm = 0;
};
// Uploads GPU stage `index`'s share (sets its inv_freq) into `out`.
void upload_model_ends(const ModelEnds& ends, const ModelHParams& hp, const StagePlan& plan,
                       GpuStage& stage, size_t index, GpuModelEnds& out);

// A step through the runs in layer order. The hidden states start on the first GPU stage
// (embedded there) or in `host_x` (embed_on_host), move through host memory between runs and end
// on the last GPU stage (its head records the logits) or in host_x (the caller's CPU head).
struct StageSteps {
  std::function<void(float* host_x)> embed_on_host;  // the first run is the CPU's
  std::function<void(size_t stage, bool first_run, bool last_run)> record;  // one GPU stage
  std::function<void(const StageLayers& run, float* host_x)> cpu_layers;    // the CPU's run
};
// Returns the hops and CPU runs it timed (for the step's timeline).
std::vector<StageSpan> run_stages(const StagePlan& plan,
                                  const std::vector<std::unique_ptr<GpuStage>>& stages, int64_t n,
                                  std::vector<float>& host_x, int64_t n_embd, ThreadPool& pool,
                                  const StageSteps& steps);

// The stages' CPU work of the last step as one timeline (layers in order, step times summed),
// with run_stages' hops and CPU layers.
HybridTimeline merged_timeline(const std::vector<std::unique_ptr<GpuStage>>& stages,
                               std::vector<StageSpan> spans);
// Each distinct device's memory (for /props and /metrics).
std::vector<Model::DeviceMemory> stages_memory(
    const std::vector<std::unique_ptr<GpuStage>>& stages);
// Encodings of every stage's command list.
int64_t stages_encodings(const std::vector<std::unique_ptr<GpuStage>>& stages);

}  // namespace strata::vk
