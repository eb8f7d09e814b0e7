// `strata serve`: load a model and serve the OpenAI-compatible API until SIGINT / SIGTERM.

#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "cli/expert_profile.h"
#include "cli/model_options.h"
#include "cli/plan_report.h"
#include "cli/run_drafted.h"
#include "cli/run_record.h"
#include "plan/calibration.h"
#include "runtime/scheduler.h"
#include "server/listen_check.h"
#include "server/server.h"
#include "util/error.h"
#include "util/log.h"
#include "util/termination.h"

namespace strata::cli {
namespace {

// Optional command-line sampling values (unset ones keep the model's recommendations).
void add_sampling_flags(CLI::App* cmd, server::SamplingOverrides& s) {
  auto opt = [&](const char* name, auto& field, const char* help) {
    return cmd->add_option_function<std::decay_t<decltype(*field)>>(
        name, [&field](const auto& v) { field = v; }, help);
  };
  opt("--temp", s.temperature, "Default temperature (else the model's recommendation)")
      ->check(CLI::Range(0.0f, 100.0f));
  opt("--top-k", s.top_k, "Default top-k");
  opt("--top-p", s.top_p, "Default top-p");
  opt("--min-p", s.min_p, "Default min-p");
  opt("--repeat-penalty", s.repetition_penalty, "Default repetition penalty (1: off)");
  opt("--repeat-last-n", s.penalty_last_n, "Tokens the repetition penalty looks back (-1: all)");
  opt("--presence-penalty", s.presence_penalty, "Default presence penalty");
  opt("--frequency-penalty", s.frequency_penalty, "Default frequency penalty");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key;
    std::vector<std::string> aliases;
    int parallel = 4;
    int64_t kv_size = 0;
    int64_t batch = 512;
    int64_t prefill_chunk = 128;
    int64_t max_queue = 64;
    int shutdown_grace = 10;
    int64_t max_tokens = 0;
    std::string log_format_name = "text";
    std::string expert_profile;
    std::string spec = "auto";
    std::string draft_model;
    int64_t spec_history = 32768;
    server::SamplingOverrides sampling;
    double max_gpu_temp = 0, max_cpu_temp = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the model over an OpenAI-compatible HTTP API (chat, completions, models)");
  add_model_options(cmd, o->model);
  cmd->add_option("--host", o->host, "Address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_key,
                  "Require 'Authorization: Bearer KEY' (default: $STRATA_API_KEY, else none)");
  cmd->add_option("--alias", o->aliases,
                  "A model id clients may use, listed in /v1/models (repeatable; the first one "
                  "names the model in responses; the file name is always accepted)");
  cmd->add_option("--parallel", o->parallel, "Sequences generated at once (continuous batching)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--kv-size", o->kv_size,
                  "Positions in the shared, paged KV cache (default: --ctx x --parallel)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 32));
  cmd->add_option("-b,--batch", o->batch, "Tokens per forward step (decode tokens + prompt chunks)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "Prompt tokens per step while other streams decode (smaller: smoother streams)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cmd->add_option("--max-queue", o->max_queue, "Waiting requests before answering 503")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--shutdown-grace", o->shutdown_grace,
                  "Seconds accepted generations (running and queued) may finish after "
                  "SIGINT/SIGTERM; meanwhile /health and new requests get 503 (draining)")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  cmd->add_option("--max-tokens", o->max_tokens,
                  "Completion tokens for requests that send no max_tokens (default: the rest of "
                  "the context); longer requests are lowered to what the context has left")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  // A word check (its error lists the words), mapped to the enum once parsed.
  cmd->add_option("--log-format", o->log_format_name,
                  "One line per request on stderr: text (default), json (one object per line) "
                  "or off")
      ->check(CLI::IsMember({"text", "json", "off"}, CLI::ignore_case));
  cmd->add_option("--expert-profile", o->expert_profile,
                  "Record expert selections of all requests; written to this file at exit "
                  "(strata plan --profile reads it)");
  cmd->add_option("--spec", o->spec,
                  "Speculative decoding: auto (default: the best drafters there are, checked "
                  "only while they pay), ngram (prompt lookup), mtp (the file's NextN/MTP block, "
                  "CPU plans), draft (--draft-model), off; a request's \"spec\" field overrides it")
      ->check(check_spec_mode);
  cmd->add_option("--draft-model", o->draft_model,
                  "A smaller GGUF model with the same vocabulary to draft tokens with (run on the "
                  "CPU, greedily); --spec auto uses it where prompt lookup finds nothing")
      ->check(CLI::ExistingFile);
  cmd->add_option("--spec-history", o->spec_history,
                  "Tokens of recent answers that n-gram drafts also look in (how answers open "
                  "and close, a model's usual phrases); 0: only the request's own text. Drafts "
                  "never change an answer, but their speed hints at what others were answered")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd->add_option("--max-gpu-temp", o->max_gpu_temp,
                  "Above this GPU temperature (°C, from NVIDIA's NVML) new requests wait in the "
                  "queue, and start again 3 °C below it; running ones finish (0: no limit)")
      ->check(CLI::Range(0.0, 150.0));
  cmd->add_option("--max-cpu-temp", o->max_cpu_temp,
                  "The same for the CPU's package temperature (hwmon) (0: no limit)")
      ->check(CLI::Range(0.0, 150.0));
  add_sampling_flags(cmd, o->sampling);
  cmd->callback([o, cmd] {
    // Signals go to one waiting thread (blocked everywhere else, before any thread starts).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    if (o->api_key.empty()) {
      if (const char* env = std::getenv("STRATA_API_KEY")) o->api_key = env;
    }
    // What can be checked before the weights load is checked first.
    STRATA_CHECK(o->kv_size == 0 || o->kv_size >= o->model.ctx,
                 "--kv-size {} holds fewer positions than one request's context (--ctx {}): give "
                 "at least {} (or --ctx {} or less)",
                 o->kv_size, o->model.ctx, o->model.ctx, o->kv_size);
    server::check_can_listen(o->host, o->port);
    {
      const std::string kind =
          GgufFile::open(o->model.path).find_string("tokenizer.ggml.model").value_or("no_vocab");
      if (kind == "no_vocab" || kind == "none")
        fail(
            "{} has no vocabulary (tokenizer.ggml.model = {}): it cannot be served as a chat "
            "model",
            o->model.path, kind);
    }
    apply_cpu_plan(*cmd, o->model,
                   o->kv_size > 0 ? o->kv_size : o->model.ctx * int64_t{o->parallel});
    auto model = load_model(o->model);
    const auto tokenizer = Tokenizer::from_gguf(model->file());
    ThreadPool pool(o->model.thread_count());

    SchedulerOptions so;
    so.n_slots = o->parallel;
    so.n_ctx = o->model.ctx;
    so.kv_positions = o->kv_size > 0 ? o->kv_size : o->model.ctx * o->parallel;
    so.kv_type = o->model.kv_cache_type();
    so.batch_tokens = std::max<int64_t>(o->batch, o->parallel);
    so.max_queue = o->max_queue;
    so.prefill_chunk = o->prefill_chunk;
    so.answer_history_tokens = o->spec_history;
    // Counted always: the status page's heat map; --expert-profile writes them at exit.
    so.record_experts = model->hparams().n_expert > 0;
    // A lone generation on the CPU on a quiet machine joins this machine's records, as bench and
    // run do (the planner learns from them); a busy moment is skipped without a word.
    if (model->device_memory().empty()) {
      MeasuredRun base;
      base.model_path = o->model.path;
      base.kv_type = o->model.kv_type;
      base.threads = o->model.thread_count();
      so.on_job_finished = [base, batch = so.batch_tokens](const JobResult& r,
                                                           const SystemLoad& load) {
        if (load.busy() && plan::load_check_enabled()) return;
        try {
          if (const auto run = served_measurement(r, base, batch))
            record_cpu_run(*run, load, "served requests");
        } catch (const std::exception& e) {  // a record is never worth a request
          log::warn("could not record a served request for the planner: {}", e.what());
        }
      };
    }
    Scheduler scheduler(*model, pool, so);
    std::unique_ptr<Model> draft_model;
    if (!o->draft_model.empty()) draft_model = load_draft_model(o->draft_model, *model);

    server::ServerOptions opts;
    opts.host = o->host;
    opts.port = o->port;
    opts.api_key = o->api_key;
    // The first alias names the model; the file name stays accepted.
    const std::string stem = std::filesystem::path(o->model.path).stem().string();
    opts.model_id = o->aliases.empty() ? stem : o->aliases.front();
    opts.aliases.assign(o->aliases.begin() + (o->aliases.empty() ? 0 : 1), o->aliases.end());
    opts.aliases.push_back(stem);
    opts.sampling = o->sampling;
    opts.default_max_tokens = o->max_tokens;
    opts.spec = *parse_spec_mode(o->spec);
    opts.draft_model = draft_model.get();
    if (opts.spec == SpecMode::draft && !draft_model) fail("--spec draft needs --draft-model FILE");
    if (opts.spec == SpecMode::mtp && !scheduler.draft_sources().nextn) {
      fail(
          "--spec mtp: {} keeps no NextN/MTP block this plan can run (it drafts on CPU plans of "
          "files that keep one); use --spec auto or ngram",
          o->model.path);
    }
    opts.log_format = o->log_format_name == "json"  ? server::LogFormat::json
                      : o->log_format_name == "off" ? server::LogFormat::off
                                                    : server::LogFormat::text;
    // The page's Plan view: the planner's report for this model, context and KV type on this
    // machine (its GPUs as --device names them).
    opts.plan_report = [m = o->model] {
      MachineInputs machine;
      machine.model_path = m.path;
      machine.device = m.device;
      machine.threads = m.threads;
      machine.vram_budget = m.vram_budget;
      plan::PlanGoals goals;
      goals.context = m.ctx;
      goals.kv_type = m.kv_type;
      return plan_report_json(m.path, machine, goals);
    };
    opts.telemetry.max_gpu_celsius = o->max_gpu_temp;
    opts.telemetry.max_cpu_celsius = o->max_cpu_temp;
    opts.scripted_outputs = server::scripted_outputs_from_environment();  // TEST ONLY
    server::Server server(*model, *tokenizer, scheduler, opts);
    server.bind();

    std::thread waiter([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      if (sig == 0) return;  // woken by the exit path below
      // A distributed step waiting on a rank gives up now: under mpirun this signal means the
      // job is ending (a rank died, or it is being stopped) and mpirun kills us a second later.
      request_termination();
      log::info(
          "{}: draining: finishing running requests and queued ones (up to {} s), new ones "
          "get 503, then exiting",
          strsignal(sig), o->shutdown_grace);
      scheduler.shutdown(std::chrono::seconds(o->shutdown_grace));
      server.stop();
    });
    const std::string base =
        fmt::format("http://{}:{}/v1", o->host == "0.0.0.0" ? "127.0.0.1" : o->host, server.port());
    const SamplingParams& s = server.default_sampling();
    fmt::print(stderr,
               "strata serve: model '{}' ({} context, {} parallel, KV {} positions {})\n"
               "  sampling defaults: temperature {} top_k {} top_p {} min_p {} repetition {}\n"
               "  listening on {}  (OpenAI base URL{})\n"
               "  web page: {}/  (chat, status, plan)\n"
               "  try: curl {}/chat/completions -H 'Content-Type: application/json'{} -d "
               "'{{\"messages\":[{{\"role\":\"user\",\"content\":\"Write a function that does "
               "this: Return the sum of a list of numbers.\"}}]}}'\n",
               opts.model_id, so.n_ctx, so.n_slots, so.kv_positions, o->model.kv_type,
               s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty, base,
               opts.api_key.empty() ? "" : ", API key required", base.substr(0, base.size() - 3),
               base, opts.api_key.empty() ? "" : " -H 'Authorization: Bearer $STRATA_API_KEY'");
    server.listen();
    scheduler.shutdown(std::chrono::seconds(0));
    if (so.record_experts && !o->expert_profile.empty()) {
      int64_t tokens = 0;
      const auto counts = scheduler.expert_counts(&tokens);
      if (tokens > 0) {
        write_expert_profile(o->expert_profile, o->model.path, model->hparams(), counts, tokens,
                             static_cast<int64_t>(scheduler.stats().jobs_finished));
        log::info("expert selections of {} tokens written to {}", tokens, o->expert_profile);
      }
    }
    pthread_kill(waiter.native_handle(), SIGTERM);  // release the waiter if no signal came
    waiter.join();
    // A distributed job that lost a rank ends with an error, so whoever started it (a service
    // manager, a script) restarts it or says so, instead of counting it a clean stop.
    STRATA_CHECK(!o->model.distributed || scheduler.device_lost().empty(),
                 "stopped after losing a rank of the distributed job: {}", scheduler.device_lost());
    log::info("stopped");
  });
}

}  // namespace strata::cli
