#include "backend/vulkan/device_weights.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

namespace strata::vk {
namespace {

constexpr uint64_t kAlign = 256;
constexpr uint64_t kChunkBytes = 512ull << 20;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

uint64_t aligned_bytes(uint64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

DeviceWeights::DeviceWeights(Device& device, uint64_t total_bytes)
    : device_(device), total_(total_bytes), start_(now_seconds()), tty_(isatty(2) != 0) {
  // Fail before uploading anything when the weights alone cannot fit.
  if (const uint64_t budget = device.memory_budget(); budget && total_bytes > budget) {
    fail(
        "the weights need {} on {} but only {} of its memory is {} (use a smaller "
        "quantization, or run with --device none)",
        format_bytes(total_bytes), device.label(), format_bytes(budget),
        budget == device.info().device_local_budget ? "free" : "in the --vram-budget");
  }
}

DeviceWeights::~DeviceWeights() = default;

std::pair<const Buffer*, uint64_t> DeviceWeights::reserve(uint64_t bytes, const std::string& name) {
  const uint64_t size = aligned_bytes(bytes);
  const uint64_t limit =
      device_.info().max_allocation_bytes ? device_.info().max_allocation_bytes : kChunkBytes;
  if (chunks_.empty() || chunk_used_ + size > chunks_.back().size()) {
    // Chunks of up to 512 MiB, the last one no bigger than what is left to place.
    const uint64_t left = total_ > chunked_ ? total_ - chunked_ : 0;
    const uint64_t chunk = std::max(size, std::min({kChunkBytes, limit, left}));
    chunked_ += chunk;
    chunks_.push_back(device_.allocate(chunk, MemoryKind::device,
                                       fmt::format("the weights (at tensor {})", name)));
    chunk_used_ = 0;
  }
  const uint64_t offset = chunk_used_;
  chunk_used_ += size;
  return {&chunks_.back(), offset};
}

void DeviceWeights::uploaded(uint64_t bytes) {
  used_ += bytes;
  report(used_ >= total_ && !reported_final_);
}

uint64_t DeviceWeights::place(const void* data, uint64_t bytes, const std::string& name) {
  const auto [buffer, offset] = reserve(bytes, name);
  device_.upload(*buffer, offset, data, bytes);
  uploaded(bytes);
  return buffer->address() + offset;
}

void DeviceWeights::report(bool final) {
  const double t = now_seconds();
  if (!final && t - last_report_ < 0.5) return;
  last_report_ = t;
  reported_final_ = reported_final_ || final;
  const double gb = static_cast<double>(used_) / 1e9;
  const double rate = gb / std::max(t - start_, 1e-6);
  if (tty_) {
    std::fprintf(stderr, "\ruploading weights to %s: %.2f / %.2f GB (%.1f GB/s)%s",
                 device_.label().c_str(), gb, static_cast<double>(total_) / 1e9, rate,
                 final ? "\n" : "");
  } else if (final) {
    log::info("uploaded {:.2f} GB of weights to {} ({:.1f} GB/s)", gb, device_.label(), rate);
  }
}

const Buffer* DeviceWeights::pinned(uint64_t bytes, const std::string& what) {
  if (pinning_refused_) return nullptr;
  const auto refuse = [&](const std::string& why) {
    log::warn(
        "{}; RAM experts stay in the model file's pages from here on, and prompt batches "
        "compute them on the CPU",
        why);
    pinning_refused_ = true;
    return nullptr;
  };
  // CPU reads of uncached (write-combined) memory are many times slower than of RAM.
  if (!device_.host_memory_cached()) {
    return refuse(
        fmt::format("{} has no cached host-visible memory for RAM experts", device_.label()));
  }
  if (const uint64_t limit = device_.info().max_allocation_bytes; limit && bytes > limit) {
    log::warn(
        "{} needs one allocation of {}, above the device's limit of {}: this layer's RAM "
        "experts stay in the model file's pages (its prompt batches on the CPU)",
        what, format_bytes(bytes), format_bytes(limit));
    return nullptr;
  }
  if (pinned_.empty()) {
    log::info(
        "RAM experts go to host-visible memory of {} (STRATA_PINNED_EXPERTS=off keeps "
        "them in the model file's pages)",
        device_.label());
  }
  try {
    pinned_.push_back(std::make_unique<Buffer>(device_.allocate(bytes, MemoryKind::host, what)));
  } catch (const Error& e) {
    return refuse(e.what());
  }
  pinned_bytes_ += bytes;
  return pinned_.back().get();
}

GpuMatrix DeviceWeights::matrix(const ops::WeightMatrix& w, const std::string& name) {
  GpuMatrix m{w.type, 0, w.rows, w.cols, w.row_bytes};
  check_gpu_matrix(m, name.c_str());
  m.address = place(w.data, static_cast<uint64_t>(w.bytes()), name);
  return m;
}

uint64_t DeviceWeights::floats(const float* data, int64_t n, const std::string& name) {
  if (!data) return 0;
  return place(data, static_cast<uint64_t>(n) * 4, name);
}

uint64_t DeviceWeights::ints(const int32_t* data, int64_t n, const std::string& name) {
  return place(data, static_cast<uint64_t>(n) * 4, name);
}

GpuMatrix DeviceWeights::experts(const ops::WeightMatrix& stack, int64_t rows,
                                 std::span<const int32_t> experts, const std::string& name) {
  GpuMatrix m{stack.type, 0, rows, stack.cols, stack.row_bytes};
  check_gpu_matrix(m, name.c_str());
  const auto slice = static_cast<uint64_t>(rows * stack.row_bytes);
  const uint64_t bytes = slice * experts.size();
  STRATA_CHECK(!experts.empty(), "{}: no experts to upload", name);
  const auto [buffer, offset] = reserve(bytes, name);
  for (size_t i = 0; i < experts.size(); ++i) {
    STRATA_CHECK(experts[i] >= 0 && (experts[i] + 1) * rows <= stack.rows,
                 "{}: expert {} is outside the stack of {} rows", name, experts[i], stack.rows);
    device_.upload(
        *buffer, offset + i * slice,
        static_cast<const uint8_t*>(stack.data) + static_cast<uint64_t>(experts[i]) * slice, slice);
  }
  uploaded(bytes);
  m.address = buffer->address() + offset;
  return m;
}

}  // namespace strata::vk
