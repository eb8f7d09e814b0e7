#include "backend/vulkan/cpu_experts.h"

#include <chrono>
#include <cstring>
#include <span>

#include "model/decoder.h"
#include "util/error.h"
#include "util/profiler.h"

namespace strata::vk {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuExperts::CpuExperts(Device& device, const ModelHParams& hp) : device_(device), hp_(hp) {}

void CpuExperts::begin_step(int64_t n) {
  tasks_.clear();
  last_hand_over_ = -1;
  step_tokens_ = n;
}

void CpuExperts::ensure(int64_t n) {
  if (n <= tokens_) return;
  const int64_t cap = std::max(n, 2 * tokens_);
  const auto host = [&](int64_t words, const char* what) {
    return device_.allocate(static_cast<uint64_t>(std::max<int64_t>(words, 1)) * 4,
                            MemoryKind::host, fmt::format("{} for {} tokens", what, cap));
  };
  const int64_t k = std::max<int64_t>(hp_.n_expert_used, 1);
  ids_ = host(cap * k, "expert ids handed to the CPU");
  weights_ = host(cap * k, "expert weights handed to the CPU");
  x_ = host(cap * hp_.n_embd, "FFN inputs handed to the CPU");
  partial_ = host(cap * hp_.n_embd, "the CPU experts' outputs");
  tokens_ = cap;
}

void CpuExperts::hand_over(GpuOps& ops, int64_t il, const RamExperts& ram, const Buffer& ids,
                           uint64_t ids_offset, const Buffer& expert_weights, const Buffer& x,
                           int64_t n) {
  STRATA_CHECK(n == step_tokens_, "CpuExperts: {} tokens in a step of {}", n, step_tokens_);
  ensure(n);  // only models with experts in RAM hold these host buffers
  const auto pairs_bytes = static_cast<uint64_t>(n * hp_.n_expert_used) * 4;
  ops.cmd.copy(ids, ids_offset, ids_, 0, pairs_bytes);
  ops.cmd.copy(expert_weights, 0, weights_, 0, pairs_bytes);
  ops.cmd.copy(x, 0, x_, 0, static_cast<uint64_t>(n * hp_.n_embd) * 4);
  Task t;
  t.layer = il;
  t.n = n;
  t.ram = &ram;
  t.task = ops.cmd.host_task();
  last_hand_over_ = static_cast<int>(tasks_.size());
  tasks_.push_back(t);
}

void CpuExperts::take_back(GpuOps& ops, uint64_t out, int64_t n) {
  STRATA_CHECK(last_hand_over_ >= 0 && tasks_[static_cast<size_t>(last_hand_over_)].gpu_segment < 0,
               "CpuExperts::take_back without a hand-over");
  Task& t = tasks_[static_cast<size_t>(last_hand_over_)];
  t.gpu_segment = ops.cmd.after_host(t.task);
  ops.add(out, partial_.address(), n * hp_.n_embd);
}

void CpuExperts::run_tasks(CommandList& cmd, ThreadPool& pool) {
  for (const Task& t : tasks_) {
    compute(cmd, t, pool);
    cmd.task_done(t.task);
  }
}

void CpuExperts::compute(CommandList& cmd, const Task& t, ThreadPool& pool) {
  static profile::Slot slot("gpu: CPU experts");
  const RamExperts& ram = *t.ram;
  // The RAM stacks hold ram.count experts; the selections of the others go to one more place,
  // which the CPU skips.
  const int64_t skipped = static_cast<int64_t>(ram.slot.size());
  // The model's parameters (its expert activation above all); the weights come from the GPU's
  // router, already scaled.
  MoeParams p = moe_params(hp_);
  p.n_expert = skipped + 1;
  std::vector<bool> included(static_cast<size_t>(p.n_expert), true);
  included.back() = false;
  const auto* ids = static_cast<const int32_t*>(ids_.mapped());
  const auto* w = static_cast<const float*>(weights_.mapped());
  const auto* x = static_cast<const float*>(x_.mapped());
  auto* partial = static_cast<float*>(partial_.mapped());
  CpuExpertSpan span;
  span.layer = t.layer;
  const double t0 = now_ms();
  span.start_ms = t0 - step_start_ms_;
  cmd.wait_for_gpu(t.task);
  const double t1 = now_ms();
  span.gpu_busy_at_start = !cmd.segment_finished(t.gpu_segment);
  {
    profile::Scope scope(slot);
    const auto pairs = static_cast<size_t>(t.n * p.n_expert_used);
    chosen_.resize(pairs);
    for (size_t i = 0; i < pairs; ++i) {
      STRATA_CHECK(ids[i] >= 0 && ids[i] < skipped, "CPU experts: expert id {} of {} experts",
                   ids[i], skipped);
      const int32_t place = ram.slot[static_cast<size_t>(ids[i])];
      chosen_[i] = place >= 0 ? place : static_cast<int32_t>(skipped);
      span.pairs += place >= 0;
    }
    moe_experts_block(ram.weights(), p, x, t.n, chosen_, std::span(w, pairs), &included, partial,
                      workspace_, pool);
  }
  span.gpu_busy_at_end = !cmd.segment_finished(t.gpu_segment);
  span.wait_ms = t1 - t0;
  span.cpu_ms = now_ms() - t1;
  timeline_.layers.push_back(span);
}

void CpuExperts::run_step(CommandList& cmd, ThreadPool& pool) {
  timeline_ = HybridTimeline{};
  const double start = now_ms();
  step_start_ms_ = start;
  try {
    run_tasks(cmd, pool);
  } catch (...) {
    tasks_.clear();
    try {  // release the GPU; the first error is the one to report
      cmd.abandon_tasks();
      cmd.wait();
    } catch (const Error&) {
    }
    throw;
  }
  tasks_.clear();
  cmd.wait();
  timeline_.step_ms = now_ms() - start;
  const std::vector<CommandList::SegmentTime> times = cmd.segment_times();
  for (size_t i = 0; i < times.size(); ++i) {
    timeline_.segments.push_back({0, static_cast<int>(i), times[i].start_ms, times[i].end_ms});
  }
}

}  // namespace strata::vk
