#include "model/decode_prefetch.h"

#include "quant/quant.h"
#include "util/format_bytes.h"
#include "util/log.h"

namespace strata {
namespace {

// A tensor a GEMV can run on (a weight type, whole blocks per row) that this process reads.
bool is_held_weight_matrix(const GgufTensorInfo& t,
                           const std::function<bool(const GgufTensorInfo&)>& held) {
  if (t.shape.size() < 2 || !quant::is_supported(t.type) || (held && !held(t))) return false;
  const quant::TypeTraits& traits = quant::traits(t.type);
  return traits.kernels.vec_dot && t.row_length() % traits.block_elems == 0;
}

// The largest such tensor, or nullptr.
const GgufTensorInfo* largest_weight_matrix(
    const GgufFile& file, const std::function<bool(const GgufTensorInfo&)>& held) {
  const GgufTensorInfo* largest = nullptr;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!is_held_weight_matrix(t, held)) continue;
    if (!largest || t.bytes > largest->bytes) largest = &t;
  }
  return largest;
}

}  // namespace

int64_t weight_matrix_bytes(const GgufFile& file,
                            const std::function<bool(const GgufTensorInfo&)>& held) {
  int64_t bytes = 0;
  for (const GgufTensorInfo& t : file.tensors())
    if (is_held_weight_matrix(t, held)) bytes += static_cast<int64_t>(t.bytes);
  return bytes;
}

ops::GemvPrefetchResult tune_decode_prefetch(
    const GgufFile& file, const ops::GemvPrefetchOptions& options,
    const std::function<bool(const GgufTensorInfo&)>& held) {
  const GgufTensorInfo* t = largest_weight_matrix(file, held);
  if (!t) return {};
  const int64_t cols = t->row_length();
  const ops::WeightMatrix w{t->type, t->data.data(), cols, t->rows(),
                            quant::row_bytes(t->type, cols)};
  const ops::GemvPrefetchResult r = ops::tune_gemv_prefetch(w, options);
  if (!r.measured) {
    log::debug(
        "decode GEMVs: software prefetch off (the largest matrix, {}, is too small to "
        "measure)",
        t->name);
    return r;
  }
  log::info(
      "decode GEMVs: software prefetch {} (measured on {} of {}: {:.1f} ms with it, {:.1f} ms "
      "without)",
      r.prefetch ? "on" : "off", format_bytes(static_cast<uint64_t>(r.bytes)), t->name,
      r.best_with_ms, r.best_without_ms);
  return r;
}

}  // namespace strata
