#pragma once
// Routed experts that live in RAM, computed by the CPU in the middle of a GPU step (hybrid
// execution). For such a layer the GPU routes the tokens, copies the selections and the FFN input
// to host-visible memory and signals; the host computes the pairs whose expert is in RAM while the
// GPU computes the ones it holds and the shared expert; the GPU then waits (on a timeline semaphore
// the host signals, not on the host thread) and adds the CPU's partial sum.

#include <cstdint>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/gpu_ops.h"
#include "backend/vulkan/ram_experts.h"
#include "model/blocks.h"
#include "model/hparams.h"
#include "util/thread_pool.h"

namespace strata::vk {

// What the host did for one layer of a hybrid step (bench --profile, the overlap test).
struct CpuExpertSpan {
  int64_t layer = 0;
  double start_ms = 0;             // from the submission, on the host's clock
  int64_t pairs = 0;               // (token, expert) pairs the CPU computed
  double wait_ms = 0;              // the host waited this long for the GPU to hand the layer over
  double cpu_ms = 0;               // computing the layer's experts that live in RAM
  bool gpu_busy_at_start = false;  // the GPU's part of the layer was still running when the CPU
  bool gpu_busy_at_end = false;    // started / when it finished
};

// A prompt batch's upload of one layer's RAM experts (instead of the CPU computing them): one
// copy on the transfer queue from their host-visible memory into a device-local stack.
struct ExpertUploadSpan {
  int64_t layer = 0;
  int64_t experts = 0;  // the layer's experts in RAM, all copied
  uint64_t bytes = 0;
  bool prefetched = false;  // the copy started once the previous layer was done with the stack
};

// One command-buffer segment of a step on the GPU, from timestamp queries (bench --profile): ms
// from the start of its stage's first segment, on the GPU's clock. A gap between segments is the
// GPU waiting for the host (or for an upload on the transfer queue).
struct GpuSegmentSpan {
  int stage = 0;  // the part of the model (a device's run of layers) it belongs to
  int segment = 0;
  double start_ms = 0, end_ms = 0;
};

// Between two parts of a step (a model split across GPUs, or layers on the CPU): the hidden
// states' trip through host memory, or the CPU running its layers.
struct StageSpan {
  int64_t first_layer = 0, last_layer = 0;  // the run the span belongs to
  bool cpu_layers = false;                  // the CPU running those layers (else a hop into them)
  double ms = 0;
};

struct HybridTimeline {
  double step_ms = 0;  // submission to the GPU's last signal
  std::vector<CpuExpertSpan> layers;
  std::vector<ExpertUploadSpan> uploads;
  std::vector<GpuSegmentSpan> segments;  // when the device's timestamps are on
  std::vector<StageSpan> stages;         // hops and CPU layers, in step order
};

class CpuExperts {
 public:
  CpuExperts(Device& device, const ModelHParams& hp);

  // A new recording of n tokens: room for them, and no layers handed over yet.
  void begin_step(int64_t n);
  // Records the hand-over of layer il (n tokens): selections ([n][k] ids and weights, in device
  // buffers at byte offsets) and the FFN input x ([n][n_embd]) are copied to host memory, then the
  // segment ends. The CPU will compute the pairs whose expert is in `ram`.
  void hand_over(GpuOps& ops, int64_t il, const RamExperts& ram, const Buffer& ids,
                 uint64_t ids_offset, const Buffer& expert_weights, const Buffer& x, int64_t n);
  // Ends the GPU's own part of the layer; what follows waits for the CPU and first adds its
  // partial sum to out ([n][n_embd]).
  void take_back(GpuOps& ops, uint64_t out, int64_t n);
  // After cmd.submit(): runs the step's CPU work in order, then waits for the GPU. On an error
  // the GPU is released (every task signalled) before it is rethrown.
  void run_step(CommandList& cmd, ThreadPool& pool);
  void set_matmul_settings(const ops::MatmulSettings& settings) { workspace_.matmul = settings; }
  const HybridTimeline& timeline() const { return timeline_; }

 private:
  struct Task {
    int64_t layer = 0, n = 0;
    const RamExperts* ram = nullptr;
    int task = -1, gpu_segment = -1;
  };
  void run_tasks(CommandList& cmd, ThreadPool& pool);
  void compute(CommandList& cmd, const Task& t, ThreadPool& pool);
  std::vector<int32_t> chosen_;  // a layer's selections as places in its RAM stacks
  BlockWorkspace workspace_;
  void ensure(int64_t n);

  Device& device_;
  const ModelHParams& hp_;
  int64_t tokens_ = 0, step_tokens_ = 0;
  Buffer ids_, weights_, x_, partial_;  // host-visible: [n][k] ids and weights, [n][n_embd] x
  std::vector<Task> tasks_;             // this recording's host work, in order
  double step_start_ms_ = 0;            // the host clock at the submission
  int last_hand_over_ = -1;             // the task take_back ends
  HybridTimeline timeline_;
};

}  // namespace strata::vk
