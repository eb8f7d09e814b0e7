#include "backend/vulkan/ram_experts.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/vulkan/device_weights.h"
#include "util/error.h"
#include "util/format_bytes.h"

namespace strata::vk {

bool pins_ram_experts() {
  const char* mode = std::getenv("STRATA_PINNED_EXPERTS");
  if (!mode || !*mode) return true;
  STRATA_CHECK(std::string_view(mode) == "on" || std::string_view(mode) == "off",
               "STRATA_PINNED_EXPERTS={}: expected on or off", mode);
  return std::string_view(mode) == "on";
}

RamExperts place_ram_experts(DeviceWeights& w, const MoeFfnWeights& moe, const ModelHParams& hp,
                             std::vector<bool> in_ram, const std::string& name) {
  RamExperts r;
  r.slot.assign(static_cast<size_t>(hp.n_expert), -1);
  for (size_t e = 0; e < in_ram.size(); ++e)
    if (in_ram[e]) r.slot[e] = static_cast<int32_t>(r.count++);
  if (r.count == 0) return RamExperts{};
  r.model = &moe;
  r.in_ram = std::move(in_ram);
  const ops::WeightMatrix* stacks[3] = {&moe.gate_exps, &moe.up_exps, &moe.down_exps};
  for (int i = 0; i < 3; ++i) {
    r.bytes[i] = aligned_bytes(static_cast<uint64_t>(stacks[i]->bytes() / hp.n_expert) *
                               static_cast<uint64_t>(r.count));
  }
  const bool pin = pins_ram_experts();
  if (pin) {
    r.pinned = w.pinned(r.total_bytes(), fmt::format("{} ({} experts in RAM, {})", name, r.count,
                                                     format_bytes(r.total_bytes())));
  }
  if (!r.pinned) {  // the model's stacks: expert e stays at e
    for (size_t e = 0; e < r.slot.size(); ++e)
      if (r.in_ram[e]) r.slot[e] = static_cast<int32_t>(e);
    return r;
  }
  r.pinned_view = moe;
  auto* base = static_cast<uint8_t*>(r.pinned->mapped());
  uint64_t offset = 0;
  ops::WeightMatrix* views[3] = {&r.pinned_view.gate_exps, &r.pinned_view.up_exps,
                                 &r.pinned_view.down_exps};
  for (int i = 0; i < 3; ++i) {
    const auto slice = static_cast<size_t>(stacks[i]->bytes() / hp.n_expert);
    for (size_t e = 0; e < r.slot.size(); ++e) {
      if (r.slot[e] >= 0) {
        std::memcpy(base + offset + static_cast<size_t>(r.slot[e]) * slice,
                    stacks[i]->data + e * slice, slice);
      }
    }
    views[i]->data = base + offset;
    views[i]->rows = stacks[i]->rows / hp.n_expert * r.count;
    offset += r.bytes[i];
  }
  if (moe.gate_bias) {  // the biases follow the experts into their slots
    const int64_t widths[3] = {hp.n_ff_exp, hp.n_ff_exp, hp.n_embd};
    const float* sources[3] = {moe.gate_bias, moe.up_bias, moe.down_bias};
    const float** targets[3] = {&r.pinned_view.gate_bias, &r.pinned_view.up_bias,
                                &r.pinned_view.down_bias};
    r.pinned_biases.resize(static_cast<size_t>((2 * hp.n_ff_exp + hp.n_embd) * r.count));
    float* next = r.pinned_biases.data();
    for (int i = 0; i < 3; ++i) {
      *targets[i] = next;
      for (size_t e = 0; e < r.slot.size(); ++e) {
        if (r.slot[e] >= 0) {
          std::copy_n(sources[i] + static_cast<int64_t>(e) * widths[i], widths[i],
                      next + r.slot[e] * widths[i]);
        }
      }
      next += widths[i] * r.count;
    }
  }
  return r;
}

}  // namespace strata::vk
