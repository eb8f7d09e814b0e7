#pragma once
// One Vulkan device as strata uses it: a compute queue, buffers addressed by device address
// (kernels take raw addresses in push constants, so no descriptor sets and no per-binding size
// limit), the compute kernels compiled into the binary, and command lists that record
// dispatches once and run them many times.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/vulkan/instance.h"

namespace strata::vk {

class Device;

enum class MemoryKind {
  device,  // device-local: weights, caches, activations
  host,    // host-visible and coherent: parameters written by the host, results read back
};

// A buffer and its memory. Move-only; frees itself.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  uint64_t address() const { return address_; }  // device address of byte 0
  uint64_t size() const { return size_; }
  VkBuffer handle() const { return buffer_; }
  // Host pointer of a MemoryKind::host buffer (null for device memory).
  void* mapped() const { return mapped_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
  void reset();

 private:
  friend class Device;
  Device* device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  uint64_t address_ = 0;
  void* mapped_ = nullptr;
};

// A compute pipeline built from one embedded SPIR-V module (see shaders/); push constants only.
struct Kernel {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  std::string name;
};

constexpr uint32_t kMaxPushConstantBytes = 128;  // the minimum every device guarantees

// Recorded GPU work. Each dispatch waits for the previous one (a compute barrier between
// them), which is what a chain of dependent ops needs. Recording is deferred: the ops are kept
// as data and encoded into the Vulkan command buffer at end(), and only when they differ from
// the ones it already holds, so a step recorded the same way as the last one (a decode step:
// same buffers, same shapes) replays the buffer without re-encoding.
class CommandList {
 public:
  explicit CommandList(Device& device);
  CommandList(const CommandList&) = delete;
  CommandList& operator=(const CommandList&) = delete;
  ~CommandList();

  // Starts a fresh recording (discarding the previous one).
  void begin();
  // push: the kernel's push-constant struct (at most kMaxPushConstantBytes).
  void dispatch(const Kernel& kernel, const void* push, uint32_t push_bytes, uint32_t groups_x,
                uint32_t groups_y = 1, uint32_t groups_z = 1);
  template <typename Push>
  void dispatch(const Kernel& kernel, const Push& push, uint32_t gx, uint32_t gy = 1,
                uint32_t gz = 1) {
    static_assert(sizeof(Push) <= kMaxPushConstantBytes);
    // end() compares recordings byte for byte: padding bytes (indeterminate) would make equal
    // steps look different. 64-bit members first, 32-bit ones padded to a multiple of 8 bytes,
    // floats as std::bit_cast<uint32_t>.
    static_assert(std::has_unique_object_representations_v<Push>,
                  "push constants must have no padding and no float members");
    dispatch(kernel, &push, sizeof(Push), gx, gy, gz);
  }
  void copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset,
            uint64_t bytes);
  void fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t value);
  // Hybrid steps: the host works in the middle of a recording. host_task() ends the current
  // segment and returns a task the host may start once the GPU has finished everything recorded
  // so far (wait_for_gpu); after_host(task) ends the current segment and makes what is recorded
  // next wait until the host called task_done(task). Submitting ahead, the GPU waits on a
  // timeline semaphore the host signals, never on the host thread, and the segments are
  // submitted together; in order, a segment is submitted once its task is done (fences_segments).
  int host_task();
  int after_host(int task);  // returns the segment it ended
  // A copy on the device's transfer queue (Device::has_transfer_queue): it ends the current
  // segment and starts once the GPU has finished everything recorded so far; after_transfer(t)
  // ends the current segment and makes what is recorded next wait for copy t. Every transfer
  // must be waited for so before end(). The compute queue keeps working in between.
  int transfer(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset,
               uint64_t bytes);
  void after_transfer(int transfer);
  // Host side of a submitted step (tasks in the order they were recorded). Throws
  // strata::Error when the device is lost.
  void wait_for_gpu(int task);
  void task_done(int task);
  // Releases every task not yet done (so the GPU can finish the step after a host error).
  void abandon_tasks();
  // Whether the GPU has finished segment `segment` of the submitted step (without waiting).
  bool segment_finished(int segment);
  // Whether steps synchronise through timeline semaphores (else fences: fences_segments()).
  bool uses_timelines() const { return gpu_timeline_ != VK_NULL_HANDLE; }
  int host_tasks() const { return static_cast<int>(task_segment_.size()); }
  // Ends the recording; it can then be submitted any number of times.
  void end();
  // How often end() had to encode ops into Vulkan (the rest were replays).
  int64_t encodings() const { return encodings_; }
  // Runs the recording and waits for it. Throws strata::Error (VK_ERROR_DEVICE_LOST: "the GPU
  // was lost") when the device fails.
  void submit_and_wait() {
    submit();
    wait();
  }
  void submit();  // starts it; wait() before submitting it again or reading its results
  void wait();
  int64_t dispatches() const { return dispatches_; }
  // GPU timestamps (bench --profile): while the device's timestamps are on and it has them, each
  // segment records its start and end. After wait(): [segment] {start, end} in ms from the first
  // segment's start (empty when not timed).
  struct SegmentTime {
    double start_ms = 0, end_ms = 0;
  };
  std::vector<SegmentTime> segment_times();
  // A model's step list: its waits count for Device::lose_after_model_steps (tests).
  void mark_model_step() { model_step_ = true; }

 private:
  struct Op {
    // segment: ends a command buffer; the next waits for host task `value` (kNoTask: none) or
    // for transfer `transfer_wait`. transfer: a copy on the transfer queue (its own command
    // buffer), after the segment just ended.
    enum class Kind : uint8_t { dispatch, copy, fill, segment, transfer } kind = Kind::dispatch;
    const Kernel* kernel = nullptr;
    uint32_t push_bytes = 0, groups[3] = {0, 0, 0};
    uint8_t push[kMaxPushConstantBytes] = {};
    VkBuffer src = VK_NULL_HANDLE, dst = VK_NULL_HANDLE;
    uint64_t src_offset = 0, dst_offset = 0, bytes = 0;
    uint32_t value = 0;
    uint32_t transfer_wait = 0xffffffffu;
    bool operator==(const Op& o) const;
  };
  static constexpr uint32_t kNoTask = ~0u;
  void encode();
  void barrier(VkCommandBuffer cmd);
  void host_barrier(VkCommandBuffer cmd);
  void wait_semaphore(VkSemaphore semaphore, uint64_t value, const char* what);
  int end_segment(uint32_t wait_task);
  Op& add_copy(Op::Kind kind, const Buffer& src, uint64_t src_offset, const Buffer& dst,
               uint64_t dst_offset, uint64_t bytes);
  void submit_segments();
  void submit_fenced(size_t end);
  VkFence create_fence();
  void create_timelines();
  // In order on one queue (lavapipe), segments signal fences rather than timeline semaphores:
  // Mesa 22.3 emulates timelines with a submit thread and bookkeeping the host races with (seen
  // as hangs in vkWaitSemaphores and as heap corruption under load); fences are plain.
  bool fences_segments() const;
  VkFence segment_fence(size_t segment) const;  // the fence segment `segment` signals (fenced)
  bool transfers_signal() const;       // whether transfers and their waits use transfer_timeline_
  size_t submitted_ = 0;               // segments of the submitted step handed to the queue so far
  std::vector<Op> pending_, encoded_;  // this recording's ops; those in cmds_
  // Per segment of the pending recording: the host task it waits for (kNoTask: none); per host
  // task: the segment whose completion lets it start.
  std::vector<uint32_t> segment_wait_;
  std::vector<int> task_segment_;
  // Per segment: the transfer it waits for (kNoTask: none); per transfer: the segment it follows.
  std::vector<uint32_t> segment_transfer_;
  std::vector<int> transfer_segment_;
  std::vector<bool> transfer_awaited_;
  std::vector<VkCommandBuffer> transfer_cmds_;  // one per transfer, from the transfer pool
  // Transfer t of the submitted step signals transfer_base_ + t + 1 (when transfers_signal()).
  VkSemaphore transfer_timeline_ = VK_NULL_HANDLE;
  uint64_t transfer_base_ = 0, next_transfer_base_ = 0;
  // Timeline values: segment s of the submitted step signals gpu_base_ + s + 1 on gpu_timeline_;
  // task t signals host_base_ + t + 1 on host_timeline_. tasks_done_: tasks signalled so far.
  VkSemaphore gpu_timeline_ = VK_NULL_HANDLE, host_timeline_ = VK_NULL_HANDLE;
  uint64_t gpu_base_ = 0, host_base_ = 0, next_gpu_base_ = 0, next_host_base_ = 0;
  int tasks_done_ = 0;
  bool has_encoding_ = false, encoded_timed_ = false;
  uint64_t encoded_frees_ = 0;            // the device's buffer frees when cmd_ was encoded
  VkQueryPool queries_ = VK_NULL_HANDLE;  // two timestamps per segment, when timed
  uint32_t query_capacity_ = 0;
  int64_t encodings_ = 0;
  Device& device_;
  std::vector<VkCommandBuffer> cmds_;  // one per segment
  VkFence fence_ = VK_NULL_HANDLE;     // the submitted step's last segment
  // Fenced: segment s < last signals segment_fences_[s]. step_done_: wait() returned for the
  // submitted step.
  std::vector<VkFence> segment_fences_;
  bool step_done_ = false;
  bool recording_ = false, needs_barrier_ = false, model_step_ = false;
  int64_t dispatches_ = 0;
};

class Device {
 public:
  // Opens the device with the features strata's kernels need (see DeviceInfo::missing).
  // opening: how many times this process opened the same device before (--device vk0,vk0 makes
  // two logical devices of one GPU: each with its own memory, queue and kernels).
  explicit Device(const DeviceInfo& info, int opening = 0);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  const DeviceInfo& info() const { return info_; }
  // "vk0 (NVIDIA GeForce RTX 2070 SUPER)"; a second opening of the same GPU is "vk0:1 (...)".
  std::string label() const;
  // Command lists encoded while on time their segments (CommandList::segment_times), on devices
  // with compute timestamps.
  void set_timestamps(bool on) {
    timestamps_ = on && info_.timestamp_period_ns > 0 && timestamp_bits_ > 0;
  }
  bool timestamps() const { return timestamps_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  VkCommandPool command_pool() const { return pool_; }

  // Allocates `bytes`. `what` names the contents for the error when memory runs out, which says
  // how much was needed and how much was free.
  Buffer allocate(uint64_t bytes, MemoryKind kind, const std::string& what);
  uint64_t allocated_bytes() const { return allocated_; }
  // Whether MemoryKind::host buffers are cached for the CPU (not write-combined or in VRAM).
  bool host_memory_cached() const;
  uint64_t device_local_bytes() const { return allocated_device_; }  // of allocated_bytes()
  // Caps device-local allocations at `bytes` (--vram-budget: an 8 GB card on a bigger GPU, or on
  // lavapipe); 0 lifts the cap.
  void set_memory_limit(uint64_t bytes) { memory_limit_ = bytes; }
  uint64_t memory_limit() const { return memory_limit_; }
  // Device-local bytes strata may use: the cap when set, else the free memory the driver
  // reported (0 = unknown, as for CPU devices whose "device memory" is the host's).
  uint64_t memory_budget() const;

  // Copies host memory into a device buffer through a ring of staging buffers (two slots, so
  // the next memcpy overlaps the previous transfer). progress(bytes_done) is called per slot.
  void upload(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes,
              const std::function<void(uint64_t)>& progress = {});
  // Copies a device buffer range into host memory.
  void download(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes);

  // The kernel compiled from shaders/<name>.comp (variant names carry their suffix, e.g.
  // "matmul_q4_k"). Throws when the binary has no such kernel.
  const Kernel& kernel(const std::string& name);
  static bool has_kernel(const std::string& name);

  // How hybrid steps are submitted: ahead (every segment at once; the GPU waits on the host's
  // timeline semaphore) or in order (a segment that waits for the host goes to the queue once
  // the host has signalled). In order on CPU-type devices: Mesa 22.3's lavapipe deadlocks now
  // and then when a submission waits on a semaphore the host signals later. STRATA_VK_SUBMIT=
  // ahead|in-order overrides.
  bool submits_ahead() const { return submits_ahead_; }
  // Copies recorded with CommandList::transfer run on this queue: a queue family of copy engines
  // without compute where the GPU has one (they then overlap the compute queue's work), else a
  // second queue of the compute family, else the compute queue itself (in its order).
  // STRATA_VK_TRANSFER_QUEUE=compute keeps them on the compute queue.
  bool has_transfer_queue() const { return transfer_queue_ != queue_; }

  // Tests: from the (n+1)-th wait of a model step on, waits report the device lost, as a driver
  // does after a GPU fault, so the server's recovery is testable anywhere (the CLI reads
  // STRATA_VK_LOSE_DEVICE_AFTER). -1: never (the default).
  void lose_after_model_steps(long n) { steps_before_loss_ = n; }

 private:
  friend class Buffer;
  friend class CommandList;
  uint32_t memory_type(uint32_t type_bits, MemoryKind kind) const;
  void free(Buffer& buffer);

  DeviceInfo info_;
  int opening_ = 0;
  bool timestamps_ = false;
  uint32_t timestamp_bits_ = 0;  // of the queue family used
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkQueue transfer_queue_ = VK_NULL_HANDLE;  // queue_ when there is no other
  uint32_t transfer_family_ = 0;
  VkCommandPool transfer_pool_ = VK_NULL_HANDLE;  // pool_ for the compute family
  VkPhysicalDeviceMemoryProperties memory_{};
  // Read by other threads (/metrics) while the model's thread allocates.
  std::atomic<uint64_t> allocated_{0}, allocated_device_{0};
  uint64_t memory_limit_ = 0;
  // Buffers freed so far: a command buffer that names a freed buffer (copies, fills) is invalid
  // even if a new buffer later gets the same handle, so it is encoded again.
  uint64_t frees_ = 0;
  std::map<std::string, Kernel> kernels_;
  bool submits_ahead_ = true;
  Buffer staging_[2];
  std::unique_ptr<CommandList> transfer_[2];
  std::atomic<long> steps_before_loss_{-1};  // lose_after_model_steps
  // A model step's wait: whether it is (or follows) the injected loss.
  bool injected_loss();
};

}  // namespace strata::vk
