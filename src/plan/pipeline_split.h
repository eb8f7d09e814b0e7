#pragma once
// Which contiguous range of layers each rank of a distributed (MPI) run holds. Rank 0 also holds
// the token embeddings and the output head. The split gives each rank a share of the weights in
// proportion to its capacity (the RAM it may use), so a model that fits on no single host fits on
// several; every rank holds at least one layer.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "plan/inventory.h"
#include "util/mapped_file.h"

namespace strata::plan {

struct LayerRange {
  int64_t first = 0, last = 0;  // [first, last)
  int64_t size() const { return last - first; }
};

// layer_bytes: [n_layer] weights of each layer; head_bytes: what rank 0 holds besides its layers
// (embeddings, output head); capacity: [ranks] relative capacities (> 0). Throws strata::Error
// when there are more ranks than layers or a capacity is not positive.
std::vector<LayerRange> split_layers(std::span<const uint64_t> layer_bytes, uint64_t head_bytes,
                                     std::span<const double> capacity);

// The split a user asked for: "N0,N1,..." layers per rank, in rank order. Throws strata::Error
// naming the problem when the list does not have one positive count per rank or does not add up
// to n_layer.
std::vector<LayerRange> parse_layer_split(const std::string& text, int64_t n_layer, int64_t ranks);

// Each layer's weights (dense parts and every routed expert) and rank 0's extra (embeddings,
// output head, other tensors).
std::vector<uint64_t> layer_weight_bytes(const ModelInventory& inventory);
uint64_t head_weight_bytes(const ModelInventory& inventory);

// Bytes of weights a rank holding `range` keeps (rank 0: with head_bytes).
uint64_t range_bytes(std::span<const uint64_t> layer_bytes, LayerRange range);

// Whether rank `rank` of a split holds tensor `name`: the tensors of its layers; rank 0 also
// every tensor outside the other ranks' layers (embeddings, output head, a NextN block).
bool rank_holds_tensor(const std::string& name, std::span<const LayerRange> ranges, int rank);

// The bytes of `file` that rank `rank` reads: the header and the tensors it holds, adjacent ones
// merged, in file order.
std::vector<ByteRange> rank_byte_ranges(const GgufFile& file, std::span<const LayerRange> ranges,
                                        int rank);

}  // namespace strata::plan
