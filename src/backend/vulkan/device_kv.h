#pragma once
// Keys and values on the device. The runtime's caches (runtime/kv_cache, runtime/kv_pool) keep
// deciding which storage slot each position of each sequence uses (pages, sharing, reuse); the
// device holds the contents of those slots, one store per host cache (identified by its storage
// address), grown as slots are used, in the same layout (F16 or Q8_0 rows per slot and head).

#include <cstdint>
#include <map>
#include <vector>

#include "backend/vulkan/device.h"
#include "gguf/ggml_type.h"

namespace strata::vk {

class DeviceKv {
 public:
  struct Layer {
    uint64_t k = 0, v = 0;  // device addresses (0 for layers without KV)
  };

  // n_kv_layers: layers that keep keys and values (their index among those is `slot`).
  DeviceKv(Device& device, int64_t n_kv_heads, int64_t head_dim, std::vector<bool> layers_with_kv);

  // The store of host cache `key`, with room for slots [0, n_slots) (at most max_slots),
  // grown (contents kept) when needed.
  const std::vector<Layer>& ensure(const void* key, GgmlType type, int64_t n_slots,
                                   int64_t max_slots);
  // Copies n slots from `from` to `to` in every layer of store `key` (a page the host copied).
  void copy_slots(const void* key, int64_t from, int64_t to, int64_t n);
  // Forgets every store (their slots hold nothing anyone will read again).
  void clear() { stores_.clear(); }
  uint64_t bytes() const;

 private:
  struct Store {
    GgmlType type = GgmlType::F16;
    int64_t slots = 0;
    std::vector<Buffer> k, v;   // [layers with KV]
    std::vector<Layer> layers;  // [n_layer]
  };
  Device& device_;
  int64_t n_kv_heads_, head_dim_;
  std::vector<bool> layers_with_kv_;
  std::map<const void*, Store> stores_;
};

}  // namespace strata::vk
