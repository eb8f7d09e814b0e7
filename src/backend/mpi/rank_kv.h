#pragma once
// Keys and values of one rank's layers (a rank other than 0). Rank 0's caches keep deciding which
// storage slot each position uses (pages, sharing, reuse); this rank holds the contents of those
// slots for its own layers, one store per rank-0 cache (named by that cache's storage address),
// grown as the slots named reach further, in the same row layout (F16 or Q8_0 per slot and head).

#include <cstdint>
#include <map>
#include <vector>

#include "backend/mpi/step_message.h"
#include "ops/attention.h"

namespace strata::mpi {

class RankKvStores {
 public:
  // layers_with_kv: [n_layer] the layers whose keys and values this rank keeps.
  RankKvStores(std::vector<bool> layers_with_kv, int64_t n_kv_heads, int64_t head_dim);

  // Views of every layer (n_layer) for the cache `kv` describes, made to hold the slots its page
  // table names (or, without pages, positions up to max_position). Layers this rank does not keep
  // get views without storage. Valid until the next call, while `kv` lives.
  const std::vector<ops::KvLayerView>& views(const KvDescription& kv, int64_t max_position);
  // Copies n slots from `from` to `to` in every layer of store `key` (nothing without one).
  void copy_slots(uint64_t key, int64_t from, int64_t to, int64_t n);
  uint64_t bytes() const;

 private:
  struct Store {
    GgmlType type = GgmlType::F16;
    int64_t row_bytes = 0;  // one slot of one head
    int64_t slots = 0;
    std::vector<std::vector<uint8_t>> k, v;  // [n_layer], empty for layers kept elsewhere
  };
  void grow(Store& store, int64_t slots) const;

  std::vector<bool> layers_with_kv_;
  int64_t n_kv_heads_, head_dim_;
  std::map<uint64_t, Store> stores_;
  std::vector<ops::KvLayerView> views_;
};

}  // namespace strata::mpi
