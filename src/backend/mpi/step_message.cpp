#include "backend/mpi/step_message.h"

namespace strata::mpi {

void write_step(WireWriter& w, const StepCommand& step) {
  w.put_array<int32_t>(step.tokens);
  w.put_array<int32_t>(step.sequence);
  w.put_array<int64_t>(step.position);
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
  STRATA_CHECK(
      step.sequence.size() == step.tokens.size() && step.position.size() == step.tokens.size(),
      "a step command has {} tokens, {} sequence ids and {} positions", step.tokens.size(),
      step.sequence.size(), step.position.size());
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
