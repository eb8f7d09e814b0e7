#pragma once
// `strata bench --edit-replay N`: what speculative decoding gives on an edit, on any model,
// random weights included. An edit is built in token space: "code" (lines of keyword and
// identifier tokens, each drawn with Zipf-like frequencies), and an answer that is the same code
// with one identifier (the tenth most used) renamed to a two-token name, as a coding agent
// re-emits a file it changed. The
// answer is then generated twice per repetition, without drafts and with the server's n-gram
// drafts behind the cost model, each token forced to the answer's (every other logit masked):
// every step is a real forward pass of the model, so the timing is what a model that writes this
// edit would get, whatever this model's own weights would have said.

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "util/thread_pool.h"

namespace strata::cli {

struct EditReplay {
  std::vector<int32_t> prompt;  // an instruction, the code, a separator
  std::vector<int32_t> answer;  // the code with the identifier renamed (answer_tokens long)
  int64_t renamed = 0;          // places the rename changed in the answer
};

// Deterministic for a seed; ids below n_vocab (at least 506 of them).
EditReplay make_edit_replay(int64_t answer_tokens, int64_t n_vocab, uint64_t seed = 1);

struct EditReplayResult {
  int64_t tokens = 0;
  int64_t drafted = 0, kept = 0;                   // over the drafted runs
  std::vector<double> tok_s_plain, tok_s_drafted;  // decode speed of each run
};

// `repetitions` pairs of runs (plain, then drafted) on a one-slot scheduler. Throws strata::Error
// if a run does not generate exactly the answer.
EditReplayResult measure_edit_replay(Model& model, ThreadPool& pool, const EditReplay& edit,
                                     int repetitions, GgmlType kv_type);

}  // namespace strata::cli
