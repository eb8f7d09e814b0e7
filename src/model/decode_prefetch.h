#pragma once
// Decides, on a loaded file's weights, whether decode GEMVs use software prefetch on this machine
// (ops/gemv_prefetch.h), and says so in the log.

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

}  // namespace strata
