#include "backend/mpi/step_message.h"

#include <cmath>

namespace strata::mpi {

void write_step(WireWriter& w, const StepCommand& step) {
  w.put_array<int32_t>(step.tokens);
  w.put_array<int32_t>(step.sequence);
  w.put_array<int64_t>(step.position);
  w.put_array<int64_t>(step.groups);
  w.put<uint8_t>(step.has_kv);
  w.put<uint8_t>(step.has_state);
  w.put<uint8_t>(step.count_experts);
  w.put<int64_t>(static_cast<int64_t>(step.sequences.size()));
  for (const StepSequence& s : step.sequences) {
    if (step.has_kv) {
      w.put(s.kv.key);
      w.put(s.kv.type);
      w.put(s.kv.head_row_bytes);
      w.put(s.kv.page_size);
      w.put(s.kv.capacity);
      w.put_array<int32_t>(s.kv.pages);
    }
    if (step.has_state) {
      w.put(s.state_key);
      w.put(s.state_header);
      w.put_array<float>(s.state_part);
    }
  }
}

StepCommand read_step(WireReader& r) {
  StepCommand step;
  step.tokens = r.get_array<int32_t>();
  step.sequence = r.get_array<int32_t>();
  step.position = r.get_array<int64_t>();
  step.groups = r.get_array<int64_t>();
  STRATA_CHECK(
      step.sequence.size() == step.tokens.size() && step.position.size() == step.tokens.size(),
      "a step command has {} tokens, {} sequence ids and {} positions", step.tokens.size(),
      step.sequence.size(), step.position.size());
  const auto rows = static_cast<int64_t>(step.tokens.size());
  bool groups_ok =
      step.groups.size() >= 2 && step.groups.front() == 0 && step.groups.back() == rows;
  for (size_t g = 1; g < step.groups.size() && groups_ok; ++g)
    groups_ok = step.groups[g] > step.groups[g - 1];
  STRATA_CHECK(groups_ok, "a step command's micro-batches do not cover its {} rows", rows);
  step.has_kv = r.get<uint8_t>() != 0;
  step.has_state = r.get<uint8_t>() != 0;
  step.count_experts = r.get<uint8_t>() != 0;
  const auto n = r.get<int64_t>();
  STRATA_CHECK(n >= 0 && n <= (int64_t{1} << 20), "a step command names {} sequences", n);
  step.sequences.resize(static_cast<size_t>(n));
  for (StepSequence& s : step.sequences) {
    if (step.has_kv) {
      s.kv.key = r.get<uint64_t>();
      s.kv.type = r.get<GgmlType>();
      s.kv.head_row_bytes = r.get<int64_t>();
      s.kv.page_size = r.get<int64_t>();
      s.kv.capacity = r.get<int64_t>();
      s.kv.pages = r.get_array<int32_t>();
    }
    if (step.has_state) {
      s.state_key = r.get<uint64_t>();
      s.state_header = r.get<float>();
      s.state_part = r.get_array<float>();
    }
  }
  return step;
}

void HiddenStates::write(WireWriter& w) const {
  w.put_string(error);
  w.put(distinct_experts);
  w.put_array<uint64_t>(expert_counts);
  w.put_array<float>(x);
}

HiddenStates HiddenStates::read(WireReader& r) {
  HiddenStates h;
  h.error = r.get_string();
  h.distinct_experts = r.get<int64_t>();
  h.expert_counts = r.get_array<uint64_t>();
  h.x = r.get_array<float>();
  return h;
}

std::vector<int64_t> micro_batches(std::span<const int32_t> sequence, int64_t max_groups) {
  const auto n = static_cast<int64_t>(sequence.size());
  std::vector<int64_t> cuts;  // rows where another sequence starts
  for (int64_t row = 1; row < n; ++row)
    if (sequence[static_cast<size_t>(row)] != sequence[static_cast<size_t>(row - 1)])
      cuts.push_back(row);
  const int64_t groups =
      std::max<int64_t>(1, std::min<int64_t>(max_groups, static_cast<int64_t>(cuts.size()) + 1));
  std::vector<int64_t> out{0};
  size_t first = 0;  // the first cut still usable
  for (int64_t k = 1; k < groups; ++k) {
    const double target = static_cast<double>(n * k) / static_cast<double>(groups);
    const size_t end = cuts.size() - static_cast<size_t>(groups - 1 - k);  // leave one per cut
    size_t best = first;
    for (size_t i = first; i < end; ++i) {
      if (std::abs(static_cast<double>(cuts[i]) - target) <
          std::abs(static_cast<double>(cuts[best]) - target))
        best = i;
    }
    out.push_back(cuts[best]);
    first = best + 1;
  }
  out.push_back(n);
  return out;
}

ForwardBatch group_batch(const StepCommand& step, int64_t begin, int64_t end,
                         std::span<float* const> states) {
  const auto b = static_cast<size_t>(begin), count = static_cast<size_t>(end - begin);
  ForwardBatch batch;
  batch.tokens = std::span<const int32_t>(step.tokens).subspan(b, count);
  batch.sequences = std::span<const int32_t>(step.sequence).subspan(b, count);
  batch.positions = std::span<const int64_t>(step.position).subspan(b, count);
  batch.recurrent = states;
  return batch;
}

StateSlice state_slice(const DecoderModel& model, plan::LayerRange range) {
  const GatedDeltaNetParams& p = model.spec().gdn;
  const int64_t per_layer = p.conv_state_floats() + p.ssm_state_floats();
  StateSlice slice{-1, -1};
  for (int64_t il = range.first; il < range.last; ++il) {
    if (!model.spec().layers[static_cast<size_t>(il)].recurrent()) continue;
    const int64_t offset = model.layers()[static_cast<size_t>(il)].state_offset;
    if (slice.first < 0) slice.first = offset;
    slice.last = offset + per_layer;
  }
  return slice.first < 0 ? StateSlice{} : slice;
}

}  // namespace strata::mpi
