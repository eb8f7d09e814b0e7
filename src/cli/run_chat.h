#pragma once
// `strata run --chat`: a conversation in the terminal. Each turn is rendered with the model's chat
// template (ChatML when it has none), the answer streams out and ends its line, and further turns
// come from stdin: typed at a "> " prompt when stdin is a terminal, or one per line when it is a
// pipe (then also the first, when -p gives none).

#include <string>

#include "model/model.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace strata::cli {

struct ChatRun {
  std::string first_turn;  // -p; empty: read from stdin
  std::string system;      // --system; empty: none
  int max_answer_tokens = 512;
  bool ignore_eos = false;
  int64_t n_ctx = 4096;
  GgmlType kv_type = GgmlType::F16;
  SamplingParams sampling;
};

void run_chat(Model& model, const Tokenizer& tokenizer, const ChatRun& run, ThreadPool& pool);

}  // namespace strata::cli
