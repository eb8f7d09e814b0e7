#pragma once
// Key/value cache of one sequence: for every layer, n_ctx positions of n_head_kv vectors of
// head_dim values, stored as F16 (default) or Q8_0 (half the bytes, small accuracy cost).

#include <cstdint>
#include <memory>
#include <vector>

#include "model/hparams.h"
#include "model/model.h"
#include "ops/attention.h"

namespace strata {

class KvCache {
 public:
  // layers_with_kv: which layers keep keys and values (Model::kv_layers()); the others (the
  // recurrent layers of hybrid models) get views without storage. Empty: every layer.
  KvCache(const ModelHParams& hp, int64_t n_ctx, GgmlType type,
          const std::vector<bool>& layers_with_kv = {});

  SequenceKv layers() const { return views_; }
  int64_t capacity() const { return n_ctx_; }
  GgmlType type() const { return type_; }
  int64_t bytes() const { return bytes_; }
  // Bytes the cache holds per position (all layers, keys and values).
  int64_t bytes_per_position() const;

  // Parses "f16" / "q8_0" (as given to --kv-type).
  static GgmlType parse_type(const std::string& name);

 private:
  int64_t n_ctx_;
  GgmlType type_;
  // Left uninitialized, as in KvPool: the OS commits memory only where a forward writes, and a
  // model that keeps its keys and values on a GPU never writes here.
  std::unique_ptr<uint8_t[]> storage_;
  int64_t bytes_ = 0;
  std::vector<ops::KvLayerView> views_;
};

}  // namespace strata
