#include "runtime/kv_cache.h"

#include "quant/quant.h"
#include "util/error.h"

namespace strata {

GgmlType KvCache::parse_type(const std::string& name) {
  if (name == "f16" || name == "F16") return GgmlType::F16;
  if (name == "q8_0" || name == "Q8_0") return GgmlType::Q8_0;
  fail("KV cache type '{}' is not supported: strata keeps keys and values in f16 or q8_0 "
       "(q8_0 halves the cache)",
       name);
}

KvCache::KvCache(const ModelHParams& hp, int64_t n_ctx, GgmlType type,
                 const std::vector<bool>& layers_with_kv)
    : n_ctx_(n_ctx), type_(type) {
  STRATA_CHECK(n_ctx > 0, "context size must be positive, got {}", n_ctx);
  STRATA_CHECK(type == GgmlType::F16 || type == GgmlType::Q8_0,
               "KV cache type {} is not supported (expected F16 or Q8_0)", ggml_type_name(type));
  const int64_t block = quant::traits(type).block_elems;
  STRATA_CHECK(hp.head_dim % block == 0, "head size {} is not a multiple of the {} block size {}",
               hp.head_dim, ggml_type_name(type), block);
  const int64_t row = quant::row_bytes(type, hp.head_dim);
  const int64_t per_layer = n_ctx * hp.n_head_kv * row;  // keys or values of one layer
  STRATA_CHECK(layers_with_kv.empty() || static_cast<int64_t>(layers_with_kv.size()) == hp.n_layer,
               "{} KV-layer flags for {} layers", layers_with_kv.size(), hp.n_layer);
  auto has_kv = [&](int64_t il) {
    return layers_with_kv.empty() || layers_with_kv[static_cast<size_t>(il)];
  };
  int64_t stored = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) stored += has_kv(il) ? 1 : 0;
  bytes_ = 2 * per_layer * stored;
  storage_.reset(new uint8_t[static_cast<size_t>(bytes_)]);
  int64_t slot = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    uint8_t* base = has_kv(il) ? storage_.get() + 2 * per_layer * slot++ : nullptr;
    ops::KvLayerView view{type,         base,        base ? base + per_layer : nullptr,
                          hp.n_head_kv, hp.head_dim, row};
    view.capacity = n_ctx;
    views_.push_back(view);
  }
}

int64_t KvCache::bytes_per_position() const {
  return n_ctx_ ? bytes() / n_ctx_ : 0;
}

}  // namespace strata
