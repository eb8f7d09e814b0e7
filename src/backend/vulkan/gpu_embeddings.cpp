#include "backend/vulkan/gpu_embeddings.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/decoder.h"

namespace strata::vk {

void GpuEmbeddings::record(GpuOps& ops, std::span<const int32_t> tokens, uint64_t token_ids,
                           const Buffer& x) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (!in_ram()) {
    ops.get_rows(on_device_, token_ids, n, x.address());
    return;
  }
  if (n > tokens_) {
    tokens_ = std::max(n, 2 * tokens_);
    rows_ = device_.allocate(static_cast<uint64_t>(tokens_ * table_.cols) * 4, MemoryKind::host,
                             fmt::format("token embeddings for {} tokens", tokens_));
  }
  embed_tokens(table_, tokens, static_cast<float*>(rows_.mapped()));
  ops.cmd.copy(rows_, 0, x, 0, static_cast<uint64_t>(n * table_.cols) * 4);
}

}  // namespace strata::vk
