// `strata bench`: prompt-processing and generation speed, the weight bytes each generated token
// reads, the measured read bandwidth of the memory the weights live in (RAM, or the GPU's memory
// for a model on a GPU), and the fraction of that roofline reached.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "cli/bench_edit_replay.h"
#include "cli/commands.h"
#include "cli/expert_profile.h"
#include "cli/model_options.h"
#include "cli/run_record.h"
#include "plan/calibration.h"
#include "plan/inventory.h"
#include "runtime/session.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"
#include "util/memory_bandwidth.h"
#include "util/profiler.h"
#include "util/system_load.h"

#ifdef STRATA_HAVE_VULKAN
#include "backend/vulkan/bandwidth_probe.h"
#include "backend/vulkan/gpu_model.h"
#endif

namespace strata::cli {
namespace {

// Tokens --agent decodes after the prompt unless -n says otherwise: an agent's typical answer.
constexpr int kAgentGeneratedTokens = 128;

struct Stat {
  double mean = 0, stddev = 0;
};

// Cached positions a token of a tg run (n tokens after `depth`) reads per KV layer, on average
// over the run and the layers: all before it, but at most the window in sliding-window layers.
double average_kv_positions_read(const ModelHParams& hp, int64_t depth, int64_t n) {
  int64_t sliding_layers = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) sliding_layers += hp.layer_window(il) > 0;
  const double sliding_share =
      hp.n_layer > 0 ? static_cast<double>(sliding_layers) / static_cast<double>(hp.n_layer) : 0.0;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double position = static_cast<double>(depth + i);
    const double windowed = std::min(position, static_cast<double>(hp.sliding_window));
    sum += (1 - sliding_share) * position + sliding_share * windowed;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

Stat stat_of(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(sq / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Per-op wall time of one untimed run of `run` (which returns its own seconds), over n_tokens.
struct OpProfile {
  std::vector<profile::Entry> ops;
  double seconds = 0;
  int n_tokens = 0;
};

template <typename Run>
OpProfile profile_of(Run&& run, int n_tokens) {
  OpProfile p;
  p.n_tokens = n_tokens;
  profile::reset();
  profile::set_enabled(true);
  p.seconds = run();
  profile::set_enabled(false);
  for (const auto& e : profile::snapshot()) {
    if (e.calls > 0) p.ops.push_back(e);
  }
  return p;
}

nlohmann::json profile_json(const OpProfile& p) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& e : p.ops) {
    ops.push_back({{"op", e.name},
                   {"ms_per_token", 1e3 * e.seconds / p.n_tokens},
                   {"share", e.seconds / p.seconds}});
  }
  return ops;
}

#ifdef STRATA_HAVE_VULKAN
nlohmann::json hybrid_timeline_json(const vk::HybridTimeline& t) {
  nlohmann::json layers = nlohmann::json::array();
  int overlapped = 0;
  for (const vk::CpuExpertSpan& s : t.layers) {
    overlapped += s.gpu_busy_at_start;
    layers.push_back({{"layer", s.layer},
                      {"start_ms", s.start_ms},
                      {"pairs", s.pairs},
                      {"host_wait_ms", s.wait_ms},
                      {"cpu_experts_ms", s.cpu_ms},
                      {"gpu_busy_at_cpu_start", s.gpu_busy_at_start},
                      {"gpu_busy_at_cpu_end", s.gpu_busy_at_end}});
  }
  nlohmann::json uploads = nlohmann::json::array();
  for (const vk::ExpertUploadSpan& u : t.uploads) {
    uploads.push_back({{"layer", u.layer},
                       {"experts", u.experts},
                       {"bytes", u.bytes},
                       {"during_previous_layer", u.prefetched}});
  }
  nlohmann::json segments = nlohmann::json::array();
  for (const vk::GpuSegmentSpan& g : t.segments) {
    segments.push_back({{"stage", g.stage},
                        {"segment", g.segment},
                        {"start_ms", g.start_ms},
                        {"end_ms", g.end_ms}});
  }
  nlohmann::json stages = nlohmann::json::array();
  for (const vk::StageSpan& st : t.stages) {
    stages.push_back({{"first_layer", st.first_layer},
                      {"last_layer", st.last_layer - 1},
                      {"cpu_layers", st.cpu_layers},
                      {"ms", st.ms}});
  }
  return {{"step_ms", t.step_ms}, {"overlapped_layers", overlapped}, {"layers", layers},
          {"uploads", uploads},   {"gpu_segments", segments},        {"stages", stages}};
}
#endif

// A hybrid prompt batch: per layer with experts in RAM, which path ran (the CPU computing the
// batch's pairs, or the RAM experts uploaded and computed by the GPU; the cost model chooses).
void print_prompt_paths(const nlohmann::json& t) {
  uint64_t bytes = 0;
  int64_t prefetched = 0;
  std::vector<int64_t> uploaded, on_cpu;
  for (const auto& u : t["uploads"]) {
    uploaded.push_back(u["layer"].get<int64_t>());
    bytes += u["bytes"].get<uint64_t>();
    prefetched += u["during_previous_layer"].get<bool>();
  }
  for (const auto& l : t["layers"]) on_cpu.push_back(l["layer"].get<int64_t>());
  fmt::print(
      "hybrid prompt batch {:.3f} ms: RAM experts of {} layers uploaded to the GPU ({} from "
      "host-visible memory on the transfer queue, {} of the copies during the previous "
      "layer){}{}; {} layers' computed by the CPU{}{}\n",
      t["step_ms"].get<double>(), uploaded.size(), format_bytes(bytes), prefetched,
      uploaded.empty() ? "" : ": layers ", fmt::join(uploaded, ","), on_cpu.size(),
      on_cpu.empty() ? "" : ": layers ", fmt::join(on_cpu, ","));
}

// A hybrid decode step: per layer with experts in RAM, how long the host waited for the GPU to
// hand the layer over, how long the CPU's experts took, and whether the GPU's own part of the
// layer was still running meanwhile (the overlap).
void print_gpu_segments(const nlohmann::json& t) {
  for (const auto& st : t["stages"]) {
    fmt::print("  {} layers {}-{}: {:.3f} ms\n",
               st["cpu_layers"].get<bool>() ? "the CPU ran" : "hidden states hopped to",
               st["first_layer"].get<int64_t>(), st["last_layer"].get<int64_t>(),
               st["ms"].get<double>());
  }
  if (t["gpu_segments"].empty()) return;
  fmt::print(
      "  GPU segments (timestamp queries; ms from the stage's first segment; gaps are the "
      "GPU waiting for the host or an upload):\n");
  std::string line;
  int stage = -1;
  for (const auto& g : t["gpu_segments"]) {
    if (g["stage"].get<int>() != stage) {
      if (!line.empty()) fmt::print("{}\n", line);
      stage = g["stage"].get<int>();
      line = fmt::format("    stage {}:", stage);
    }
    line += fmt::format(" #{} {:.3f}-{:.3f}", g["segment"].get<int>(), g["start_ms"].get<double>(),
                        g["end_ms"].get<double>());
  }
  if (!line.empty()) fmt::print("{}\n", line);
}

void print_hybrid_timeline(const nlohmann::json& t) {
  if (t["layers"].empty()) {  // every expert on the GPU: only the segments
    fmt::print("decode step {:.3f} ms on the GPU\n", t["step_ms"].get<double>());
    print_gpu_segments(t);
    return;
  }
  double wait = 0, cpu = 0;
  for (const auto& l : t["layers"]) {
    wait += l["host_wait_ms"].get<double>();
    cpu += l["cpu_experts_ms"].get<double>();
  }
  fmt::print(
      "hybrid decode step {:.3f} ms: {} layers hand experts to the CPU ({:.3f} ms of CPU experts, "
      "{:.3f} ms waiting for the GPU); the GPU's part was in flight when the CPU started in {} of "
      "them\n",
      t["step_ms"].get<double>(), t["layers"].size(), cpu, wait, t["overlapped_layers"].get<int>());
  fmt::print("  {:>5} {:>9} {:>6} {:>10} {:>10}  {}\n", "layer", "start ms", "pairs", "wait ms",
             "cpu ms", "GPU busy at CPU start / end");
  for (const auto& l : t["layers"]) {
    fmt::print("  {:>5} {:>9.3f} {:>6} {:>10.3f} {:>10.3f}  {} / {}\n", l["layer"].get<int64_t>(),
               l["start_ms"].get<double>(), l["pairs"].get<int64_t>(),
               l["host_wait_ms"].get<double>(), l["cpu_experts_ms"].get<double>(),
               l["gpu_busy_at_cpu_start"].get<bool>() ? "yes" : "no",
               l["gpu_busy_at_cpu_end"].get<bool>() ? "yes" : "no");
  }
  print_gpu_segments(t);
}

void print_profile(const char* title, const OpProfile& p) {
  fmt::print("{} profile ({} tokens, {:.3f} ms/token):\n", title, p.n_tokens,
             1e3 * p.seconds / p.n_tokens);
  double accounted = 0;
  for (const auto& e : p.ops) {
    fmt::print("  {:<40} {:8.3f} ms  {:5.1f}%\n", e.name, 1e3 * e.seconds / p.n_tokens,
               100 * e.seconds / p.seconds);
    accounted += e.seconds;
  }
  fmt::print("  {:<40} {:8.3f} ms  {:5.1f}%\n", "(other)",
             1e3 * (p.seconds - accounted) / p.n_tokens, 100 * (p.seconds - accounted) / p.seconds);
}

struct BenchOptions {
  ModelOptions model;
  int n_prompt = 512;
  int n_gen = 128;
  int depth = 0;
  int repetitions = 3;
  int batch = 512;
  bool json = false;
  bool skip_bandwidth = false;
  bool profile = false;
  int agent = 0;        // an agent's turn: prompt of this many tokens, then tg from its state
  int verify = 0;       // largest verify step measured (0: none)
  int edit_replay = 0;  // answer tokens of the edit replay (0: none)
  std::string expert_profile;

  // Positions the session holds: the prompt, or the depth plus the generated tokens (or the
  // largest verify step).
  int64_t context() const {
    return std::max<int64_t>({n_prompt, int64_t{depth} + std::max(n_gen, verify), 1});
  }
};

void add_bench_options(CLI::App* cmd, BenchOptions& o) {
  add_model_options(cmd, o.model);
  cmd->add_option("-p,--n-prompt", o.n_prompt, "Prompt tokens for pp (0: skip)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", o.n_gen, "Generated tokens for tg (0: skip)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--depth", o.depth,
                  "Tokens already in the context when tg starts (decode speed at long context)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--agent", o.agent,
                  "An agent's turn: a prompt of N tokens (timed as pp: the time to the first "
                  "token), then -n tokens (default 128) decoded at depth N from the prompt's own "
                  "state; sets -p N -d N")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("-r,--repetitions", o.repetitions, "Repetitions of each test")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("-b,--batch", o.batch, "Prompt tokens per forward batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--json", o.json, "Machine-readable output");
  cmd->add_flag("--no-bandwidth", o.skip_bandwidth,
                "Skip the bandwidth measurement (RAM, or the GPU's memory with --device)");
  cmd->add_option("--expert-profile", o.expert_profile,
                  "Write how often the benchmark prompt's tokens selected each expert (one more "
                  "untimed pp run) to this file, for strata plan --profile");
  cmd->add_option("--verify", o.verify,
                  "Speculative decoding's verify cost: steps of 1..N tokens at the tg depth (every "
                  "row's logits), their time against a one-token step and the experts they read")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--edit-replay", o.edit_replay,
                  "Speculative decoding on an edit: a rename in N answer tokens of code, generated "
                  "(forced to the answer) without drafts and with n-gram drafts, -r times each")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_flag("--profile", o.profile,
                "After the timed runs, one more pp and tg run each (and the --verify N steps of N "
                "tokens) with a per-op time profile");
}

// --agent N: -p N -d N, and -n 128 unless given; a different -p or -d is an error.
void apply_agent_shape(const CLI::App& cmd, BenchOptions& o) {
  if (o.agent <= 0) return;
  const auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  STRATA_CHECK(!given("-p") || o.n_prompt == o.agent,
               "--agent {} is a prompt of {} tokens: drop -p {}", o.agent, o.agent, o.n_prompt);
  STRATA_CHECK(!given("-d") || o.depth == o.agent, "--agent {} decodes at depth {}: drop -d {}",
               o.agent, o.agent, o.depth);
  o.n_prompt = o.agent;
  o.depth = o.agent;
  if (!given("-n")) o.n_gen = kAgentGeneratedTokens;
  STRATA_CHECK(o.n_gen > 0, "--agent measures decoding after the prompt: -n must be > 0");
}

// What can be checked before the model loads.
void check_bench_options(const BenchOptions& o) {
  STRATA_CHECK(o.n_prompt > 0 || o.n_gen > 0 || o.verify > 0 || o.edit_replay > 0,
               "nothing to measure: -p, -n, --verify and --edit-replay are all 0");
  STRATA_CHECK(o.expert_profile.empty() || o.n_prompt > 0,
               "--expert-profile records the prompt's routing: it needs -p > 0");
}

// What the runs measured, and what the report derives from them.
struct BenchResults {
  int threads = 0;
  std::vector<double> pp, tg;  // tokens per second of each timed run
  OpProfile pp_profile, tg_profile;
  OpProfile verify_profile;        // --profile with --verify N: the steps of N tokens
  nlohmann::json prompt_timeline;  // the last prompt batch of a hybrid plan: which path ran
  nlohmann::json timeline;  // the last decode step on a GPU: the CPU's experts, the GPU segments
  // Bytes one generated token reads: dense weights, the experts that ran, and the KV cache at
  // the average position of the tg run.
  double experts_per_token = 0, kv_bytes = 0, state_bytes = 0, bytes_per_token = 0;
  BandwidthMeasurement bw;  // of the memory the weights are read from (the roofline)
  // On the CPU: the compute roofs of the model's main weight type, and a prompt token's
  // multiply-accumulates (the layers' active parameters).
  std::optional<plan::ComputeRoofs> roofs;
  double macs_per_token = 0;
  std::string device = "cpu";
  double upload_gbps = 0;
  // --verify: per step size B = 1..N, seconds per step and the distinct experts it ran (summed
  // over the MoE layers: what it read).
  struct VerifyStep {
    int tokens = 0;
    double seconds = 0, experts = 0;
  };
  std::vector<VerifyStep> verify;
  std::optional<EditReplayResult> edit;
  int64_t edit_renamed = 0;
  bool on_gpu() const { return device != "cpu"; }
};

// The runs on one session over the model, in the order their random tokens are drawn.
class BenchRunner {
 public:
  BenchRunner(Model& model, const BenchOptions& o, ThreadPool& pool)
      : model_(model),
        o_(o),
        session_(model, o.context(), o.model.kv_cache_type(), pool),
        token_(0, static_cast<int32_t>(model.hparams().n_vocab - 1)),
        prompt_(static_cast<size_t>(std::max(o.n_prompt, 1))) {
    for (auto& t : prompt_) t = token_(rng_);
  }

  // Warm-up: the whole prompt once, untimed (as llama-bench does): it faults in the weights
  // (mmap) and every expert the prompt reaches, and sizes the scratch buffers. A 64-token
  // warm-up left the first timed pp run 3-7% slower than the next ones.
  void warm_up() {
    log::info("warming up");
    session_.eval(prompt_, false, logits_, o_.batch);
    session_.reset();
  }

  void measure_prompt(BenchResults& r) {
    for (int i = 0; i < o_.repetitions && o_.n_prompt > 0; ++i) {
      r.pp.push_back(o_.n_prompt / run_pp());
      log::info("pp{} run {}: {:.2f} tok/s", o_.n_prompt, i + 1, r.pp.back());
    }
    if (!o_.profile || o_.n_prompt == 0) return;
#ifdef STRATA_HAVE_VULKAN
    vk::set_gpu_timestamps(model_, true);  // the profile runs only: timed runs stay untouched
#endif
    r.pp_profile = profile_of([this] { return run_pp(); }, o_.n_prompt);
#ifdef STRATA_HAVE_VULKAN
    if (const vk::HybridTimeline* t = vk::hybrid_timeline(model_);
        t && (!t->layers.empty() || !t->uploads.empty())) {
      r.prompt_timeline = hybrid_timeline_json(*t);
    }
    vk::set_gpu_timestamps(model_, false);
#endif
  }

  void record_expert_profile() {
    const ModelHParams& hp = model_.hparams();
    session_.stats().expert_counts.assign(static_cast<size_t>(hp.n_layer * hp.n_expert), 0);
    run_pp();
    write_expert_profile(o_.expert_profile, o_.model.path, hp, session_.stats().expert_counts,
                         o_.n_prompt, 1);
    session_.stats().expert_counts.clear();  // stop counting
    log::info("expert selections of the {}-token prompt written to {}", o_.n_prompt,
              o_.expert_profile);
  }

  // Steps of B tokens from the depth snapshot, as a verify step of B - 1 drafted tokens runs:
  // every row's logits. Each size runs as many steps as a tg run has tokens (at least 8).
  void measure_verify(BenchResults& r) {
    if (o_.verify <= 0) return;
    if (o_.n_gen <= 0) start_at_depth();
    const int steps = std::max(8, o_.n_gen);
    for (int b = 1; b <= o_.verify; ++b) {
      const int64_t experts_before = session_.stats().distinct_experts;
      const double seconds = run_verify_steps(b, steps);
      const auto experts = static_cast<double>(session_.stats().distinct_experts - experts_before);
      r.verify.push_back({b, seconds / steps, experts / steps});
      log::info("verify step of {} tokens: {:.3f} ms", b, 1e3 * r.verify.back().seconds);
    }
    // Where the largest step's time goes, op by op, next to the decode step's (one token): what
    // each drafted token adds.
    if (o_.profile) {
      r.verify_profile =
          profile_of([&] { return run_verify_steps(o_.verify, steps); }, steps * o_.verify);
    }
  }

  // `steps` steps of `tokens` random tokens, each from the depth snapshot; their eval seconds.
  double run_verify_steps(int tokens, int steps) {
    std::vector<int32_t> step(static_cast<size_t>(tokens));
    double seconds = 0;
    for (int i = 0; i < steps; ++i) {
      session_.restore(at_depth_);
      for (auto& t : step) t = token_(rng_);
      const auto start = std::chrono::steady_clock::now();
      session_.eval(step, true, logits_);
      seconds += seconds_since(start);
    }
    return seconds;
  }

  void measure_generation(BenchResults& r) {
    start_at_depth();
    int64_t experts_before = 0, experts_after = 0;
    for (int i = 0; i < o_.repetitions && o_.n_gen > 0; ++i) {
      experts_before = session_.stats().distinct_experts;
      r.tg.push_back(o_.n_gen / run_tg());
      experts_after = session_.stats().distinct_experts;
      log::info("tg{} run {}: {:.2f} tok/s", o_.n_gen, i + 1, r.tg.back());
    }
    profile_generation(r);
    r.experts_per_token =
        o_.n_gen > 0 ? static_cast<double>(experts_after - experts_before) / o_.n_gen : 0.0;
    const double expert_bytes = r.experts_per_token * static_cast<double>(model_.expert_bytes());
    r.kv_bytes = average_kv_positions_read(model_.hparams(), o_.depth, o_.n_gen) *
                 static_cast<double>(session_.kv_cache().bytes_per_position());
    r.state_bytes = static_cast<double>(model_.recurrent_bytes_per_token());
    r.bytes_per_token = static_cast<double>(model_.dense_bytes_per_token()) + expert_bytes +
                        r.kv_bytes + r.state_bytes;
  }

 private:
  double run_pp() {
    session_.reset();
    const auto start = std::chrono::steady_clock::now();
    session_.eval(prompt_, false, logits_, o_.batch);
    const double seconds = seconds_since(start);
    holds_prompt_ = true;
    return seconds;
  }

  // tg and verify steps start at position `depth` (filled once, untimed). Each run starts from a
  // snapshot there (hybrid models cannot truncate their recurrent state).
  void start_at_depth() {
    const bool from_prompt = holds_prompt_ && o_.depth > 0 && o_.depth == o_.n_prompt;
    holds_prompt_ = false;
    if (from_prompt) {
      // The last pp run left exactly the depth's tokens: an agent's turn goes on from there.
      log::info("decoding from the prompt's own state (depth {})", o_.depth);
      at_depth_ = session_.snapshot();
      return;
    }
    session_.reset();
    if (o_.depth > 0) {
      log::info("filling the context to depth {}", o_.depth);
      std::vector<int32_t> fill(static_cast<size_t>(o_.depth));
      for (auto& t : fill) t = token_(rng_);
      session_.eval(fill, false, logits_, o_.batch);
    }
    at_depth_ = session_.snapshot();
  }

  double run_tg() {
    session_.restore(at_depth_);
    int32_t next = token_(rng_);
    const int64_t n_vocab = model_.hparams().n_vocab;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.n_gen; ++i) {
      session_.eval(std::span<const int32_t>(&next, 1), false, logits_);
      next = static_cast<int32_t>((int64_t{next} * 7919 + 13) % n_vocab);  // cheap, deterministic
    }
    return seconds_since(start);
  }

  // Where a decode step goes: one more (untimed) tg run with the per-op profile on.
  void profile_generation(BenchResults& r) {
#ifdef STRATA_HAVE_VULKAN
    if (o_.profile) vk::set_gpu_timestamps(model_, true);
#endif
    if (o_.profile && o_.n_gen > 0)
      r.tg_profile = profile_of([this] { return run_tg(); }, o_.n_gen);
#ifdef STRATA_HAVE_VULKAN
    vk::set_gpu_timestamps(model_, false);
    if (const vk::HybridTimeline* t = vk::hybrid_timeline(model_);
        o_.profile && t && (!t->layers.empty() || !t->segments.empty() || !t->stages.empty())) {
      r.timeline = hybrid_timeline_json(*t);
    }
#endif
  }

  Model& model_;
  const BenchOptions& o_;
  Session session_;
  std::mt19937 rng_{1234};
  std::uniform_int_distribution<int32_t> token_;
  std::vector<int32_t> prompt_;
  std::vector<float> logits_;
  SessionSnapshot at_depth_;
  bool holds_prompt_ = false;  // the session holds exactly the prompt of the last pp run
};

// The roofline is the bandwidth of the memory the weights are read from: the GPU's, or RAM.
void measure_bandwidth(Model& model, const BenchOptions& o, ThreadPool& pool, BenchResults& r) {
#ifdef STRATA_HAVE_VULKAN
  if (vk::Device* gpu = vk::gpu_device(model)) {
    r.device = gpu->label();
    if (!o.skip_bandwidth) {
      log::info("measuring the read and upload bandwidth of {}", r.device);
      const vk::GpuBandwidth g = vk::measure_gpu_bandwidth(*gpu);
      r.bw.read_gbps = g.read_gbps;
      r.upload_gbps = g.upload_gbps;
    }
  }
#else
  (void)model;
#endif
  if (!o.skip_bandwidth && !r.on_gpu()) {
    log::info("measuring RAM read bandwidth with {} threads", r.threads);
    r.bw = measure_read_bandwidth(pool, int64_t{1} << 30, 3);
    // The other roof: what the kernels of the model's main weight type do on cached weights.
    const plan::ModelInventory inv = plan::inventory_from_gguf(model.file());
    std::map<GgmlType, uint64_t> bytes;
    for (const plan::InventoryTensor& t : inv.tensors)
      if (t.matrix) bytes[t.type] += t.bytes;
    if (!bytes.empty()) {
      const GgmlType main_type =
          std::max_element(bytes.begin(), bytes.end(), [](const auto& a, const auto& b) {
            return a.second < b.second;
          })->first;
      log::info("measuring the {} kernels' compute roofs on cached weights",
                ggml_type_name(main_type));
      r.roofs =
          plan::measure_compute_roofs(main_type, r.threads, 0.05, model.compact_tile_bytes() > 0);
      // A prompt token's products: the layers' (the output head runs for the last token only).
      r.macs_per_token = static_cast<double>(inv.active_params() - inv.output_params);
    }
  }
}

// The fraction of the memory bandwidth generation reaches (0: not measured).
double roofline_fraction(const BenchResults& r, const Stat& tg) {
  return r.bw.read_gbps > 0 && tg.mean > 0 ? tg.mean * r.bytes_per_token / (r.bw.read_gbps * 1e9)
                                           : 0.0;
}

// Generation's reads against both roofs: the RAM's bandwidth and the decode kernels' rate on
// cached weights. The lower one binds.
struct BindingRoof {
  std::string name;     // "RAM" or "compute"
  double fraction = 0;  // of the binding roof
  double ram_fraction = 0, compute_fraction = 0;
};
std::optional<BindingRoof> tg_binding_roof(const BenchResults& r, const Stat& tg) {
  if (!r.roofs || r.bw.read_gbps <= 0 || tg.mean <= 0) return std::nullopt;
  const double reads_gbps = tg.mean * r.bytes_per_token / 1e9;
  BindingRoof b;
  b.ram_fraction = roofline_fraction(r, tg);  // the same bits as the roofline line reports
  b.compute_fraction = reads_gbps / r.roofs->gemv_gbps;
  b.name = r.roofs->gemv_gbps < r.bw.read_gbps ? "compute" : "RAM";
  b.fraction = std::max(b.ram_fraction, b.compute_fraction);
  return b;
}

// Prompt processing's multiply-accumulates against the prefill kernels' rate on cached weights.
double pp_compute_fraction(const BenchResults& r, const Stat& pp) {
  return r.roofs && r.roofs->gemm_gmacs > 0
             ? pp.mean * r.macs_per_token / (r.roofs->gemm_gmacs * 1e9)
             : 0.0;
}

// An agent's turn (--agent) from the mean speeds: the prompt (the time to the first token), then
// the answer decoded at the prompt's depth.
struct AgentTurn {
  double prompt_seconds = 0, decode_seconds = 0;
  double seconds() const { return prompt_seconds + decode_seconds; }
};
std::optional<AgentTurn> agent_turn(const BenchOptions& o, const Stat& pp, const Stat& tg) {
  if (o.agent <= 0 || pp.mean <= 0 || tg.mean <= 0) return std::nullopt;
  return AgentTurn{o.n_prompt / pp.mean, o.n_gen / tg.mean};
}

void print_bench_json(const BenchOptions& o, const Model& model, const BenchResults& r) {
  const ModelHParams& hp = model.hparams();
  const Stat pp = stat_of(r.pp), tg = stat_of(r.tg);
  nlohmann::json j = {
      {"model", o.model.path},
      {"architecture", hp.arch},
      {"layers", hp.n_layer},
      {"threads", r.threads},
      {"device", r.device},
      {"load", o.model.load},
      {"kv_type", o.model.kv_type},
      {"cpu", cpu_features().describe()},
      {"pp",
       {{"tokens", o.n_prompt}, {"tok_per_s", pp.mean}, {"stddev", pp.stddev}, {"runs", r.pp}}},
      {"tg",
       {{"tokens", o.n_gen},
        {"depth", o.depth},
        {"tok_per_s", tg.mean},
        {"stddev", tg.stddev},
        {"runs", r.tg}}},
      {"bytes_per_token", r.bytes_per_token},
      {"dense_bytes_per_token", model.dense_bytes_per_token()},
      {"experts_per_token", r.experts_per_token},
      {"expert_bytes", model.expert_bytes()},
      {"kv_bytes_per_token", r.kv_bytes},
      {"recurrent_state_bytes_per_token", r.state_bytes},
      {r.on_gpu() ? "gpu_read_gbps" : "ram_read_gbps", r.bw.read_gbps},
      {"roofline_fraction", roofline_fraction(r, tg)},
  };
  if (r.on_gpu()) j["gpu_upload_gbps"] = r.upload_gbps;
  if (r.roofs) {
    j["compute_roofs"] = {{"type", ggml_type_name(r.roofs->type)},
                          {"compact_tiles", r.roofs->compact},
                          {"decode_gbps", r.roofs->gemv_gbps},
                          {"prefill_gmacs", r.roofs->gemm_gmacs}};
    if (const auto b = tg_binding_roof(r, tg)) {
      j["tg_binding_roof"] = b->name;
      j["tg_binding_fraction"] = b->fraction;
      j["tg_compute_fraction"] = b->compute_fraction;
    }
    j["pp_compute_fraction"] = pp_compute_fraction(r, pp);
  }
  if (!r.pp_profile.ops.empty()) j["prefill_profile"] = profile_json(r.pp_profile);
  if (!r.tg_profile.ops.empty()) j["decode_profile"] = profile_json(r.tg_profile);
  if (!r.verify_profile.ops.empty()) j["verify_profile"] = profile_json(r.verify_profile);
  if (!r.timeline.is_null()) j["hybrid_timeline"] = r.timeline;
  if (!r.prompt_timeline.is_null()) j["hybrid_prompt_timeline"] = r.prompt_timeline;
  for (const auto& v : r.verify) {
    j["verify"].push_back({{"tokens", v.tokens},
                           {"ms", 1e3 * v.seconds},
                           {"relative", v.seconds / r.verify.front().seconds},
                           {"experts", v.experts}});
  }
  if (r.edit) {
    const Stat plain = stat_of(r.edit->tok_s_plain), drafted = stat_of(r.edit->tok_s_drafted);
    j["edit_replay"] = {{"tokens", r.edit->tokens},
                        {"renamed", r.edit_renamed},
                        {"tok_s_plain", plain.mean},
                        {"tok_s_drafted", drafted.mean},
                        {"speedup", drafted.mean / plain.mean},
                        {"drafted", r.edit->drafted},
                        {"kept", r.edit->kept}};
  }
  if (const auto turn = agent_turn(o, pp, tg)) {
    j["agent"] = {{"prompt_tokens", o.n_prompt},
                  {"time_to_first_token_s", turn->prompt_seconds},
                  {"decode_tokens", o.n_gen},
                  {"decode_s", turn->decode_seconds},
                  {"turn_s", turn->seconds()}};
  }
  fmt::print("{}\n", j.dump(2));
}

void print_bench_text(const BenchOptions& o, const Model& model, const BenchResults& r) {
  const ModelHParams& hp = model.hparams();
  const Stat pp = stat_of(r.pp), tg = stat_of(r.tg);
  fmt::print(
      "model      {} ({}, {} layers{})\n", o.model.path, hp.arch, hp.n_layer,
      hp.n_expert ? fmt::format(", {} experts / {} used", hp.n_expert, hp.n_expert_used) : "");
  if (r.on_gpu()) {
    fmt::print("setup      {}, KV {} on the device, {} host threads\n", r.device, o.model.kv_type,
               r.threads);
  } else {
    fmt::print("setup      {} threads, load {}, KV {}, CPU {}\n", r.threads, o.model.load,
               o.model.kv_type, cpu_features().describe());
  }
  if (o.n_prompt > 0)
    fmt::print("pp{:<8} {:8.2f} ± {:.2f} tok/s  ({} runs)\n", o.n_prompt, pp.mean, pp.stddev,
               r.pp.size());
  if (o.n_gen > 0) {
    fmt::print("tg{:<8} {:8.2f} ± {:.2f} tok/s  ({} runs{})\n", o.n_gen, tg.mean, tg.stddev,
               r.tg.size(), o.depth ? fmt::format(", from depth {}", o.depth) : "");
    fmt::print("bytes/tok  {}  (dense {} + {:.1f} experts x {} + KV {}{})\n",
               format_bytes(static_cast<uint64_t>(r.bytes_per_token)),
               format_bytes(static_cast<uint64_t>(model.dense_bytes_per_token())),
               r.experts_per_token, format_bytes(static_cast<uint64_t>(model.expert_bytes())),
               format_bytes(static_cast<uint64_t>(r.kv_bytes)),
               r.state_bytes > 0 ? fmt::format(" + recurrent state {} read+written",
                                               format_bytes(static_cast<uint64_t>(r.state_bytes)))
                                 : "");
  }
  if (const auto turn = agent_turn(o, pp, tg)) {
    fmt::print(
        "agent      prompt of {} tokens in {:.2f} s (time to first token), {} tokens at depth {} "
        "in {:.2f} s: {:.2f} s a turn\n",
        o.n_prompt, turn->prompt_seconds, o.n_gen, o.depth, turn->decode_seconds, turn->seconds());
  }
  if (r.bw.read_gbps > 0 && r.on_gpu()) {
    fmt::print("GPU read   {:.1f} GB/s (upload {:.1f} GB/s)\n", r.bw.read_gbps, r.upload_gbps);
  } else if (r.bw.read_gbps > 0) {
    fmt::print("RAM read   {:.1f} GB/s ({} threads)\n", r.bw.read_gbps, r.threads);
  }
  if (const double roofline = roofline_fraction(r, tg); roofline > 0) {
    fmt::print("roofline   {:.1f}% (tg x bytes/tok = {:.1f} GB/s of {:.1f} GB/s)\n", 100 * roofline,
               tg.mean * r.bytes_per_token / 1e9, r.bw.read_gbps);
  }
  if (r.roofs) {
    fmt::print(
        "compute    {} kernels on cached weights{}: decode {:.1f} GB/s, prefill {:.1f} GMAC/s\n",
        ggml_type_name(r.roofs->type), r.roofs->compact ? " (compact tiles)" : "",
        r.roofs->gemv_gbps, r.roofs->gemm_gmacs);
    if (const auto b = tg_binding_roof(r, tg)) {
      fmt::print("binds      tg{}: the {} roof, {:.1f}% of it (RAM {:.1f}%, compute {:.1f}%)\n",
                 o.n_gen, b->name, 100 * b->fraction, 100 * b->ram_fraction,
                 100 * b->compute_fraction);
    }
    if (const double f = pp_compute_fraction(r, pp); f > 0)
      fmt::print("           pp{}: {:.1f}% of the prefill compute roof\n", o.n_prompt, 100 * f);
  }

  if (!r.verify.empty()) {
    fmt::print("verify     tokens   ms/step   x one token   experts read\n");
    for (const auto& v : r.verify) {
      fmt::print("           {:6}  {:8.3f}  {:11.2f}  {:13.1f}\n", v.tokens, 1e3 * v.seconds,
                 v.seconds / r.verify.front().seconds, v.experts);
    }
  }
  if (r.edit) {
    const Stat plain = stat_of(r.edit->tok_s_plain), drafted = stat_of(r.edit->tok_s_drafted);
    fmt::print(
        "edit       {} tokens (a rename at {} places): {:.2f} ± {:.2f} tok/s plain, {:.2f} ± "
        "{:.2f} with n-gram drafts ({:.2f}x), drafts {} of {} kept\n",
        r.edit->tokens, r.edit_renamed, plain.mean, plain.stddev, drafted.mean, drafted.stddev,
        drafted.mean / plain.mean, r.edit->kept, r.edit->drafted);
  }
  if (!r.pp_profile.ops.empty()) print_profile("prefill", r.pp_profile);
  if (!r.tg_profile.ops.empty()) print_profile("decode step", r.tg_profile);
  if (!r.verify_profile.ops.empty())
    print_profile(fmt::format("verify ({}-token steps)", o.verify).c_str(), r.verify_profile);
  if (!r.prompt_timeline.is_null()) print_prompt_paths(r.prompt_timeline);
  if (!r.timeline.is_null()) print_hybrid_timeline(r.timeline);
}

// A CPU run's workload and speeds go to this machine's records.
void record_run(const BenchOptions& o, const BenchResults& r, const SystemLoad& load) {
  if (r.on_gpu()) return;
  MeasuredRun run;
  run.source = "bench";
  run.model_path = o.model.path;
  run.kv_type = o.model.kv_type;
  run.threads = r.threads;
  run.n_prompt = r.pp.empty() ? 0 : o.n_prompt;
  run.n_gen = r.tg.empty() ? 0 : o.n_gen;
  run.depth = o.depth;
  run.pp_tok_s = stat_of(r.pp).mean;
  run.tg_tok_s = stat_of(r.tg).mean;
  record_cpu_run(run, load, "this benchmark");
}

void run_bench(const CLI::App& cmd, BenchOptions& o) {
  apply_agent_shape(cmd, o);
  check_bench_options(o);
  const CpuTimeSample started = sample_cpu_time();
  apply_cpu_plan(cmd, o.model, o.context());
  o.model.kv_positions = o.context();  // the KV cache the bench allocates: what the plan counts
  auto model = load_model(o.model);
  STRATA_CHECK(o.expert_profile.empty() || model->hparams().n_expert > 0,
               "--expert-profile: {} has no routed experts", o.model.path);
  BenchResults results;
  results.threads = o.model.thread_count();
  ThreadPool pool(results.threads);
  BenchRunner bench(*model, o, pool);
  bench.warm_up();
  bench.measure_prompt(results);
  if (!o.expert_profile.empty()) bench.record_expert_profile();
  bench.measure_generation(results);
  bench.measure_verify(results);
  if (o.edit_replay > 0) {
    log::info("replaying an edit of {} tokens", o.edit_replay);
    const EditReplay edit = make_edit_replay(o.edit_replay, model->hparams().n_vocab);
    results.edit_renamed = edit.renamed;
    results.edit = measure_edit_replay(*model, pool, edit, o.repetitions, o.model.kv_cache_type());
  }
  record_run(o, results, load_between(started, sample_cpu_time()));
  measure_bandwidth(*model, o, pool, results);
  if (o.json) {
    print_bench_json(o, *model, results);
  } else {
    print_bench_text(o, *model, results);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure prompt processing (pp) and generation (tg) speed and the roofline fraction");
  add_bench_options(cmd, *o);
  cmd->callback([o, cmd] { run_bench(*cmd, *o); });
}

}  // namespace strata::cli
