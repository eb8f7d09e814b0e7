#include "backend/vulkan/activation_input.h"

#include <fmt/format.h>

#include "quant/quant.h"

namespace strata::vk {

uint64_t ActivationScratch::buffer(GgmlType partner, uint64_t floats) {
  Buffer& b = buffers_[partner];
  if (b.size() < floats * 4) {
    // Work recorded earlier in this step may still read the old buffer: keep it until then.
    if (b) retired_.push_back(std::move(b));
    b = device_.allocate(floats * 4, MemoryKind::device,
                         fmt::format("{} ({} activations)", what_, ggml_type_name(partner)));
  }
  return b.address();
}

RoundedRows ActivationInput::for_weights(GgmlType weight_type) {
  const GgmlType partner = quant::traits(weight_type).activation_type;
  if (partner == GgmlType::F32) return x_;
  auto it = rounded_.find(partner);
  if (it != rounded_.end()) return it->second;
  const RoundedRows out{scratch_.buffer(partner, static_cast<uint64_t>(rows_ * cols_)), cols_};
  ops_.round_activations(weight_type, x_.address, x_.stride, out.address, out.stride, rows_, cols_);
  return rounded_.emplace(partner, out).first->second;
}

}  // namespace strata::vk
