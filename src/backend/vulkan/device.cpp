#include "backend/vulkan/device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

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
  fail("Vulkan: {} failed: {}", what, result_name(r));
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

Device::Device(const DeviceInfo& info) : info_(info) {
  STRATA_CHECK(info.usable(), "vk{} ({}) lacks what strata's kernels need: {}", info.index,
               info.name, fmt::join(info.missing, ", "));
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

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;

  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.bufferDeviceAddress = VK_TRUE;
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
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue_info;
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
  if (pool_) a.vkDestroyCommandPool(device_, pool_, nullptr);
  if (device_) a.vkDestroyDevice(device_, nullptr);
}

std::string Device::label() const {
  return fmt::format("vk{} ({})", info_.index, info_.name);
}

uint32_t Device::memory_type(uint32_t type_bits, MemoryKind kind) const {
  const VkMemoryPropertyFlags want =
      kind == MemoryKind::device
          ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
          : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags nice =
      kind == MemoryKind::host ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0;
  int best = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if ((f & nice) == nice) return i;
    if (best < 0) best = static_cast<int>(i);
  }
  if (best < 0 && kind == MemoryKind::device) return memory_type(type_bits, MemoryKind::host);
  STRATA_CHECK(best >= 0, "{}: no memory type for {} buffers", label(),
               kind == MemoryKind::device ? "device" : "host-visible");
  return static_cast<uint32_t>(best);
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
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
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
  allocated_ -= std::min(allocated_, b.size_);
  if (!b.mapped_) allocated_device_ -= std::min(allocated_device_, b.size_);
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

CommandList::CommandList(Device& device) : device_(device) {
  const Api& a = api();
  VkCommandBufferAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  info.commandPool = device.pool_;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  STRATA_VK(a.vkAllocateCommandBuffers(device.device_, &info, &cmd_));
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  STRATA_VK(a.vkCreateFence(device.device_, &fence, nullptr, &fence_));
}

CommandList::~CommandList() {
  const Api& a = api();
  a.vkDestroyFence(device_.device_, fence_, nullptr);
  a.vkFreeCommandBuffers(device_.device_, device_.pool_, 1, &cmd_);
}

bool CommandList::Op::operator==(const Op& o) const {
  return kind == o.kind && kernel == o.kernel && push_bytes == o.push_bytes &&
         std::memcmp(groups, o.groups, sizeof groups) == 0 &&
         std::memcmp(push, o.push, push_bytes) == 0 && src == o.src && dst == o.dst &&
         src_offset == o.src_offset && dst_offset == o.dst_offset && bytes == o.bytes &&
         value == o.value;
}

void CommandList::begin() {
  pending_.clear();
  recording_ = true;
  dispatches_ = 0;
}

void CommandList::barrier() {
  if (!needs_barrier_) return;
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api().vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &b, 0, nullptr, 0, nullptr);
  needs_barrier_ = false;
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
  Op& op = pending_.emplace_back();
  op.kind = Op::Kind::copy;
  op.src = src.handle();
  op.dst = dst.handle();
  op.src_offset = src_offset;
  op.dst_offset = dst_offset;
  op.bytes = bytes;
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

void CommandList::end() {
  STRATA_CHECK(recording_, "CommandList::end without begin");
  recording_ = false;
  // The same work over buffers that all still exist: replay what cmd_ holds.
  if (has_encoding_ && encoded_frees_ == device_.frees_ && pending_ == encoded_) return;
  encode();
  encoded_.swap(pending_);
  encoded_frees_ = device_.frees_;
  has_encoding_ = true;
  ++encodings_;
}

void CommandList::encode() {
  const Api& a = api();
  STRATA_VK(a.vkResetCommandBuffer(cmd_, 0));
  VkCommandBufferBeginInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  STRATA_VK(a.vkBeginCommandBuffer(cmd_, &info));
  needs_barrier_ = false;
  for (const Op& op : pending_) {
    barrier();
    switch (op.kind) {
      case Op::Kind::dispatch:
        a.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, op.kernel->pipeline);
        if (op.push_bytes) {
          a.vkCmdPushConstants(cmd_, op.kernel->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                               op.push_bytes, op.push);
        }
        a.vkCmdDispatch(cmd_, op.groups[0], op.groups[1], op.groups[2]);
        break;
      case Op::Kind::copy: {
        const VkBufferCopy region{op.src_offset, op.dst_offset, op.bytes};
        a.vkCmdCopyBuffer(cmd_, op.src, op.dst, 1, &region);
        break;
      }
      case Op::Kind::fill:
        a.vkCmdFillBuffer(cmd_, op.dst, op.dst_offset, op.bytes, op.value);
        break;
    }
    needs_barrier_ = true;
  }
  barrier();
  // Make the last writes visible to the host (results read through mapped memory).
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  a.vkCmdPipelineBarrier(cmd_,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
  STRATA_VK(a.vkEndCommandBuffer(cmd_));
}

void CommandList::submit() {
  STRATA_CHECK(!recording_, "CommandList::submit before end()");
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &cmd_;
  const VkResult r = api().vkQueueSubmit(device_.queue_, 1, &info, fence_);
  if (r != VK_SUCCESS) fail_result("vkQueueSubmit", r);
}

// STRATA_VK_LOSE_DEVICE_AFTER=N (tests only): the N+1-th wait for a model step reports the
// device lost, as a driver does after a GPU fault, so the recovery paths run on any machine.
static bool injected_device_loss() {
  static const long limit = [] {
    const char* v = std::getenv("STRATA_VK_LOSE_DEVICE_AFTER");
    return v && *v ? std::strtol(v, nullptr, 10) : -1L;
  }();
  static std::atomic<long> waits{0};
  return limit >= 0 && waits.fetch_add(1) >= limit;
}

void CommandList::wait() {
  const Api& a = api();
  VkResult r = a.vkWaitForFences(device_.device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (r == VK_SUCCESS && model_step_ && injected_device_loss()) r = VK_ERROR_DEVICE_LOST;
  if (r != VK_SUCCESS) fail_result("vkWaitForFences", r);
  STRATA_VK(a.vkResetFences(device_.device_, 1, &fence_));
}

}  // namespace strata::vk
