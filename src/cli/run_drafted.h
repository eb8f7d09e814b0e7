#pragma once
// `strata run --spec MODE`: the same generation as a plain `strata run`, through a one-slot
// scheduler that checks drafts (prompt lookup, the file's MTP block, a draft model) as `strata
// serve` does. The tokens are the plain run's (each is drawn from the model's own logits in
// order); the timing line also says how many drafted tokens were checked and kept.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/speculative/speculation.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace strata::cli {

struct DraftedRun {
  std::vector<int32_t> prompt;
  int64_t n_predict = 32;
  int64_t n_ctx = 4096;
  GgmlType kv_type = GgmlType::F16;
  SamplingParams sampling;
  std::vector<int32_t> end_tokens;  // finish the generation (not printed)
  SpecMode spec = SpecMode::automatic;
  Model* draft_model = nullptr;     // --draft-model
  const Tokenizer* text = nullptr;  // print text with it; null: token ids
};

void run_drafted(Model& model, const DraftedRun& run, ThreadPool& pool);

// The CLI check of --spec (run and serve): "" for a mode parse_spec_mode reads, else the error.
std::string check_spec_mode(const std::string& name);

// `--draft-model FILE` for `target` (run and serve): loaded on the CPU and checked (the same
// vocabulary, no recurrent layers); throws strata::Error saying why not.
std::unique_ptr<Model> load_draft_model(const std::string& path, const Model& target);

}  // namespace strata::cli
