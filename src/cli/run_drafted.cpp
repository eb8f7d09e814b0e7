#include "cli/run_drafted.h"

#include <fmt/format.h>

#include <future>
#include <optional>

#include "runtime/scheduler.h"
#include "runtime/speculative/draft_model_drafter.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {

std::string check_spec_mode(const std::string& name) {
  return parse_spec_mode(name) ? std::string() : "must be auto, ngram, mtp, draft or off";
}

std::unique_ptr<Model> load_draft_model(const std::string& path, const Model& target) {
  auto draft = Model::load(path);
  const std::string mismatch = draft_vocabulary_mismatch(target, *draft);
  if (!mismatch.empty()) fail("--draft-model {}: not the model's vocabulary ({})", path, mismatch);
  if (draft->recurrent_state_floats() > 0) {
    fail(
        "--draft-model {}: a model with recurrent layers cannot draft (it cannot rewind "
        "rejected guesses)",
        path);
  }
  log::info("drafting with {} ({} layers)", path, draft->hparams().n_layer);
  return draft;
}

void run_drafted(Model& model, const DraftedRun& run, ThreadPool& pool) {
  SchedulerOptions so;
  so.n_slots = 1;
  so.n_ctx = run.n_ctx;
  so.kv_type = run.kv_type;
  Scheduler scheduler(model, pool, so);
  DraftSources sources = scheduler.draft_sources();
  sources.draft_model = run.draft_model;

  std::optional<StreamingDetokenizer> text;
  if (run.text) text.emplace(*run.text, false);
  int64_t printed = 0;
  std::promise<JobResult> done;
  GenerationJob job;
  job.prompt = run.prompt;
  job.max_tokens = run.n_predict;
  job.sampling = run.sampling;
  job.end_tokens = run.end_tokens;
  job.drafter = make_drafter(run.spec, sources);
  job.max_draft = kMaxDraftTokens;
  job.on_token = [&](int32_t token) {
    if (text) {
      fmt::print("{}", text->push(token));
    } else {
      fmt::print("{}{}", printed ? "," : "", token);
    }
    ++printed;
    std::fflush(stdout);
    return true;
  };
  job.on_done = [&](const JobResult& r) { done.set_value(r); };
  if (!scheduler.submit(std::move(job))) fail("the scheduler refused the generation");
  const JobResult r = done.get_future().get();
  if (text) fmt::print("{}", text->flush());
  fmt::print("\n");
  std::fflush(stdout);
  if (r.reason == FinishReason::error) fail("generation failed: {}", r.error);
  const double decode = r.decode_seconds;
  fmt::print(stderr,
             "prompt: {} tokens in {:.3f} s ({:.1f} tok/s); generated {} tokens in {:.3f} s "
             "({:.1f} tok/s); drafts {} of {} kept\n",
             r.prompt_tokens, r.prefill_seconds,
             r.prompt_tokens / std::max(r.prefill_seconds, 1e-9), r.generated_tokens, decode,
             r.generated_tokens / std::max(decode, 1e-9), r.accepted_tokens, r.drafted_tokens);
}

}  // namespace strata::cli
