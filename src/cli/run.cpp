// `strata run`: generate tokens from a prompt.

#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <optional>
#include <random>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/run_chat.h"
#include "cli/run_drafted.h"
#include "cli/run_record.h"
#include "gguf/gguf_file.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {

void add_run_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string prompt;
    std::string tokens;
    int n_predict = 32;
    bool ignore_eos = false;
    bool ids = false;
    bool chat = false;
    std::string system;
    SamplingParams sampling;
    std::string spec = "off";
    std::string draft_model;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Generate tokens from a prompt (greedy at --temp 0)");
  add_model_options(cmd, o->model);
  auto* prompt =
      cmd->add_option("-p,--prompt", o->prompt, "Prompt text (needs the model's vocabulary)");
  auto* tokens = cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids");
  prompt->excludes(tokens);
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--temp", o->sampling.temperature, "Temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling mass (1: off)")
      ->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p x the best (0: off)")
      ->capture_default_str();
  cmd->add_option_function<int64_t>(
         "--seed",
         [o](int64_t seed) {
           // llama.cpp's -1: a different seed each run, said so the run can be repeated.
           if (seed < 0) {
             o->sampling.seed = std::random_device{}();
             log::info("--seed -1: seed {} this time", o->sampling.seed);
           } else {
             o->sampling.seed = static_cast<uint64_t>(seed);
           }
         },
         "Random seed (-1: a new one each run; default 0)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--repeat-penalty", o->sampling.repetition_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->sampling.penalty_last_n,
                  "Tokens the repetition penalty looks back (-1: all)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "Presence penalty")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "Frequency penalty")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after an end-of-generation token");
  cmd->add_flag("--ids", o->ids, "Print token ids even when the model has a vocabulary");
  auto* chat = cmd->add_flag("--chat", o->chat,
                             "A conversation: -p (or stdin) through the model's chat template, "
                             "then further turns from stdin (llama.cpp's -cnv)");
  cmd->add_option("--system", o->system, "With --chat: a system message first")->needs(chat);
  chat->excludes(tokens);
  auto* spec = cmd->add_option("--spec", o->spec,
                               "Speculative decoding, as strata serve's: auto, ngram, mtp, draft "
                               "(--draft-model) or off (default); the tokens are the same")
                   ->capture_default_str()
                   ->check(check_spec_mode);
  auto* draft_model = cmd->add_option("--draft-model", o->draft_model,
                                      "A smaller GGUF model with the same vocabulary to draft "
                                      "with (--spec draft, the default with it, or auto)")
                          ->check(CLI::ExistingFile);
  spec->excludes(chat);
  draft_model->excludes(chat);
  cmd->callback([o, cmd] {
    if (o->prompt.empty() && o->tokens.empty() && !o->chat)
      fail("give a prompt: -p TEXT or --tokens 1,2,3 (or --chat for a conversation)");
    // Text in and out when the file carries a vocabulary; token ids otherwise. The prompt is
    // tokenized before loading, so the placement is planned for the positions this run uses.
    std::unique_ptr<Tokenizer> tokenizer;
    {
      const GgufFile file = GgufFile::open(o->model.path);
      const auto kind = file.find_string("tokenizer.ggml.model").value_or("no_vocab");
      if (kind != "no_vocab" && kind != "none") tokenizer = Tokenizer::from_gguf(file);
    }
    if (o->chat) {
      if (!tokenizer) fail("{} has no vocabulary: --chat needs one", o->model.path);
      auto model = load_model(o->model);
      ThreadPool pool(o->model.thread_count());
      ChatRun run;
      run.first_turn = o->prompt;
      run.system = o->system;
      // An answer is longer than a completion test: 512 tokens unless -n says otherwise.
      run.max_answer_tokens = cmd->count("--n-predict") > 0 ? o->n_predict : 512;
      run.ignore_eos = o->ignore_eos;
      run.n_ctx = o->model.ctx;
      run.kv_type = o->model.kv_cache_type();
      run.sampling = o->sampling;
      run_chat(*model, *tokenizer, run, pool);
      return;
    }
    std::vector<int32_t> prompt_tokens;
    if (!o->prompt.empty()) {
      if (!tokenizer)
        fail("{} has no vocabulary: give the prompt as --tokens 1,2,3", o->model.path);
      prompt_tokens = tokenizer->encode(o->prompt, /*parse_special=*/true, /*add_bos=*/true);
    } else {
      prompt_tokens = parse_token_list(o->tokens);
    }
    const bool print_text = tokenizer && !o->ids;
    const int64_t needed = static_cast<int64_t>(prompt_tokens.size()) + o->n_predict;
    if (needed > o->model.ctx) {
      fail("prompt ({} tokens) + {} to generate exceed the context size {} (raise --ctx)",
           prompt_tokens.size(), o->n_predict, o->model.ctx);
    }
    const int64_t ctx = std::max<int64_t>(needed, 1);
    o->model.kv_positions = ctx;  // the KV cache this run allocates: what the plan counts
    auto model = load_model(o->model);
    ThreadPool pool(o->model.thread_count());
    const SpecMode spec_mode = !o->draft_model.empty() && cmd->count("--spec") == 0
                                   ? SpecMode::draft
                                   : *parse_spec_mode(o->spec);
    if (spec_mode != SpecMode::off) {
      DraftedRun run;
      run.prompt = prompt_tokens;
      run.n_predict = o->n_predict;
      run.n_ctx = ctx;
      run.kv_type = o->model.kv_cache_type();
      run.sampling = o->sampling;
      if (tokenizer && !o->ignore_eos) run.end_tokens = tokenizer->vocab().end_of_generation;
      run.spec = spec_mode;
      std::unique_ptr<Model> draft;
      if (!o->draft_model.empty()) draft = load_draft_model(o->draft_model, *model);
      run.draft_model = draft.get();
      run.text = print_text ? tokenizer.get() : nullptr;
      try {
        run_drafted(*model, run, pool);
      } catch (const std::invalid_argument& e) {
        fail("--spec {}: {}", spec_mode_name(spec_mode), e.what());
      }
      return;
    }
    const CpuTimeSample started = sample_cpu_time();
    Session session(*model, ctx, o->model.kv_cache_type(), pool);
    Sampler sampler(o->sampling);
    for (int32_t t : prompt_tokens) sampler.accept(t, /*generated=*/false);  // for the penalties
    std::vector<float> logits;
    const auto t0 = std::chrono::steady_clock::now();
    session.eval(prompt_tokens, false, logits);
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<int32_t> generated;
    std::optional<StreamingDetokenizer> text;
    if (print_text) text.emplace(*tokenizer, false);
    for (int i = 0; i < o->n_predict; ++i) {
      const int32_t next = sampler.sample(logits);
      sampler.accept(next);
      generated.push_back(next);
      const bool end = tokenizer && !o->ignore_eos && tokenizer->vocab().is_end_of_generation(next);
      if (print_text) {
        fmt::print("{}", text->push(next));
      } else {
        fmt::print("{}{}", i ? "," : "", next);
      }
      std::fflush(stdout);
      if (end) break;
      if (i + 1 < o->n_predict) session.eval(std::span<const int32_t>(&next, 1), false, logits);
    }
    if (print_text) fmt::print("{}", text->flush());
    fmt::print("\n");
    std::fflush(stdout);  // the text ends its line before the timing line on stderr
    const auto t2 = std::chrono::steady_clock::now();
    const double prefill = std::chrono::duration<double>(t1 - t0).count();
    const double decode = std::chrono::duration<double>(t2 - t1).count();
    fmt::print(stderr,
               "prompt: {} tokens in {:.3f} s ({:.1f} tok/s); generated {} tokens in {:.3f} s "
               "({:.1f} tok/s)\n",
               prompt_tokens.size(), prefill, prompt_tokens.size() / std::max(prefill, 1e-9),
               generated.size(), decode, generated.size() / std::max(decode, 1e-9));
    // A CPU run long enough to say something (a prompt of one micro-batch, which is what the
    // cost model prices, and a few dozen tokens) joins this machine's records.
    const auto n_prompt = static_cast<int64_t>(prompt_tokens.size());
    const auto n_gen = static_cast<int64_t>(generated.size());
    if (model->device_memory().empty() && n_prompt >= kMinRecordedPrompt &&
        n_prompt <= kMaxRecordedPrompt && n_gen >= kMinRecordedGenerated) {
      MeasuredRun run;
      run.source = "run";
      run.model_path = o->model.path;
      run.kv_type = o->model.kv_type;
      run.threads = o->model.thread_count();
      run.n_prompt = n_prompt;
      run.n_gen = n_gen;
      run.depth = n_prompt;
      run.pp_tok_s = static_cast<double>(n_prompt) / std::max(prefill, 1e-9);
      run.tg_tok_s = static_cast<double>(n_gen) / std::max(decode, 1e-9);
      record_cpu_run(run, load_between(started, sample_cpu_time()), "this run");
    }
  });
}

}  // namespace strata::cli
