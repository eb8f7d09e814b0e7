#include "backend/vulkan/device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "backend/vulkan/embedded_kernels.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

namespace strata::vk {
namespace {

constexpr uint64_t kStagingSlotBytes = 16ull << 20;

const SpirvBlob* find_blob(const std::string& name) {
  for (const SpirvBlob& b : embedded_kernels())
    if (name == b.name) return &b;
  return nullptr;
}

[[noreturn]] void fail_result(const char* what, VkResult r) {
  if (r == VK_ERROR_DEVICE_LOST) {
    throw DeviceLost(
        fmt::format("the GPU was lost during {} (VK_ERROR_DEVICE_LOST); restart strata", what));
  }
  fail("Vulkan: {}", failure_message(what, r));
}

}  // namespace

// ---- Buffer -------------------------------------------------------------------------------

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    buffer_ = other.buffer_;
    memory_ = other.memory_;
    size_ = other.size_;
    address_ = other.address_;
    mapped_ = other.mapped_;
    other.buffer_ = VK_NULL_HANDLE;
    other.memory_ = VK_NULL_HANDLE;
    other.device_ = nullptr;
  }
  return *this;
}

void Buffer::reset() {
  if (device_ && buffer_) device_->free(*this);
  device_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  size_ = address_ = 0;
  mapped_ = nullptr;
}

// ---- Device -------------------------------------------------------------------------------

Device::Device(const DeviceInfo& info, int opening) : info_(info), opening_(opening) {
  STRATA_CHECK(info.usable(), "vk{} ({}) lacks what strata's kernels need: {}", info.index,
               info.name, fmt::join(info.missing, ", "));
  submits_ahead_ = !info.is_cpu;
  if (const char* mode = std::getenv("STRATA_VK_SUBMIT"); mode && *mode) {
    STRATA_CHECK(std::string_view(mode) == "ahead" || std::string_view(mode) == "in-order",
                 "STRATA_VK_SUBMIT={}: expected ahead or in-order", mode);
    submits_ahead_ = std::string_view(mode) == "ahead";
  }
  const Api& a = api();
  uint32_t n_queue = 0;
  a.vkGetPhysicalDeviceQueueFamilyProperties(info.physical, &n_queue, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_queue);
  a.vkGetPhysicalDeviceQueueFamilyProperties(info.physical, &n_queue, families.data());
  bool found = false;
  for (uint32_t i = 0; i < n_queue && !found; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = i;
      found = true;
    }
  }
  STRATA_CHECK(found, "vk{} ({}) has no compute queue", info.index, info.name);
  // Timestamps only where the queue used has them (the profile's GPU segments).
  timestamp_bits_ = families[queue_family_].timestampValidBits;

  // The transfer queue: copy engines (a family with transfer and without compute or graphics),
  // else a second queue of the compute family, else none (the compute queue).
  transfer_family_ = queue_family_;
  uint32_t transfer_index = 0;
  const char* transfer_mode = std::getenv("STRATA_VK_TRANSFER_QUEUE");
  const bool own_transfer = !(transfer_mode && std::string_view(transfer_mode) == "compute");
  STRATA_CHECK(!transfer_mode || !*transfer_mode || std::string_view(transfer_mode) == "compute" ||
                   std::string_view(transfer_mode) == "auto",
               "STRATA_VK_TRANSFER_QUEUE={}: expected auto or compute", transfer_mode);
  if (own_transfer) {
    bool dedicated = false;
    for (uint32_t i = 0; i < n_queue && !dedicated; ++i) {
      const VkQueueFlags f = families[i].queueFlags;
      const VkQueueFlags others =
          ~(VK_QUEUE_TRANSFER_BIT | VK_QUEUE_SPARSE_BINDING_BIT | VK_QUEUE_PROTECTED_BIT);
      if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & others) && families[i].queueCount > 0) {
        transfer_family_ = i;
        dedicated = true;
      }
    }
    if (!dedicated && families[queue_family_].queueCount > 1) transfer_index = 1;
  }
  const float priorities[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo queue_infos[2]{};
  for (VkDeviceQueueCreateInfo& q : queue_infos) {
    q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    q.pQueuePriorities = priorities;
  }
  queue_infos[0].queueFamilyIndex = queue_family_;
  queue_infos[0].queueCount = transfer_index + 1;
  queue_infos[1].queueFamilyIndex = transfer_family_;
  queue_infos[1].queueCount = 1;
  const uint32_t n_queue_infos = transfer_family_ != queue_family_ ? 2 : 1;

  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.bufferDeviceAddress = VK_TRUE;
  f12.timelineSemaphore = VK_TRUE;  // hybrid steps: the GPU and the host signal each other
  f12.shaderFloat16 = info.fp16 ? VK_TRUE : VK_FALSE;
  f12.shaderInt8 = info.int8 ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f11;
  features.features.shaderInt16 = VK_TRUE;
  features.features.shaderInt64 = VK_TRUE;

  std::vector<const char*> extensions;
  if (info.has_memory_budget) extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);

  VkDeviceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create.pNext = &features;
  create.queueCreateInfoCount = n_queue_infos;
  create.pQueueCreateInfos = queue_infos;
  create.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
  STRATA_VK(a.vkCreateDevice(info.physical, &create, nullptr, &device_));
  load_device_functions(device_);
  api().vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = queue_family_;
  STRATA_VK(api().vkCreateCommandPool(device_, &pool_info, nullptr, &pool_));
  api().vkGetDeviceQueue(device_, transfer_family_,
                         transfer_family_ == queue_family_ ? transfer_index : 0, &transfer_queue_);
  transfer_pool_ = pool_;
  if (transfer_family_ != queue_family_) {
    pool_info.queueFamilyIndex = transfer_family_;
    STRATA_VK(api().vkCreateCommandPool(device_, &pool_info, nullptr, &transfer_pool_));
  }
  api().vkGetPhysicalDeviceMemoryProperties(info.physical, &memory_);
}

Device::~Device() {
  const Api& a = api();
  if (device_) a.vkDeviceWaitIdle(device_);
  for (auto& t : transfer_) t.reset();
  for (auto& s : staging_) s.reset();
  for (auto& [name, k] : kernels_) {
    a.vkDestroyPipeline(device_, k.pipeline, nullptr);
    a.vkDestroyPipelineLayout(device_, k.layout, nullptr);
  }
  if (transfer_pool_ && transfer_pool_ != pool_)
    a.vkDestroyCommandPool(device_, transfer_pool_, nullptr);
  if (pool_) a.vkDestroyCommandPool(device_, pool_, nullptr);
  if (device_) a.vkDestroyDevice(device_, nullptr);
}

std::string Device::label() const {
  if (opening_ > 0) return fmt::format("vk{}:{} ({})", info_.index, opening_, info_.name);
  return fmt::format("vk{} ({})", info_.index, info_.name);
}

uint32_t Device::memory_type(uint32_t type_bits, MemoryKind kind) const {
  const VkMemoryPropertyFlags want =
      kind == MemoryKind::device
          ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
          : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Host buffers: cached system RAM first (a discrete GPU's host-visible VRAM, the BAR, is
  // uncached for the CPU and outside the VRAM budget), then any cached type, then any.
  int best = -1, cached = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if (kind == MemoryKind::device) return i;
    const bool is_cached = f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    if (is_cached && !(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) return i;
    if (is_cached && cached < 0) cached = static_cast<int>(i);
    if (best < 0) best = static_cast<int>(i);
  }
  if (cached >= 0) return static_cast<uint32_t>(cached);
  if (best < 0 && kind == MemoryKind::device) return memory_type(type_bits, MemoryKind::host);
  STRATA_CHECK(best >= 0, "{}: no memory type for {} buffers", label(),
               kind == MemoryKind::device ? "device" : "host-visible");
  return static_cast<uint32_t>(best);
}

bool Device::host_memory_cached() const {
  const uint32_t type = memory_type(~0u, MemoryKind::host);
  return memory_.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
}

Buffer Device::allocate(uint64_t bytes, MemoryKind kind, const std::string& what) {
  const Api& a = api();
  bytes = std::max<uint64_t>(bytes, 16);
  const auto out_of_memory = [&] {
    fail(
        "out of GPU memory on {}: {} needs {} ({} bytes); strata holds {} there, the device has "
        "{} of device memory and {} was free when strata started{}",
        label(), what, format_bytes(bytes), bytes, format_bytes(allocated_device_),
        format_bytes(info_.device_local_bytes), format_bytes(info_.device_local_budget),
        memory_limit_ ? fmt::format(" (--vram-budget {})", format_bytes(memory_limit_)) : "");
  };
  if (kind == MemoryKind::device && memory_limit_ && allocated_device_ + bytes > memory_limit_) {
    out_of_memory();
  }
  if (kind == MemoryKind::device && info_.max_allocation_bytes &&
      bytes > info_.max_allocation_bytes) {
    fail("{} on {}: {} needs one allocation of {}, above the device's limit of {}", what, label(),
         what, format_bytes(bytes), format_bytes(info_.max_allocation_bytes));
  }
  Buffer b;
  b.device_ = this;
  b.size_ = bytes;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
               VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // With copy engines of another family, every buffer may be used by both queues.
  const uint32_t families[2] = {queue_family_, transfer_family_};
  info.sharingMode =
      transfer_family_ != queue_family_ ? VK_SHARING_MODE_CONCURRENT : VK_SHARING_MODE_EXCLUSIVE;
  if (info.sharingMode == VK_SHARING_MODE_CONCURRENT) {
    info.queueFamilyIndexCount = 2;
    info.pQueueFamilyIndices = families;
  }
  STRATA_VK(a.vkCreateBuffer(device_, &info, nullptr, &b.buffer_));
  VkMemoryRequirements req;
  a.vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  VkMemoryAllocateFlagsInfo flags{};
  flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.pNext = &flags;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = memory_type(req.memoryTypeBits, kind);
  const VkResult r = a.vkAllocateMemory(device_, &alloc, nullptr, &b.memory_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    out_of_memory();  // b's destructor destroys the buffer
  }
  if (r != VK_SUCCESS) fail_result("vkAllocateMemory", r);
  STRATA_VK(a.vkBindBufferMemory(device_, b.buffer_, b.memory_, 0));
  if (kind == MemoryKind::host)
    STRATA_VK(a.vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_));
  VkBufferDeviceAddressInfo addr{};
  addr.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
  addr.buffer = b.buffer_;
  b.address_ = a.vkGetBufferDeviceAddress(device_, &addr);
  allocated_ += bytes;
  if (kind == MemoryKind::device) allocated_device_ += bytes;
  return b;
}

uint64_t Device::memory_budget() const {
  if (memory_limit_) return memory_limit_;
  return info_.is_cpu ? 0 : info_.device_local_budget;
}

void Device::free(Buffer& b) {
  const Api& a = api();
  if (b.mapped_) a.vkUnmapMemory(device_, b.memory_);
  a.vkDestroyBuffer(device_, b.buffer_, nullptr);
  if (b.memory_) a.vkFreeMemory(device_, b.memory_, nullptr);
  allocated_ -= std::min(allocated_.load(), b.size_);
  if (!b.mapped_) allocated_device_ -= std::min(allocated_device_.load(), b.size_);
  ++frees_;
}

void Device::upload(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes,
                    const std::function<void(uint64_t)>& progress) {
  STRATA_CHECK(offset + bytes <= dst.size(), "upload of {} bytes at {} overflows a {}-byte buffer",
               bytes, offset, dst.size());
  if (dst.mapped()) {  // host-visible: no staging needed
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
    if (progress) progress(bytes);
    return;
  }
  for (int i = 0; i < 2; ++i) {
    if (!staging_[i]) {
      staging_[i] = allocate(kStagingSlotBytes, MemoryKind::host, "the upload staging ring");
      transfer_[i] = std::make_unique<CommandList>(*this);
    }
  }
  bool pending[2] = {false, false};
  uint64_t done = 0;
  for (int slot = 0; done < bytes; slot ^= 1) {
    if (pending[slot]) transfer_[slot]->wait();  // the slot's previous copy is done
    const uint64_t n = std::min(kStagingSlotBytes, bytes - done);
    std::memcpy(staging_[slot].mapped(), static_cast<const uint8_t*>(src) + done, n);
    CommandList& cmd = *transfer_[slot];
    cmd.begin();
    cmd.copy(staging_[slot], 0, dst, offset + done, n);
    cmd.end();
    cmd.submit();
    pending[slot] = true;
    done += n;
    if (progress) progress(done);
  }
  for (int slot = 0; slot < 2; ++slot)
    if (pending[slot]) transfer_[slot]->wait();
}

void Device::download(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  STRATA_CHECK(offset + bytes <= src.size(),
               "download of {} bytes at {} overflows a {}-byte buffer", bytes, offset, src.size());
  if (src.mapped()) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.mapped()) + offset, bytes);
    return;
  }
  if (!staging_[0]) {
    staging_[0] = allocate(kStagingSlotBytes, MemoryKind::host, "the upload staging ring");
    transfer_[0] = std::make_unique<CommandList>(*this);
  }
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingSlotBytes, bytes - done);
    CommandList& cmd = *transfer_[0];
    cmd.begin();
    cmd.copy(src, offset + done, staging_[0], 0, n);
    cmd.end();
    cmd.submit_and_wait();
    std::memcpy(static_cast<uint8_t*>(dst) + done, staging_[0].mapped(), n);
    done += n;
  }
}

bool Device::has_kernel(const std::string& name) {
  return find_blob(name) != nullptr;
}

const Kernel& Device::kernel(const std::string& name) {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  const SpirvBlob* blob = find_blob(name);
  STRATA_CHECK(blob, "no GPU kernel '{}' in this build", name);
  const Api& a = api();
  Kernel k;
  k.name = name;
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  std::vector<uint32_t> words(blob->size / 4);
  std::memcpy(words.data(), blob->bytes, words.size() * 4);
  module_info.codeSize = words.size() * 4;
  module_info.pCode = words.data();
  VkShaderModule module;
  STRATA_VK(a.vkCreateShaderModule(device_, &module_info, nullptr, &module));
  VkPushConstantRange range{};
  range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  range.size = kMaxPushConstantBytes;
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &range;
  STRATA_VK(a.vkCreatePipelineLayout(device_, &layout_info, nullptr, &k.layout));
  VkComputePipelineCreateInfo pipe{};
  pipe.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipe.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipe.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipe.stage.module = module;
  pipe.stage.pName = "main";
  pipe.layout = k.layout;
  const VkResult r =
      a.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &pipe, nullptr, &k.pipeline);
  a.vkDestroyShaderModule(device_, module, nullptr);
  if (r != VK_SUCCESS) fail("{}: building kernel '{}' failed: {}", label(), name, result_name(r));
  return kernels_.emplace(name, k).first->second;
}

// ---- CommandList --------------------------------------------------------------------------

CommandList::CommandList(Device& device) : device_(device), fence_(create_fence()) {}

VkFence CommandList::create_fence() {
  VkFenceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence f = VK_NULL_HANDLE;
  STRATA_VK(api().vkCreateFence(device_.device_, &info, nullptr, &f));
  return f;
}

void CommandList::create_timelines() {
  // Only lists with host tasks get them: a plain step submits as one command buffer.
  if (gpu_timeline_) return;
  for (VkSemaphore* s : {&gpu_timeline_, &host_timeline_, &transfer_timeline_}) {
    VkSemaphoreTypeCreateInfo type{};
    type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    info.pNext = &type;
    STRATA_VK(api().vkCreateSemaphore(device_.device_, &info, nullptr, s));
  }
}

CommandList::~CommandList() {
  const Api& a = api();
  if (gpu_timeline_) a.vkDestroySemaphore(device_.device_, gpu_timeline_, nullptr);
  if (host_timeline_) a.vkDestroySemaphore(device_.device_, host_timeline_, nullptr);
  if (transfer_timeline_) a.vkDestroySemaphore(device_.device_, transfer_timeline_, nullptr);
  if (!transfer_cmds_.empty()) {
    a.vkFreeCommandBuffers(device_.device_, device_.transfer_pool_,
                           static_cast<uint32_t>(transfer_cmds_.size()), transfer_cmds_.data());
  }
  if (queries_) a.vkDestroyQueryPool(device_.device_, queries_, nullptr);
  for (VkFence f : segment_fences_) a.vkDestroyFence(device_.device_, f, nullptr);
  a.vkDestroyFence(device_.device_, fence_, nullptr);
  if (!cmds_.empty()) {
    a.vkFreeCommandBuffers(device_.device_, device_.pool_, static_cast<uint32_t>(cmds_.size()),
                           cmds_.data());
  }
}

bool CommandList::Op::operator==(const Op& o) const {
  return kind == o.kind && kernel == o.kernel && push_bytes == o.push_bytes &&
         std::memcmp(groups, o.groups, sizeof groups) == 0 &&
         std::memcmp(push, o.push, push_bytes) == 0 && src == o.src && dst == o.dst &&
         src_offset == o.src_offset && dst_offset == o.dst_offset && bytes == o.bytes &&
         value == o.value && transfer_wait == o.transfer_wait;
}

void CommandList::begin() {
  pending_.clear();
  segment_wait_.assign(1, kNoTask);
  segment_transfer_.assign(1, kNoTask);
  task_segment_.clear();
  transfer_segment_.clear();
  transfer_awaited_.clear();
  recording_ = true;
  dispatches_ = 0;
}

void CommandList::barrier(VkCommandBuffer cmd) {
  if (!needs_barrier_) return;
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api().vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &b, 0, nullptr, 0, nullptr);
  needs_barrier_ = false;
}

void CommandList::host_barrier(VkCommandBuffer cmd) {
  // Makes the segment's writes visible to the host (results read through mapped memory).
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  api().vkCmdPipelineBarrier(cmd,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
}

void CommandList::dispatch(const Kernel& kernel, const void* push, uint32_t push_bytes, uint32_t gx,
                           uint32_t gy, uint32_t gz) {
  STRATA_CHECK(recording_, "CommandList::dispatch outside begin/end");
  STRATA_CHECK(push_bytes <= kMaxPushConstantBytes, "push constants of {} bytes", push_bytes);
  if (gx == 0 || gy == 0 || gz == 0) return;
  Op& op = pending_.emplace_back();
  op.kernel = &kernel;
  op.push_bytes = push_bytes;
  if (push_bytes) std::memcpy(op.push, push, push_bytes);
  op.groups[0] = gx;
  op.groups[1] = gy;
  op.groups[2] = gz;
  ++dispatches_;
}

void CommandList::copy(const Buffer& src, uint64_t src_offset, const Buffer& dst,
                       uint64_t dst_offset, uint64_t bytes) {
  STRATA_CHECK(recording_, "CommandList::copy outside begin/end");
  if (bytes == 0) return;
  add_copy(Op::Kind::copy, src, src_offset, dst, dst_offset, bytes);
}

CommandList::Op& CommandList::add_copy(Op::Kind kind, const Buffer& src, uint64_t src_offset,
                                       const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  Op& op = pending_.emplace_back();
  op.kind = kind;
  op.src = src.handle();
  op.dst = dst.handle();
  op.src_offset = src_offset;
  op.dst_offset = dst_offset;
  op.bytes = bytes;
  return op;
}

void CommandList::fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t value) {
  STRATA_CHECK(recording_, "CommandList::fill outside begin/end");
  if (bytes == 0) return;
  Op& op = pending_.emplace_back();
  op.kind = Op::Kind::fill;
  op.dst = dst.handle();
  op.dst_offset = offset;
  op.bytes = bytes;
  op.value = value;
}

int CommandList::end_segment(uint32_t wait_task) {
  STRATA_CHECK(recording_, "CommandList: a segment break outside begin/end");
  Op& op = pending_.emplace_back();
  op.kind = Op::Kind::segment;
  op.value = wait_task;
  segment_wait_.push_back(wait_task);
  segment_transfer_.push_back(kNoTask);
  return static_cast<int>(segment_wait_.size()) - 2;  // the segment just ended
}

int CommandList::transfer(const Buffer& src, uint64_t src_offset, const Buffer& dst,
                          uint64_t dst_offset, uint64_t bytes) {
  STRATA_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size(),
               "CommandList::transfer of {} bytes overflows its buffers", bytes);
  transfer_segment_.push_back(end_segment(kNoTask));
  transfer_awaited_.push_back(false);
  Op& op = add_copy(Op::Kind::transfer, src, src_offset, dst, dst_offset, bytes);
  op.value = static_cast<uint32_t>(transfer_segment_.size() - 1);
  return static_cast<int>(op.value);
}

void CommandList::after_transfer(int transfer) {
  STRATA_CHECK(transfer >= 0 && transfer < static_cast<int>(transfer_segment_.size()),
               "CommandList::after_transfer: no transfer {}", transfer);
  end_segment(kNoTask);
  pending_.back().transfer_wait = static_cast<uint32_t>(transfer);
  segment_transfer_.back() = static_cast<uint32_t>(transfer);
  transfer_awaited_[static_cast<size_t>(transfer)] = true;
}

bool CommandList::transfers_signal() const {
  // Another queue needs the semaphores; on the compute queue its order and barriers would do, but
  // ahead submissions use them anyway (so lavapipe tests the signalling under
  // STRATA_VK_SUBMIT=ahead).
  return device_.has_transfer_queue() || device_.submits_ahead();
}

bool CommandList::fences_segments() const {
  return !device_.submits_ahead() && !device_.has_transfer_queue();
}

VkFence CommandList::segment_fence(size_t segment) const {
  return segment + 1 == segment_wait_.size() ? fence_ : segment_fences_[segment];
}

int CommandList::host_task() {
  task_segment_.push_back(end_segment(kNoTask));
  return static_cast<int>(task_segment_.size()) - 1;
}

int CommandList::after_host(int task) {
  STRATA_CHECK(task >= 0 && task < static_cast<int>(task_segment_.size()),
               "CommandList::after_host: no host task {}", task);
  return end_segment(static_cast<uint32_t>(task));
}

void CommandList::end() {
  STRATA_CHECK(recording_, "CommandList::end without begin");
  for (size_t t = 0; t < transfer_awaited_.size(); ++t)
    STRATA_CHECK(transfer_awaited_[t], "CommandList::end: nothing waits for transfer {}", t);
  recording_ = false;
  // The same work over buffers that all still exist: replay what cmds_ hold.
  if (has_encoding_ && encoded_frees_ == device_.frees_ && encoded_timed_ == device_.timestamps_ &&
      pending_ == encoded_)
    return;
  encoded_timed_ = device_.timestamps_;
  encode();
  encoded_.swap(pending_);
  encoded_frees_ = device_.frees_;
  has_encoding_ = true;
  ++encodings_;
}

void CommandList::encode() {
  const Api& a = api();
  // Command buffers from `pool` until `buffers` holds `count`.
  const auto grow = [&](std::vector<VkCommandBuffer>& buffers, size_t count, VkCommandPool pool) {
    if (buffers.size() >= count) return;
    const size_t have = buffers.size();
    buffers.resize(count);
    VkCommandBufferAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    info.commandPool = pool;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = static_cast<uint32_t>(count - have);
    STRATA_VK(a.vkAllocateCommandBuffers(device_.device_, &info, buffers.data() + have));
  };
  grow(cmds_, segment_wait_.size(), device_.pool_);
  grow(transfer_cmds_, transfer_segment_.size(), device_.transfer_pool_);
  const auto encode_transfer = [&](const Op& op) {
    VkCommandBuffer cmd = transfer_cmds_[op.value];
    STRATA_VK(a.vkResetCommandBuffer(cmd, 0));
    VkCommandBufferBeginInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    STRATA_VK(a.vkBeginCommandBuffer(cmd, &info));
    if (!device_.has_transfer_queue()) {
      // On the compute queue: after what was submitted before (its reads of dst among them);
      // the next segment's first barrier orders its reads after the copy. On another queue the
      // semaphores do both.
      VkMemoryBarrier b{};
      b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      b.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      a.vkCmdPipelineBarrier(cmd,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
    }
    const VkBufferCopy region{op.src_offset, op.dst_offset, op.bytes};
    a.vkCmdCopyBuffer(cmd, op.src, op.dst, 1, &region);
    STRATA_VK(a.vkEndCommandBuffer(cmd));
  };
  const auto queries = static_cast<uint32_t>(2 * segment_wait_.size());
  if (encoded_timed_ && queries > query_capacity_) {
    if (queries_) a.vkDestroyQueryPool(device_.device_, queries_, nullptr);
    VkQueryPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = queries;
    STRATA_VK(a.vkCreateQueryPool(device_.device_, &info, nullptr, &queries_));
    query_capacity_ = queries;
  }
  size_t segment = 0;
  const auto open = [&] {
    VkCommandBuffer cmd = cmds_[segment];
    STRATA_VK(a.vkResetCommandBuffer(cmd, 0));
    VkCommandBufferBeginInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    STRATA_VK(a.vkBeginCommandBuffer(cmd, &info));
    if (encoded_timed_) {
      const auto first = static_cast<uint32_t>(2 * segment);
      a.vkCmdResetQueryPool(cmd, queries_, first, 2);
      a.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, first);
    }
    // The previous segment's writes before any read; after a wait for the host, its writes too
    // (a semaphore signalled by the host carries no memory dependency of its own).
    needs_barrier_ = segment > 0;
    if (segment > 0 && segment_wait_[segment] != kNoTask) {
      VkMemoryBarrier b{};
      b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      b.srcAccessMask =
          VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      a.vkCmdPipelineBarrier(cmd,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                 VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             0, 1, &b, 0, nullptr, 0, nullptr);
      needs_barrier_ = false;
    }
    return cmd;
  };
  const auto close = [&](VkCommandBuffer cmd) {
    barrier(cmd);
    host_barrier(cmd);
    if (encoded_timed_) {
      a.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                            static_cast<uint32_t>(2 * segment + 1));
    }
    STRATA_VK(a.vkEndCommandBuffer(cmd));
  };
  VkCommandBuffer cmd = open();
  for (const Op& op : pending_) {
    if (op.kind == Op::Kind::segment) {
      close(cmd);
      ++segment;
      cmd = open();
      continue;
    }
    if (op.kind == Op::Kind::transfer) {
      encode_transfer(op);
      continue;
    }
    barrier(cmd);
    switch (op.kind) {
      case Op::Kind::dispatch:
        a.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, op.kernel->pipeline);
        if (op.push_bytes) {
          a.vkCmdPushConstants(cmd, op.kernel->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                               op.push_bytes, op.push);
        }
        a.vkCmdDispatch(cmd, op.groups[0], op.groups[1], op.groups[2]);
        break;
      case Op::Kind::copy: {
        const VkBufferCopy region{op.src_offset, op.dst_offset, op.bytes};
        a.vkCmdCopyBuffer(cmd, op.src, op.dst, 1, &region);
        break;
      }
      case Op::Kind::fill:
        a.vkCmdFillBuffer(cmd, op.dst, op.dst_offset, op.bytes, op.value);
        break;
      case Op::Kind::segment:
      case Op::Kind::transfer:
        break;
    }
    needs_barrier_ = true;
  }
  close(cmd);
}

void CommandList::submit() {
  STRATA_CHECK(!recording_, "CommandList::submit before end()");
  gpu_base_ = next_gpu_base_;
  host_base_ = next_host_base_;
  transfer_base_ = next_transfer_base_;
  if (segment_wait_.size() > 1) next_gpu_base_ += segment_wait_.size();  // plain steps signal none
  next_host_base_ += task_segment_.size();
  if (transfers_signal()) next_transfer_base_ += transfer_segment_.size();
  tasks_done_ = 0;
  submitted_ = 0;
  step_done_ = false;
  submit_segments();
}

void CommandList::submit_segments() {
  // Ahead: every segment now, the GPU waiting on the host's semaphore. In order: up to the first
  // segment whose host task is not done yet (the rest follow from task_done).
  const size_t n = segment_wait_.size();
  size_t end = n;
  if (!device_.submits_ahead()) {
    end = submitted_;
    while (end < n &&
           (segment_wait_[end] == kNoTask || static_cast<int>(segment_wait_[end]) < tasks_done_))
      ++end;
  }
  if (end == submitted_) return;
  if (n == 1) {  // one segment, no host tasks: a plain submission
    VkSubmitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    info.commandBufferCount = 1;
    info.pCommandBuffers = &cmds_[0];
    const VkResult r = api().vkQueueSubmit(device_.queue_, 1, &info, fence_);
    if (r != VK_SUCCESS) fail_result("vkQueueSubmit", r);
    submitted_ = 1;
    return;
  }
  if (fences_segments()) {
    submit_fenced(end);
    return;
  }
  create_timelines();
  const bool signal_transfers = transfers_signal();
  const bool same_queue = !device_.has_transfer_queue();
  // Room for every submission of this call: its arrays must not move.
  size_t transfers = 0;
  for (int seg : transfer_segment_)
    transfers += static_cast<size_t>(seg) >= submitted_ && static_cast<size_t>(seg) < end;
  const size_t count = end - submitted_ + transfers;
  std::vector<VkSubmitInfo> infos(count);
  std::vector<VkTimelineSemaphoreSubmitInfo> values(count);
  std::vector<uint64_t> signal(count), wait(2 * count);
  std::vector<VkSemaphore> wait_on(2 * count);
  std::vector<VkPipelineStageFlags> wait_stage(
      2 * count, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
  size_t used = 0, batch = 0;  // infos filled; the first not yet handed to the compute queue
  std::vector<size_t> segment_after(count, 0);  // per info: segments submitted with it
  const auto add = [&](const VkCommandBuffer* cmd, VkSemaphore signals, uint64_t value) {
    const size_t i = used++;
    signal[i] = value;
    VkTimelineSemaphoreSubmitInfo& v = values[i];
    v.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    VkSubmitInfo& info = infos[i];
    info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    info.pNext = &v;
    info.commandBufferCount = 1;
    info.pCommandBuffers = cmd;
    info.pWaitSemaphores = &wait_on[2 * i];
    info.pWaitDstStageMask = &wait_stage[2 * i];
    v.pWaitSemaphoreValues = &wait[2 * i];
    if (signals) {
      v.signalSemaphoreValueCount = 1;
      v.pSignalSemaphoreValues = &signal[i];
      info.signalSemaphoreCount = 1;
      info.pSignalSemaphores = signals == gpu_timeline_ ? &gpu_timeline_ : &transfer_timeline_;
    }
    return i;
  };
  const auto add_wait = [&](size_t i, VkSemaphore semaphore, uint64_t value,
                            VkPipelineStageFlags stage) {
    VkSubmitInfo& info = infos[i];
    const uint32_t k = info.waitSemaphoreCount++;
    wait_on[2 * i + k] = semaphore;
    wait[2 * i + k] = value;
    wait_stage[2 * i + k] = stage;
    values[i].waitSemaphoreValueCount = info.waitSemaphoreCount;
  };
  const auto flush = [&](size_t upto, VkFence fence) {  // infos [batch, upto) to the compute queue
    if (upto == batch && fence == VK_NULL_HANDLE) return;
    const VkResult r = api().vkQueueSubmit(device_.queue_, static_cast<uint32_t>(upto - batch),
                                           upto > batch ? &infos[batch] : nullptr, fence);
    if (r != VK_SUCCESS) fail_result("vkQueueSubmit", r);
    // What went to the queue is never submitted again (abandon_tasks after an error).
    for (size_t i = batch; i < upto; ++i) submitted_ = std::max(submitted_, segment_after[i]);
    batch = upto;
  };
  const VkPipelineStageFlags compute_stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  size_t next_transfer = 0;
  while (next_transfer < transfer_segment_.size() &&
         static_cast<size_t>(transfer_segment_[next_transfer]) < submitted_)
    ++next_transfer;
  for (size_t s = submitted_; s < end; ++s) {
    const size_t i = add(&cmds_[s], gpu_timeline_, gpu_base_ + s + 1);
    segment_after[i] = s + 1;
    // In order, a segment goes to the queue only once its host task is done (and the submission
    // makes the host's writes visible): it needs no semaphore wait, and lavapipe, which runs in
    // order, then never sees one.
    if (segment_wait_[s] != kNoTask && device_.submits_ahead())
      add_wait(i, host_timeline_, host_base_ + segment_wait_[s] + 1, compute_stages);
    if (segment_transfer_[s] != kNoTask && signal_transfers)
      add_wait(i, transfer_timeline_, transfer_base_ + segment_transfer_[s] + 1, compute_stages);
    // The transfers that start after this segment.
    for (; next_transfer < transfer_segment_.size() &&
           static_cast<size_t>(transfer_segment_[next_transfer]) == s;
         ++next_transfer) {
      const size_t t = next_transfer;
      const size_t j =
          add(&transfer_cmds_[t], signal_transfers ? transfer_timeline_ : VK_NULL_HANDLE,
              transfer_base_ + t + 1);
      if (signal_transfers)
        add_wait(j, gpu_timeline_, gpu_base_ + s + 1, VK_PIPELINE_STAGE_TRANSFER_BIT);
      if (same_queue) continue;  // in the compute queue's batch, in order
      flush(j, VK_NULL_HANDLE);  // what it waits for is submitted first
      const VkResult r = api().vkQueueSubmit(device_.transfer_queue_, 1, &infos[j], VK_NULL_HANDLE);
      if (r != VK_SUCCESS) fail_result("vkQueueSubmit (transfer queue)", r);
      batch = used;
    }
  }
  flush(used, end == n ? fence_ : VK_NULL_HANDLE);
  submitted_ = end;
}

void CommandList::submit_fenced(size_t end) {
  const Api& a = api();
  const size_t n = segment_wait_.size();
  while (segment_fences_.size() + 1 < n) segment_fences_.push_back(create_fence());
  // One submission per command buffer (a fence per submission): the queue's order does the rest,
  // the transfers after the segment they follow.
  const auto submit_one = [&](const VkCommandBuffer* cmd, VkFence fence, const char* what) {
    VkSubmitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    info.commandBufferCount = 1;
    info.pCommandBuffers = cmd;
    const VkResult r = a.vkQueueSubmit(device_.queue_, 1, &info, fence);
    if (r != VK_SUCCESS) fail_result(what, r);
  };
  size_t t = 0;
  while (t < transfer_segment_.size() && static_cast<size_t>(transfer_segment_[t]) < submitted_)
    ++t;
  for (size_t s = submitted_; s < end; ++s) {
    submit_one(&cmds_[s], segment_fence(s), "vkQueueSubmit");
    submitted_ = s + 1;  // never submitted again (abandon_tasks after an error)
    for (; t < transfer_segment_.size() && static_cast<size_t>(transfer_segment_[t]) == s; ++t)
      submit_one(&transfer_cmds_[t], VK_NULL_HANDLE, "vkQueueSubmit (transfer)");
  }
}

void CommandList::wait_semaphore(VkSemaphore semaphore, uint64_t value, const char* what) {
  if (!device_.submits_ahead()) {
    // lavapipe (Mesa 22.3): vkWaitSemaphores on a timeline its queue thread is signalling
    // deadlocks now and then; polling the counter does not.
    for (;;) {
      uint64_t now = 0;
      const VkResult r = api().vkGetSemaphoreCounterValue(device_.device_, semaphore, &now);
      if (r != VK_SUCCESS) fail_result(what, r);
      if (now >= value) return;
      std::this_thread::yield();
    }
  }
  VkSemaphoreWaitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  info.semaphoreCount = 1;
  info.pSemaphores = &semaphore;
  info.pValues = &value;
  const VkResult r = api().vkWaitSemaphores(device_.device_, &info, UINT64_MAX);
  if (r != VK_SUCCESS) fail_result(what, r);
}

void CommandList::wait_for_gpu(int task) {
  STRATA_CHECK(task >= 0 && task < static_cast<int>(task_segment_.size()),
               "CommandList::wait_for_gpu: no host task {}", task);
  if (fences_segments()) {
    const auto segment = static_cast<size_t>(task_segment_[task]);
    STRATA_CHECK(segment < submitted_, "CommandList::wait_for_gpu: segment {} not submitted",
                 segment);
    const VkFence f = segment_fence(segment);
    const VkResult r = api().vkWaitForFences(device_.device_, 1, &f, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) fail_result("vkWaitForFences", r);
    return;
  }
  wait_semaphore(gpu_timeline_, gpu_base_ + static_cast<uint64_t>(task_segment_[task]) + 1,
                 "vkWaitSemaphores");
}

void CommandList::task_done(int task) {
  STRATA_CHECK(task == tasks_done_, "CommandList::task_done: task {} before task {}", task,
               tasks_done_);
  if (device_.submits_ahead()) {  // the GPU is waiting on the host's semaphore
    VkSemaphoreSignalInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO;
    info.semaphore = host_timeline_;
    info.value = host_base_ + static_cast<uint64_t>(task) + 1;
    if (const VkResult r = api().vkSignalSemaphore(device_.device_, &info); r != VK_SUCCESS)
      fail_result("vkSignalSemaphore", r);
  }
  ++tasks_done_;
  submit_segments();
}

void CommandList::abandon_tasks() {
  while (tasks_done_ < static_cast<int>(task_segment_.size())) task_done(tasks_done_);
}

bool CommandList::segment_finished(int segment) {
  if (step_done_) return true;
  if (fences_segments()) {
    if (static_cast<size_t>(segment) >= submitted_) return false;
    const VkResult r = api().vkGetFenceStatus(device_.device_, segment_fence(segment));
    if (r != VK_SUCCESS && r != VK_NOT_READY) fail_result("vkGetFenceStatus", r);
    return r == VK_SUCCESS;
  }
  if (!gpu_timeline_) return true;  // nothing submitted with segments yet
  uint64_t value = 0;
  if (const VkResult r = api().vkGetSemaphoreCounterValue(device_.device_, gpu_timeline_, &value);
      r != VK_SUCCESS)
    fail_result("vkGetSemaphoreCounterValue", r);
  return value >= gpu_base_ + static_cast<uint64_t>(segment) + 1;
}

bool Device::injected_loss() {
  const long left = steps_before_loss_.load(std::memory_order_relaxed);
  if (left < 0) return false;
  if (left == 0) return true;  // lost, and stays lost
  steps_before_loss_.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

std::vector<CommandList::SegmentTime> CommandList::segment_times() {
  std::vector<SegmentTime> out;
  if (!encoded_timed_ || !queries_) return out;
  const auto n = static_cast<uint32_t>(segment_wait_.size());
  std::vector<uint64_t> ticks(2 * n);
  const VkResult r = api().vkGetQueryPoolResults(
      device_.device_, queries_, 0, 2 * n, ticks.size() * sizeof(uint64_t), ticks.data(),
      sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) fail_result("vkGetQueryPoolResults", r);
  const double ms_per_tick = device_.info().timestamp_period_ns / 1e6;
  const uint32_t bits = device_.timestamp_bits_;
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const auto since_start = [&](uint64_t t) {  // counters narrower than 64 bits wrap
    return static_cast<double>((t - ticks[0]) & mask) * ms_per_tick;
  };
  for (uint32_t s = 0; s < n; ++s)
    out.push_back({since_start(ticks[2 * s]), since_start(ticks[2 * s + 1])});
  return out;
}

void CommandList::wait() {
  STRATA_CHECK(submitted_ == segment_wait_.size(),
               "CommandList::wait with {} of {} host tasks done (finish or abandon them first)",
               tasks_done_, task_segment_.size());
  const Api& a = api();
  VkResult r = a.vkWaitForFences(device_.device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (r == VK_SUCCESS && model_step_ && device_.injected_loss()) r = VK_ERROR_DEVICE_LOST;
  if (r != VK_SUCCESS) fail_result("vkWaitForFences", r);
  STRATA_VK(a.vkResetFences(device_.device_, 1, &fence_));
  if (fences_segments() && segment_wait_.size() > 1) {  // the others, done before the last one
    const auto count = static_cast<uint32_t>(segment_wait_.size() - 1);
    r = a.vkWaitForFences(device_.device_, count, segment_fences_.data(), VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) fail_result("vkWaitForFences", r);
    STRATA_VK(a.vkResetFences(device_.device_, count, segment_fences_.data()));
  }
  step_done_ = true;
}

}  // namespace strata::vk
