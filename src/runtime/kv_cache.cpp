#include "runtime/kv_cache.h"

#include "quant/quant.h"
#include "util/error.h"

namespace strata {

GgmlType KvCache::parse_type(const std::string& name) {
  if (name == "f16" || name == "F16") return GgmlType::F16;
  if (name == "q8_0" || name == "Q8_0") return GgmlType::Q8_0;
  fail("KV cache type '{}' is not supported (expected f16 or q8_0)", name);
}

KvCache::KvCache(const ModelHParams& hp, int64_t n_ctx, GgmlType type)
    : n_ctx_(n_ctx), type_(type) {
  STRATA_CHECK(n_ctx > 0, "context size must be positive, got {}", n_ctx);
  STRATA_CHECK(type == GgmlType::F16 || type == GgmlType::Q8_0,
               "KV cache type {} is not supported (expected F16 or Q8_0)", ggml_type_name(type));
  const int64_t block = quant::traits(type).block_elems;
  STRATA_CHECK(hp.head_dim % block == 0, "head size {} is not a multiple of the {} block size {}",
               hp.head_dim, ggml_type_name(type), block);
  const int64_t row = quant::row_bytes(type, hp.head_dim);
  const int64_t per_layer = n_ctx * hp.n_head_kv * row;  // keys or values of one layer
  storage_.resize(static_cast<size_t>(2 * per_layer * hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    uint8_t* base = storage_.data() + 2 * per_layer * il;
    ops::KvLayerView view{type, base, base + per_layer, hp.n_head_kv, hp.head_dim, row};
    view.capacity = n_ctx;
    views_.push_back(view);
  }
}

int64_t KvCache::bytes_per_position() const {
  return n_ctx_ ? bytes() / n_ctx_ : 0;
}

}  // namespace strata
