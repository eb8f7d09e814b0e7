// `strata bench`: prompt-processing and generation speed, the weight bytes each generated token
// reads, the measured read bandwidth of the memory the weights live in (RAM, or the GPU's memory
// for a model on a GPU), and the fraction of that roofline reached.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "cli/commands.h"
#include "cli/expert_profile.h"
#include "cli/model_options.h"
#include "runtime/session.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"
#include "util/memory_bandwidth.h"
#include "util/profiler.h"

#ifdef STRATA_HAVE_VULKAN
#include "backend/vulkan/bandwidth_probe.h"
#include "backend/vulkan/gpu_model.h"
#endif

namespace strata::cli {
namespace {

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

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    int n_prompt = 512;
    int n_gen = 128;
    int depth = 0;
    int repetitions = 3;
    int batch = 512;
    bool json = false;
    bool skip_bandwidth = false;
    bool profile = false;
    std::string expert_profile;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure prompt processing (pp) and generation (tg) speed and the roofline fraction");
  add_model_options(cmd, o->model);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens for pp (0: skip)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens for tg (0: skip)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--depth", o->depth,
                  "Tokens already in the context when tg starts (decode speed at long context)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-r,--repetitions", o->repetitions, "Repetitions of each test")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("-b,--batch", o->batch, "Prompt tokens per forward batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_flag("--no-bandwidth", o->skip_bandwidth,
                "Skip the bandwidth measurement (RAM, or the GPU's memory with --device)");
  cmd->add_option("--expert-profile", o->expert_profile,
                  "Write how often the benchmark prompt's tokens selected each expert (one more "
                  "untimed pp run) to this file, for strata plan --profile");
  cmd->add_flag("--profile", o->profile,
                "After the timed runs, one more pp and tg run each with a per-op time profile");
  cmd->callback([o, cmd] {
    STRATA_CHECK(o->n_prompt > 0 || o->n_gen > 0, "nothing to measure: -p and -n are both 0");
    STRATA_CHECK(o->expert_profile.empty() || o->n_prompt > 0,
                 "--expert-profile records the prompt's routing: it needs -p > 0");
    apply_cpu_plan(*cmd, o->model,
                   std::max<int64_t>({o->n_prompt, int64_t{o->depth} + o->n_gen, 1}));
    auto model = load_model(o->model);
    const ModelHParams& hp = model->hparams();
    STRATA_CHECK(o->expert_profile.empty() || hp.n_expert > 0,
                 "--expert-profile: {} has no routed experts", o->model.path);
    const int threads = o->model.thread_count();
    ThreadPool pool(threads);
    const int64_t ctx = std::max<int64_t>({o->n_prompt, int64_t{o->depth} + o->n_gen, 1});
    Session session(*model, ctx, o->model.kv_cache_type(), pool);
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(hp.n_vocab - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(std::max(o->n_prompt, 1)));
    for (auto& t : prompt) t = token(rng);
    std::vector<float> logits;

    // Warm-up: the whole prompt once, untimed (as llama-bench does): it faults in the weights
    // (mmap) and every expert the prompt reaches, and sizes the scratch buffers. A 64-token
    // warm-up left the first timed pp run 3-7% slower than the next ones.
    log::info("warming up");
    session.eval(prompt, false, logits, o->batch);
    session.reset();

    auto run_pp = [&] {
      session.reset();
      const auto start = std::chrono::steady_clock::now();
      session.eval(prompt, false, logits, o->batch);
      return seconds_since(start);
    };
    std::vector<double> pp, tg;
    for (int r = 0; r < o->repetitions && o->n_prompt > 0; ++r) {
      pp.push_back(o->n_prompt / run_pp());
      log::info("pp{} run {}: {:.2f} tok/s", o->n_prompt, r + 1, pp.back());
    }
    OpProfile pp_profile;
    nlohmann::json prompt_timeline;  // the last prompt batch of a hybrid plan: which path ran
    if (o->profile && o->n_prompt > 0) {
#ifdef STRATA_HAVE_VULKAN
      vk::set_gpu_timestamps(*model, true);  // the profile runs only: timed runs stay untouched
#endif
      pp_profile = profile_of(run_pp, o->n_prompt);
#ifdef STRATA_HAVE_VULKAN
      if (const vk::HybridTimeline* t = vk::hybrid_timeline(*model);
          t && (!t->layers.empty() || !t->uploads.empty())) {
        prompt_timeline = hybrid_timeline_json(*t);
      }
      vk::set_gpu_timestamps(*model, false);
#endif
    }
    if (!o->expert_profile.empty()) {
      session.stats().expert_counts.assign(static_cast<size_t>(hp.n_layer * hp.n_expert), 0);
      run_pp();
      write_expert_profile(o->expert_profile, o->model.path, hp, session.stats().expert_counts,
                           o->n_prompt, 1);
      session.stats().expert_counts.clear();  // stop counting
      log::info("expert selections of the {}-token prompt written to {}", o->n_prompt,
                o->expert_profile);
    }
    // tg: single-token steps starting at position `depth` (filled once, untimed). Each run
    // starts from a snapshot there (hybrid models cannot truncate their recurrent state).
    session.reset();
    if (o->n_gen > 0 && o->depth > 0) {
      log::info("filling the context to depth {}", o->depth);
      std::vector<int32_t> fill(static_cast<size_t>(o->depth));
      for (auto& t : fill) t = token(rng);
      session.eval(fill, false, logits, o->batch);
    }
    const SessionSnapshot at_depth = session.snapshot();
    auto run_tg = [&] {
      session.restore(at_depth);
      int32_t next = token(rng);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < o->n_gen; ++i) {
        session.eval(std::span<const int32_t>(&next, 1), false, logits);
        next =
            static_cast<int32_t>((int64_t{next} * 7919 + 13) % hp.n_vocab);  // cheap, deterministic
      }
      return seconds_since(start);
    };
    int64_t experts_before = 0, experts_after = 0;
    for (int r = 0; r < o->repetitions && o->n_gen > 0; ++r) {
      experts_before = session.stats().distinct_experts;
      tg.push_back(o->n_gen / run_tg());
      experts_after = session.stats().distinct_experts;
      log::info("tg{} run {}: {:.2f} tok/s", o->n_gen, r + 1, tg.back());
    }

    // Where a decode step goes: one more (untimed) tg run with the per-op profile on.
    OpProfile tg_profile;
#ifdef STRATA_HAVE_VULKAN
    if (o->profile) vk::set_gpu_timestamps(*model, true);
#endif
    if (o->profile && o->n_gen > 0) tg_profile = profile_of(run_tg, o->n_gen);
    // The last decode step on a GPU: the CPU's experts of a hybrid plan, the GPU's segments.
    nlohmann::json timeline;
#ifdef STRATA_HAVE_VULKAN
    vk::set_gpu_timestamps(*model, false);
    if (const vk::HybridTimeline* t = vk::hybrid_timeline(*model);
        o->profile && t && (!t->layers.empty() || !t->segments.empty() || !t->stages.empty())) {
      timeline = hybrid_timeline_json(*t);
    }
#endif

    // Bytes one generated token reads: dense weights, the experts that ran, and the KV cache at
    // the average position of the tg run.
    const double experts_per_token =
        o->n_gen > 0 ? static_cast<double>(experts_after - experts_before) / o->n_gen : 0.0;
    const double expert_bytes = experts_per_token * static_cast<double>(model->expert_bytes());
    const double kv_bytes = average_kv_positions_read(model->hparams(), o->depth, o->n_gen) *
                            static_cast<double>(session.kv_cache().bytes_per_position());
    const double state_bytes = static_cast<double>(model->recurrent_bytes_per_token());
    const double bytes_per_token =
        static_cast<double>(model->dense_bytes_per_token()) + expert_bytes + kv_bytes + state_bytes;

    // The roofline is the bandwidth of the memory the weights are read from.
    BandwidthMeasurement bw;
    std::string device = "cpu";
    double upload_gbps = 0;
#ifdef STRATA_HAVE_VULKAN
    if (vk::Device* gpu = vk::gpu_device(*model)) {
      device = gpu->label();
      if (!o->skip_bandwidth) {
        log::info("measuring the read and upload bandwidth of {}", device);
        const vk::GpuBandwidth g = vk::measure_gpu_bandwidth(*gpu);
        bw.read_gbps = g.read_gbps;
        upload_gbps = g.upload_gbps;
      }
    }
#endif
    const bool on_gpu = device != "cpu";
    if (!o->skip_bandwidth && !on_gpu) {
      log::info("measuring RAM read bandwidth with {} threads", threads);
      bw = measure_read_bandwidth(pool, int64_t{1} << 30, 3);
    }
    const Stat pp_stat = stat_of(pp), tg_stat = stat_of(tg);
    const double roofline = bw.read_gbps > 0 && tg_stat.mean > 0
                                ? tg_stat.mean * bytes_per_token / (bw.read_gbps * 1e9)
                                : 0.0;

    if (o->json) {
      nlohmann::json j = {
          {"model", o->model.path},
          {"architecture", hp.arch},
          {"layers", hp.n_layer},
          {"threads", threads},
          {"device", device},
          {"load", o->model.load},
          {"kv_type", o->model.kv_type},
          {"cpu", cpu_features().describe()},
          {"pp",
           {{"tokens", o->n_prompt},
            {"tok_per_s", pp_stat.mean},
            {"stddev", pp_stat.stddev},
            {"runs", pp}}},
          {"tg",
           {{"tokens", o->n_gen},
            {"depth", o->depth},
            {"tok_per_s", tg_stat.mean},
            {"stddev", tg_stat.stddev},
            {"runs", tg}}},
          {"bytes_per_token", bytes_per_token},
          {"dense_bytes_per_token", model->dense_bytes_per_token()},
          {"experts_per_token", experts_per_token},
          {"expert_bytes", model->expert_bytes()},
          {"kv_bytes_per_token", kv_bytes},
          {"recurrent_state_bytes_per_token", state_bytes},
          {on_gpu ? "gpu_read_gbps" : "ram_read_gbps", bw.read_gbps},
          {"roofline_fraction", roofline},
      };
      if (on_gpu) j["gpu_upload_gbps"] = upload_gbps;
      if (!pp_profile.ops.empty()) j["prefill_profile"] = profile_json(pp_profile);
      if (!tg_profile.ops.empty()) j["decode_profile"] = profile_json(tg_profile);
      if (!timeline.is_null()) j["hybrid_timeline"] = timeline;
      if (!prompt_timeline.is_null()) j["hybrid_prompt_timeline"] = prompt_timeline;
      fmt::print("{}\n", j.dump(2));
      return;
    }
    fmt::print(
        "model      {} ({}, {} layers{})\n", o->model.path, hp.arch, hp.n_layer,
        hp.n_expert ? fmt::format(", {} experts / {} used", hp.n_expert, hp.n_expert_used) : "");
    if (on_gpu) {
      fmt::print("setup      {}, KV {} on the device, {} host threads\n", device, o->model.kv_type,
                 threads);
    } else {
      fmt::print("setup      {} threads, load {}, KV {}, CPU {}\n", threads, o->model.load,
                 o->model.kv_type, cpu_features().describe());
    }
    if (o->n_prompt > 0)
      fmt::print("pp{:<8} {:8.2f} ± {:.2f} tok/s  ({} runs)\n", o->n_prompt, pp_stat.mean,
                 pp_stat.stddev, pp.size());
    if (o->n_gen > 0) {
      fmt::print("tg{:<8} {:8.2f} ± {:.2f} tok/s  ({} runs{})\n", o->n_gen, tg_stat.mean,
                 tg_stat.stddev, tg.size(),
                 o->depth ? fmt::format(", from depth {}", o->depth) : "");
      fmt::print("bytes/tok  {}  (dense {} + {:.1f} experts x {} + KV {}{})\n",
                 format_bytes(static_cast<uint64_t>(bytes_per_token)),
                 format_bytes(static_cast<uint64_t>(model->dense_bytes_per_token())),
                 experts_per_token, format_bytes(static_cast<uint64_t>(model->expert_bytes())),
                 format_bytes(static_cast<uint64_t>(kv_bytes)),
                 state_bytes > 0 ? fmt::format(" + recurrent state {} read+written",
                                               format_bytes(static_cast<uint64_t>(state_bytes)))
                                 : "");
    }
    if (bw.read_gbps > 0 && on_gpu) {
      fmt::print("GPU read   {:.1f} GB/s (upload {:.1f} GB/s)\n", bw.read_gbps, upload_gbps);
    } else if (bw.read_gbps > 0) {
      fmt::print("RAM read   {:.1f} GB/s ({} threads)\n", bw.read_gbps, threads);
    }
    if (roofline > 0) {
      fmt::print("roofline   {:.1f}% (tg x bytes/tok = {:.1f} GB/s of {:.1f} GB/s)\n",
                 100 * roofline, tg_stat.mean * bytes_per_token / 1e9, bw.read_gbps);
    }
    if (!pp_profile.ops.empty()) print_profile("prefill", pp_profile);
    if (!tg_profile.ops.empty()) print_profile("decode step", tg_profile);
    if (!prompt_timeline.is_null()) print_prompt_paths(prompt_timeline);
    if (!timeline.is_null()) print_hybrid_timeline(timeline);
  });
}

}  // namespace strata::cli
