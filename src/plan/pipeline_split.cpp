#include "plan/pipeline_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "model/tensor_role.h"
#include "util/error.h"

namespace strata::plan {

std::vector<LayerRange> split_layers(std::span<const uint64_t> layer_bytes, uint64_t head_bytes,
                                     std::span<const double> capacity) {
  const auto n_layer = static_cast<int64_t>(layer_bytes.size());
  const auto ranks = static_cast<int64_t>(capacity.size());
  STRATA_CHECK(ranks >= 1, "a split needs at least one rank");
  STRATA_CHECK(ranks <= n_layer, "{} ranks for a model of {} layers: each rank needs a layer",
               ranks, n_layer);
  for (int64_t r = 0; r < ranks; ++r)
    STRATA_CHECK(capacity[static_cast<size_t>(r)] > 0, "rank {} has no capacity to hold layers", r);
  const double total =
      static_cast<double>(std::accumulate(layer_bytes.begin(), layer_bytes.end(), head_bytes));
  const double capacity_total = std::accumulate(capacity.begin(), capacity.end(), 0.0);

  // Walk the layers once: rank r ends at the boundary where the running total comes closest to
  // its cumulative share, leaving at least one layer for each rank after it.
  std::vector<LayerRange> out(static_cast<size_t>(ranks));
  double running = static_cast<double>(head_bytes), share = 0;
  int64_t layer = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    LayerRange& range = out[static_cast<size_t>(r)];
    range.first = layer;
    share += total * capacity[static_cast<size_t>(r)] / capacity_total;
    const int64_t last_allowed = n_layer - (ranks - 1 - r);
    if (r == ranks - 1) {
      range.last = n_layer;
      break;
    }
    running += static_cast<double>(layer_bytes[static_cast<size_t>(layer)]);
    ++layer;  // at least one layer
    while (layer < last_allowed) {
      const double next = running + static_cast<double>(layer_bytes[static_cast<size_t>(layer)]);
      if (std::abs(next - share) >= std::abs(running - share)) break;
      running = next;
      ++layer;
    }
    range.last = layer;
  }
  return out;
}

std::vector<LayerRange> parse_layer_split(const std::string& text, int64_t n_layer, int64_t ranks) {
  std::vector<LayerRange> out;
  int64_t layer = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    int64_t count = 0;
    size_t used = 0;
    try {
      count = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    STRATA_CHECK(used == item.size() && !item.empty() && count > 0,
                 "--layer-split {}: '{}' is not a positive layer count", text, item);
    out.push_back({layer, layer + count});
    layer += count;
    start = comma + 1;
  }
  STRATA_CHECK(static_cast<int64_t>(out.size()) == ranks,
               "--layer-split {}: {} counts for {} ranks (give one per rank, rank 0 first)", text,
               out.size(), ranks);
  STRATA_CHECK(layer == n_layer,
               "--layer-split {}: the counts add up to {}, the model has {} layers", text, layer,
               n_layer);
  return out;
}

std::vector<uint64_t> layer_weight_bytes(const ModelInventory& inventory) {
  std::vector<uint64_t> out;
  out.reserve(inventory.layers.size());
  for (const LayerInventory& l : inventory.layers) out.push_back(l.dense_bytes() + l.expert_bytes);
  return out;
}

uint64_t head_weight_bytes(const ModelInventory& inventory) {
  return inventory.embeddings_bytes + inventory.output_bytes + inventory.other_bytes;
}

uint64_t range_bytes(std::span<const uint64_t> layer_bytes, LayerRange range) {
  uint64_t total = 0;
  for (int64_t il = range.first; il < range.last; ++il)
    total += layer_bytes[static_cast<size_t>(il)];
  return total;
}

bool rank_holds_tensor(const std::string& name, std::span<const LayerRange> ranges, int rank) {
  const std::optional<int> layer = tensor_layer(name);
  for (size_t r = 0; r < ranges.size(); ++r) {
    if (layer && *layer >= ranges[r].first && *layer < ranges[r].last)
      return static_cast<int>(r) == rank;
  }
  return rank == 0;
}

std::vector<ByteRange> rank_byte_ranges(const GgufFile& file, std::span<const LayerRange> ranges,
                                        int rank) {
  std::vector<ByteRange> out{{0, file.data_offset()}};
  std::vector<ByteRange> held;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!rank_holds_tensor(t.name, ranges, rank)) continue;
    held.push_back({static_cast<uint64_t>(t.data.data() - file.bytes().data()), t.data.size()});
  }
  std::sort(held.begin(), held.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  for (const ByteRange& r : held) {
    ByteRange& last = out.back();
    // Alignment padding between neighbours is read along with them.
    if (r.offset <= last.offset + last.size + file.alignment()) {
      last.size = std::max(last.size, r.offset + r.size - last.offset);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace strata::plan
