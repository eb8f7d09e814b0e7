#pragma once
// The messages of a distributed step, shared by rank 0 (which writes commands) and the other
// ranks (which carry them out). Commands go from rank 0 to each rank; the hidden states of a
// step go from rank to rank along the pipeline and back to rank 0.

#include <cstdint>
#include <string>
#include <vector>

#include "backend/mpi/wire.h"
#include "gguf/ggml_type.h"
#include "model/decoder_model.h"
#include "plan/pipeline_split.h"

namespace strata::mpi {

enum class Op : int32_t {
  forward = 1,     // StepCommand; then hidden states arrive from the previous rank
  state_get = 2,   // key: reply with this rank's part of that recurrent state
  state_drop = 3,  // key: the state buffer is gone
  kv_copy = 4,     // key, from, to, n: rank 0's cache copied slots (a shared page made private)
  shutdown = 5,
};

// How one of rank 0's KV caches maps positions to storage slots (its first KV layer's view).
struct KvDescription {
  uint64_t key = 0;  // the cache's storage address on rank 0: the same cache each step
  GgmlType type = GgmlType::F16;
  int64_t head_row_bytes = 0;
  int64_t page_size = 0;  // 0: slot = position
  int64_t capacity = 0;
  std::vector<int32_t> pages;
};

struct StepSequence {
  KvDescription kv;  // models with KV layers
  // Recurrent models: rank 0's state buffer (its address names it), the tokens it has consumed
  // (its header), and this rank's part of it when rank 0 changed it since the last step (empty:
  // the rank's own copy is current).
  uint64_t state_key = 0;
  float state_header = 0;
  std::vector<float> state_part;
};

struct StepCommand {
  std::vector<int32_t> tokens, sequence;  // [rows] in the order the decoder runs them
  std::vector<int64_t> position;
  // Micro-batches: rows [groups[g], groups[g + 1]) travel the pipeline one after another, so
  // while a rank runs one, the rank before it runs the next.
  std::vector<int64_t> groups;
  std::vector<StepSequence> sequences;
  bool has_kv = false, has_state = false;
  bool count_experts = false;
};

void write_step(WireWriter& w, const StepCommand& step);
StepCommand read_step(WireReader& r);

// What travels along the pipeline: the hidden states of the step's rows (in the order the
// decoder runs them), what the ranks counted, or the first rank's error.
struct HiddenStates {
  std::string error;  // non-empty: a rank failed the step; the others pass it on
  int64_t distinct_experts = 0;
  std::vector<uint64_t> expert_counts;  // [n_layer * n_expert] when counted
  std::vector<float> x;

  void write(WireWriter& w) const;
  static HiddenStates read(WireReader& r);
};

// The floats [first, last) of a recurrent state buffer that the layers of `range` own (empty when
// it has no recurrent layer); the header is not part of it.
struct StateSlice {
  int64_t first = 0, last = 0;
  int64_t size() const { return last - first; }
};
StateSlice state_slice(const DecoderModel& model, plan::LayerRange range);

// Row boundaries [0, ..., n] of at most max_groups micro-batches of rows whose sequences are
// `sequence` (in the decoder's order): cut only where the sequence changes, so each sequence's
// rows stay in one micro-batch and run exactly as in one batch, as evenly as that allows.
std::vector<int64_t> micro_batches(std::span<const int32_t> sequence, int64_t max_groups);

// Rows [begin, end) of `step` as a batch of their own (several-sequence form, no logits): every
// sequence's caches and states stay where the whole step has them.
ForwardBatch group_batch(const StepCommand& step, int64_t begin, int64_t end,
                         std::span<float* const> states);

}  // namespace strata::mpi
