#include "backend/vulkan/device_kv.h"

#include <algorithm>

#include "backend/vulkan/gpu_ops.h"
#include "util/error.h"

namespace strata::vk {

DeviceKv::DeviceKv(Device& device, int64_t n_kv_heads, int64_t head_dim,
                   std::vector<bool> layers_with_kv)
    : device_(device),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      layers_with_kv_(std::move(layers_with_kv)) {}

const std::vector<DeviceKv::Layer>& DeviceKv::ensure(const void* key, GgmlType type,
                                                     int64_t n_slots, int64_t max_slots) {
  Store& s = stores_[key];
  if (!s.layers.empty() && s.type != type) s = Store{};  // a new cache at a reused address
  if (!s.layers.empty() && n_slots <= s.slots) return s.layers;
  const int64_t target =
      std::min(std::max({n_slots, 2 * s.slots, int64_t{256}}), std::max(max_slots, n_slots));
  const uint64_t row = static_cast<uint64_t>(kv_row_bytes(type, head_dim_) * n_kv_heads_);
  Store grown;
  grown.type = type;
  grown.slots = target;
  grown.layers.resize(layers_with_kv_.size());
  size_t stored = 0;
  CommandList copy(device_);
  copy.begin();
  for (size_t il = 0; il < layers_with_kv_.size(); ++il) {
    if (!layers_with_kv_[il]) continue;
    const std::string what = fmt::format("the KV cache ({} positions, layer {})", target, il);
    grown.k.push_back(
        device_.allocate(row * static_cast<uint64_t>(target), MemoryKind::device, what));
    grown.v.push_back(
        device_.allocate(row * static_cast<uint64_t>(target), MemoryKind::device, what));
    if (stored < s.k.size()) {
      copy.copy(s.k[stored], 0, grown.k.back(), 0, row * static_cast<uint64_t>(s.slots));
      copy.copy(s.v[stored], 0, grown.v.back(), 0, row * static_cast<uint64_t>(s.slots));
    }
    grown.layers[il] = {grown.k.back().address(), grown.v.back().address()};
    ++stored;
  }
  copy.end();
  copy.submit_and_wait();
  s = std::move(grown);
  return s.layers;
}

void DeviceKv::copy_slots(const void* key, int64_t from, int64_t to, int64_t n) {
  auto it = stores_.find(key);
  if (it == stores_.end() || n <= 0) return;
  // A page the host just handed out can lie past what the device store holds so far.
  const int64_t need = std::max(from, to) + n;
  if (need > it->second.slots) ensure(key, it->second.type, need, 2 * need);
  Store& s = it->second;
  const uint64_t row = static_cast<uint64_t>(kv_row_bytes(s.type, head_dim_) * n_kv_heads_);
  CommandList cmd(device_);
  cmd.begin();
  for (size_t i = 0; i < s.k.size(); ++i) {
    cmd.copy(s.k[i], row * static_cast<uint64_t>(from), s.k[i], row * static_cast<uint64_t>(to),
             row * static_cast<uint64_t>(n));
    cmd.copy(s.v[i], row * static_cast<uint64_t>(from), s.v[i], row * static_cast<uint64_t>(to),
             row * static_cast<uint64_t>(n));
  }
  cmd.end();
  cmd.submit_and_wait();
}

uint64_t DeviceKv::bytes() const {
  uint64_t total = 0;
  for (const auto& [key, s] : stores_)
    for (size_t i = 0; i < s.k.size(); ++i) total += s.k[i].size() + s.v[i].size();
  return total;
}

}  // namespace strata::vk
