#pragma once
// Decides, on a loaded file's weights, how CPU products run on this machine: whether decode GEMVs
// use software prefetch (ops/gemv_prefetch.h, said in the log), and from how many tokens the tile
// GEMM pays (ops::tile_min_tokens).

#include <functional>

#include "gguf/gguf_file.h"
#include "ops/gemv_prefetch.h"

namespace strata {

// Measures on the file's largest weight matrix (what decode streams the most of); the caller
// applies result.prefetch (Model::set_matmul_settings). Logs at debug level, and says prefetch
// stays off, when the file is too small to tell RAM from cache.
// held: the tensors this process reads (a rank of a distributed run: its own layers' only, so the
// measurement reads nothing it would not); null: all.
ops::GemvPrefetchResult tune_decode_prefetch(
    const GgufFile& file, const ops::GemvPrefetchOptions& options = {},
    const std::function<bool(const GgufTensorInfo&)>& held = nullptr);

// Bytes of the weight matrices CPU products can run on (held: as above): what a step streams at
// most, for ops::tile_min_tokens.
int64_t weight_matrix_bytes(const GgufFile& file,
                            const std::function<bool(const GgufTensorInfo&)>& held = nullptr);

}  // namespace strata
