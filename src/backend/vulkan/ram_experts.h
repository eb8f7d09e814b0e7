#pragma once
// A hybrid layer's routed experts that live in RAM. At load they are copied once into
// host-visible memory of the GPU's driver (pinned, device-mappable): the CPU computes decode
// steps from that copy, and a prompt batch that uploads them is one DMA from it into a device
// stack, with no bounce through other memory. The model file's pages of those experts are not
// read again, so RAM holds them once. STRATA_PINNED_EXPERTS=off, or a driver that refuses the
// memory, leaves them in the model's own pages: the CPU computes from there and prompt batches
// keep them on the CPU.

#include <cstdint>
#include <string>
#include <vector>

#include "backend/vulkan/device.h"
#include "model/blocks.h"
#include "model/hparams.h"

namespace strata::vk {

class DeviceWeights;

struct RamExperts {
  const MoeFfnWeights* model = nullptr;  // the layer's weights in the model (null: no RAM experts)
  std::vector<bool> in_ram;              // [n_expert] the experts the CPU computes
  int64_t count = 0;                     // of them
  // [n_expert] each RAM expert's place in weights()' stacks, -1 for the experts the GPU holds.
  std::vector<int32_t> slot;
  // The host-visible copy (null: none): the gate, up and down stacks of the RAM experts in expert
  // order, back to back at offsets 0, bytes[0], bytes[0] + bytes[1].
  const Buffer* pinned = nullptr;
  uint64_t bytes[3] = {0, 0, 0};
  MoeFfnWeights pinned_view;         // the CPU's view of `pinned`
  std::vector<float> pinned_biases;  // its expert biases (gpt-oss), in the same slot order

  explicit operator bool() const { return count > 0; }
  uint64_t total_bytes() const { return bytes[0] + bytes[1] + bytes[2]; }
  // What the CPU computes from: the pinned copy, else the model's stacks.
  const MoeFfnWeights& weights() const { return pinned ? pinned_view : *model; }
};

// Whether RAM experts go to host-visible memory (STRATA_PINNED_EXPERTS=on|off, default on).
bool pins_ram_experts();

// The experts of layer `name` that in_ram marks (none: an empty RamExperts), pinned through `w`
// when pins_ram_experts() and the driver gives the memory.
RamExperts place_ram_experts(DeviceWeights& w, const MoeFfnWeights& moe, const ModelHParams& hp,
                             std::vector<bool> in_ram, const std::string& name);

}  // namespace strata::vk
