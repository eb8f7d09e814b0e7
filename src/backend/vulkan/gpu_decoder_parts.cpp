#include "backend/vulkan/gpu_decoder_parts.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "model/decoder.h"
#include "model/layer_spec.h"
#include "plan/prompt_experts.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

namespace strata::vk {
// ---- feed-forward -----------------------------------------------------------------------

namespace {

// The experts on_device names (all of them when it is empty).
std::vector<int32_t> held_experts(const ExpertsOnDevice& on_device, int64_t n_expert) {
  std::vector<int32_t> held;
  for (int64_t e = 0; e < n_expert; ++e)
    if (on_device.empty() || on_device[static_cast<size_t>(e)])
      held.push_back(static_cast<int32_t>(e));
  return held;
}

}  // namespace

const ExpertsOnDevice& layer_experts(const ExpertPlacement& placement, int64_t il) {
  static const ExpertsOnDevice all;
  return il < static_cast<int64_t>(placement.size()) ? placement[static_cast<size_t>(il)] : all;
}

uint64_t ffn_upload_bytes(const DenseFfnWeights& dense, const MoeFfnWeights& moe,
                          const ModelHParams& hp, const ExpertsOnDevice& on_device) {
  uint64_t total = 0;
  for (const ops::WeightMatrix* w : {&dense.gate, &dense.up, &dense.down, &moe.router,
                                     &moe.shared.gate, &moe.shared.up, &moe.shared.down})
    total += upload_bytes(*w);
  const auto held = static_cast<int64_t>(held_experts(on_device, hp.n_expert).size());
  total += upload_bytes(moe.gate_exps, hp.n_ff_exp, held) +
           upload_bytes(moe.up_exps, hp.n_ff_exp, held) +
           upload_bytes(moe.down_exps, hp.n_embd, held);
  if (!on_device.empty() && moe.gate_exps.data && held < hp.n_expert)
    total += 2 * aligned_bytes(hp.n_expert * 4);  // slots of the held and of the RAM experts
  if (moe.shared_gate) total += aligned_bytes(static_cast<uint64_t>(hp.n_embd) * 4);
  total +=
      upload_bytes(moe.router_bias, hp.n_expert) + upload_bytes(moe.selection_bias, hp.n_expert);
  total += upload_bytes(moe.gate_bias, hp.n_expert * hp.n_ff_exp) +
           upload_bytes(moe.up_bias, hp.n_expert * hp.n_ff_exp) +
           upload_bytes(moe.down_bias, hp.n_expert * hp.n_embd);
  return total;
}

GpuFfnWeights upload_ffn(DeviceWeights& w, const DenseFfnWeights& dense, const MoeFfnWeights& moe,
                         const ModelHParams& hp, int64_t il, const ExpertsOnDevice& on_device) {
  const auto name = [&](LayerTensor t) { return layer_tensor_name(t, il); };
  const auto optional = [&](const ops::WeightMatrix& x, LayerTensor t) {
    return x.data ? w.matrix(x, name(t)) : GpuMatrix{};
  };
  GpuFfnWeights l;
  l.gate = optional(dense.gate, LayerTensor::ffn_gate);
  l.up = optional(dense.up, LayerTensor::ffn_up);
  l.down = optional(dense.down, LayerTensor::ffn_down);
  l.router = optional(moe.router, LayerTensor::router);
  l.router_bias = w.floats(moe.router_bias, hp.n_expert, name(LayerTensor::router_bias));
  l.selection_bias = w.floats(moe.selection_bias, hp.n_expert, name(LayerTensor::selection_bias));
  l.gate_bias =
      w.floats(moe.gate_bias, hp.n_expert * hp.n_ff_exp, name(LayerTensor::gate_exps_bias));
  l.up_bias = w.floats(moe.up_bias, hp.n_expert * hp.n_ff_exp, name(LayerTensor::up_exps_bias));
  l.down_bias = w.floats(moe.down_bias, hp.n_expert * hp.n_embd, name(LayerTensor::down_exps_bias));
  if (moe.gate_exps.data) {
    STRATA_CHECK(on_device.empty() || static_cast<int64_t>(on_device.size()) == hp.n_expert,
                 "{}: a placement of {} experts for {} experts", name(LayerTensor::gate_exps),
                 on_device.size(), hp.n_expert);
    const std::vector<int32_t> held = held_experts(on_device, hp.n_expert);
    l.held_experts = static_cast<int64_t>(held.size());
    if (!held.empty()) {  // each matrix describes one expert; the kernels step by expert
      l.gate_exps = w.experts(moe.gate_exps, hp.n_ff_exp, held, name(LayerTensor::gate_exps));
      l.up_exps = w.experts(moe.up_exps, hp.n_ff_exp, held, name(LayerTensor::up_exps));
      l.down_exps = w.experts(moe.down_exps, hp.n_embd, held, name(LayerTensor::down_exps));
    }
    if (l.held_experts < hp.n_expert) {
      std::vector<int32_t> slots(static_cast<size_t>(hp.n_expert), -1);
      for (size_t i = 0; i < held.size(); ++i)
        slots[static_cast<size_t>(held[i])] = static_cast<int32_t>(i);
      l.expert_slots = w.ints(slots.data(), hp.n_expert, fmt::format("blk.{}.expert slots", il));
      std::vector<bool> in_ram(static_cast<size_t>(hp.n_expert), true);
      for (int32_t e : held) in_ram[static_cast<size_t>(e)] = false;
      const ops::WeightMatrix* stacks[3] = {&moe.gate_exps, &moe.up_exps, &moe.down_exps};
      const int64_t rows[3] = {hp.n_ff_exp, hp.n_ff_exp, hp.n_embd};
      const LayerTensor names[3] = {LayerTensor::gate_exps, LayerTensor::up_exps,
                                    LayerTensor::down_exps};
      for (int i = 0; i < 3; ++i) {  // uploads compute them on the GPU too
        const GpuMatrix m{stacks[i]->type, 0, rows[i], stacks[i]->cols, stacks[i]->row_bytes};
        check_gpu_matrix(m, name(names[i]).c_str());
      }
      l.ram =
          place_ram_experts(w, moe, hp, std::move(in_ram), fmt::format("blk.{}.ffn_*_exps", il));
      // Where an upload puts each RAM expert: its place among them, in expert order.
      std::vector<int32_t> ram_slots(static_cast<size_t>(hp.n_expert), -1);
      for (size_t e = 0, next = 0; e < ram_slots.size(); ++e)
        if (l.ram.in_ram[e]) ram_slots[e] = static_cast<int32_t>(next++);
      l.ram_slots =
          w.ints(ram_slots.data(), hp.n_expert, fmt::format("blk.{}.RAM expert slots", il));
    }
  }
  l.shared_gate_w = optional(moe.shared.gate, LayerTensor::shexp_gate);
  l.shared_up = optional(moe.shared.up, LayerTensor::shexp_up);
  l.shared_down = optional(moe.shared.down, LayerTensor::shexp_down);
  if (moe.shared_gate) {
    l.shared_gate_inp = GpuMatrix{
        GgmlType::F32, w.floats(moe.shared_gate, hp.n_embd, name(LayerTensor::shexp_router)), 1,
        hp.n_embd, hp.n_embd * 4};
  }
  return l;
}

GpuFfn::GpuFfn(Device& device, const ModelHParams& hp, int64_t shared_ff)
    : device_(device),
      hp_(hp),
      shared_ff_(shared_ff),
      hidden_in_(device, "FFN hidden states"),
      shared_in_(device, "shared expert hidden states"),
      cpu_(device, hp) {
  if (const char* mode = std::getenv("STRATA_PROMPT_EXPERTS"); mode && *mode) {
    const std::string m = mode;
    STRATA_CHECK(m == "gpu" || m == "cpu" || m == "auto",
                 "STRATA_PROMPT_EXPERTS={}: expected gpu, cpu or auto", m);
    upload_mode_ =
        m == "gpu" ? UploadMode::gpu : (m == "cpu" ? UploadMode::cpu : UploadMode::automatic);
  }
}

bool GpuFfn::uploads(const GpuFfnWeights& l, int64_t n) const {
  if (!l.ram || !l.ram.pinned || n <= kMaxDecodeTokens) return false;
  if (upload_mode_ != UploadMode::automatic) return upload_mode_ == UploadMode::gpu;
  if (device_.info().is_cpu) return false;  // the "upload" would be the CPU copying to itself
  const ModelHParams& hp = hp_;
  plan::RamExpertsBatch b;
  b.n_tokens = n;
  b.n_expert = hp.n_expert;
  b.n_expert_used = hp.n_expert_used;
  b.ram_experts = l.ram.count;
  b.expert_bytes = static_cast<double>(l.ram.total_bytes()) / static_cast<double>(l.ram.count);
  b.flops_per_pair = 2.0 * 3.0 * static_cast<double>(hp.n_embd * hp.n_ff_exp);
  plan::RamExpertsMachine m;
  m.cpu_cores = physical_core_count();
  m.avx512 = cpu_features().has_avx512_level();
  return plan::choose_ram_experts_path(b, m).upload();
}

void GpuFfn::begin_step(int64_t n) {
  cpu_.begin_step(n);
  uploads_.clear();
  prefetched_layer_ = prefetched_transfer_ = -1;
  if (n <= tokens_) return;
  const ModelHParams& hp = hp_;
  const int64_t cap = std::max(n, 2 * tokens_);
  const int64_t k = std::max<int64_t>(hp.n_expert_used, 1);
  const int64_t ff = std::max({hp.n_ff, hp.n_ff_exp * k, shared_ff_});
  const auto f32 = [&](int64_t count, const char* what) {
    return device_.allocate(static_cast<uint64_t>(std::max<int64_t>(count, 1)) * 4,
                            MemoryKind::device, fmt::format("{} for {} tokens", what, cap));
  };
  hidden_ = f32(cap * ff, "FFN hidden states");
  hidden2_ = f32(cap * ff, "FFN hidden states");
  down_ = f32(cap * k * hp.n_embd, "expert outputs");
  router_ = f32(cap * std::max<int64_t>(hp.n_expert, 1), "router logits");
  ids_all_ = f32(hp.n_layer * cap * k, "expert ids");
  ids_host_ = device_.allocate(static_cast<uint64_t>(hp.n_layer * cap * k) * 4, MemoryKind::host,
                               fmt::format("expert ids for {} tokens", cap));
  weights_ = f32(cap * k, "expert weights");
  shared_ = f32(cap * std::max(hp.n_embd, ff), "shared expert output");
  shared_logit_ = f32(cap, "shared expert gate");
  order_ = f32(cap * k, "expert order");
  tiles_ = f32(1 + 3 * moe_tiles_capacity(cap * k, hp.n_expert + 1),
               "expert tiles");  // + experts in RAM
  tokens_ = cap;
}

void GpuFfn::release_retired() {
  hidden_in_.release_retired();
  shared_in_.release_retired();
  retired_.clear();
}

void GpuFfn::give_up_uploads(const Error& e) {
  log::warn("{}; prompt batches compute their experts in RAM on the CPU from now on", e.what());
  // The recording may still name them: retired, not freed.
  retired_.push_back(std::move(uploaded_));
  retired_.push_back(std::move(staged_down_));
  upload_mode_ = UploadMode::cpu;
}

bool GpuFfn::make_room(const GpuFfnWeights& l) {
  const auto grow = [&](Buffer& b, uint64_t bytes, const std::string& what) {
    if (b.size() >= bytes) return true;
    retired_.push_back(std::move(b));  // the recording may still name it
    try {
      b = device_.allocate(bytes, MemoryKind::device, what);
    } catch (const Error& e) {  // the plan filled the GPU: prompt batches stay on the CPU
      give_up_uploads(e);
      return false;
    }
    return true;
  };
  const uint64_t bytes = std::max(l.ram.total_bytes(), largest_upload_);
  return grow(uploaded_, bytes,
              fmt::format("a device stack for {} of a layer's experts in RAM (the largest)",
                          format_bytes(bytes))) &&
         grow(staged_down_, static_cast<uint64_t>(tokens_ * hp_.n_expert_used * hp_.n_embd) * 4,
              "uploaded experts' outputs");
}

int GpuFfn::record_upload(GpuOps& ops, const GpuFfnWeights& l, int64_t il, bool prefetch) {
  uploads_.push_back({il, l.ram.count, l.ram.total_bytes(), prefetch});
  return ops.cmd.transfer(*l.ram.pinned, 0, uploaded_, 0, l.ram.total_bytes());
}

namespace {

// One kind of expert product for a layer: the stacks it reads, where each expert sits in them
// (slots: -1 gives zeros; 0: every expert in order) and how many there are.
struct ExpertStacks {
  GpuMatrix gate, up, down;
  uint64_t slots = 0;
  int64_t count = 0;
};

}  // namespace

void GpuFfn::record(GpuOps& ops, const GpuFfnWeights& l, int64_t il, ActivationInput& input,
                    const Buffer& x, uint64_t out, int64_t n, const GpuFfnWeights* next) {
  const ModelHParams& hp = hp_;
  // Prompt batches multiply each expert's rows with all its tokens at once (grouped on the
  // device, the same bits as pair by pair); decode steps go pair by pair.
  const bool grouped = n > kMaxDecodeTokens && hp.n_expert <= kMaxGroupedExperts;
  // silu(gate x) * (up x) into `dst` for n rows.
  const auto dense_gate_up = [&](const GpuMatrix& gate, const GpuMatrix& up, int64_t rows,
                                 uint64_t dst, uint64_t spare) {
    const RoundedRows xg = input.for_weights(gate.type), xu = input.for_weights(up.type);
    if (gate.type == up.type) {
      ops.matmul_swiglu(gate, up, xg.address, xg.stride, dst, gate.rows, rows);
      return;
    }
    ops.matmul(gate, xg.address, xg.stride, dst, gate.rows, rows);
    ops.matmul(up, xu.address, xu.stride, spare, gate.rows, rows);
    ops.swiglu(dst, spare, rows * gate.rows);
  };
  if (!l.router.address) {  // dense SwiGLU FFN
    dense_gate_up(l.gate, l.up, n, hidden_.address(), hidden2_.address());
    ActivationInput hidden(ops, hidden_in_, hidden_.address(), l.gate.rows, n, l.gate.rows);
    const RoundedRows h = hidden.for_weights(l.down.type);
    ops.matmul(l.down, h.address, h.stride, out, hp.n_embd, n);
    return;
  }
  const int64_t k = hp.n_expert_used, ff = hp.n_ff_exp, pairs = n * k;
  const uint64_t ids_offset = static_cast<uint64_t>(il * n * k) * 4;
  const uint64_t ids = ids_all_.address() + ids_offset;
  // The pairs of the experts `e` holds through their down product into y ([pairs][n_embd]); the
  // other pairs give zeros.
  const auto routed = [&](const ExpertStacks& e, uint64_t y) {
    // With a slot map the groups are the experts' slots plus one for the others.
    const int64_t buckets = e.slots ? e.count + 1 : std::max<int64_t>(hp.n_expert, 1);
    const int64_t max_tiles = moe_tiles_capacity(pairs, buckets);
    if (grouped) {
      ops.moe_group(ids, pairs, hp.n_expert, order_.address(), tiles_.address(), e.slots,
                    e.slots ? e.count : 0);
    }
    const auto product = [&](const GpuMatrix& w, const GpuMatrix* up, const RoundedRows& in,
                             int64_t x_div, uint64_t dst) {
      if (grouped) {
        ops.matmul_expert_tiles(w, up, tiles_.address(), order_.address(), max_tiles, in.address,
                                in.stride, x_div, dst, w.rows);
      } else {
        ops.matmul_experts(w, up, ids, in.address, in.stride, x_div, dst, w.rows, pairs, e.slots);
      }
    };
    const RoundedRows xg = input.for_weights(e.gate.type), xu = input.for_weights(e.up.type);
    // gpt-oss's experts add biases before their clamped activation: no fused kernel for that.
    const bool oai = hp.expert_activation == ExpertActivation::swiglu_oai;
    if (e.gate.type == e.up.type && !l.gate_bias && !oai) {
      product(e.gate, &e.up, xg, k, hidden_.address());
    } else {
      product(e.gate, nullptr, xg, k, hidden_.address());
      product(e.up, nullptr, xu, k, hidden2_.address());
      ops.expert_bias(hidden_.address(), l.gate_bias, ids, e.slots, pairs, ff);
      ops.expert_bias(hidden2_.address(), l.up_bias, ids, e.slots, pairs, ff);
      if (oai) {
        ops.swiglu_oai(hidden_.address(), hidden2_.address(), pairs * ff);
      } else {
        ops.swiglu(hidden_.address(), hidden2_.address(), pairs * ff);
      }
    }
    ActivationInput hidden(ops, hidden_in_, hidden_.address(), ff, pairs, ff);
    const RoundedRows h = hidden.for_weights(e.down.type);
    product(e.down, nullptr, h, 1, y);
    ops.expert_bias(y, l.down_bias, ids, e.slots, pairs, hp.n_embd);
  };
  // RAM experts uploaded for this batch: one DMA from their host-visible memory on the transfer
  // queue, recorded by the previous layer where it could.
  const bool prefetched = prefetched_layer_ == il;
  const bool upload = prefetched || (uploads(l, n) && make_room(l));
  const int transfer = prefetched ? prefetched_transfer_
                       : upload   ? record_upload(ops, l, il, false)
                                  : -1;

  const RoundedRows xr = input.for_weights(l.router.type);
  ops.matmul(l.router, xr.address, xr.stride, router_.address(), hp.n_expert, n);
  ops.add_bias(router_.address(), l.router_bias, n, hp.n_expert);
  MoeRouting routing;
  routing.renormalize = hp.expert_weights_norm;
  routing.sigmoid_gating = hp.expert_gating == ExpertGating::sigmoid;
  routing.selection_bias = l.selection_bias;
  routing.scale = hp.expert_weights_scale;
  ops.moe_route(router_.address(), ids, weights_.address(), n, hp.n_expert, k, routing);
  const bool cpu_computes = l.ram && !upload;
  if (cpu_computes) cpu_.hand_over(ops, il, l.ram, ids_all_, ids_offset, weights_, x, n);
  if (l.held_experts > 0) {
    routed({l.gate_exps, l.up_exps, l.down_exps, l.expert_slots, l.held_experts}, down_.address());
  } else {  // every expert of the layer is in RAM
    ops.cmd.fill(down_, 0, static_cast<uint64_t>(pairs * hp.n_embd) * 4, 0);
  }
  uint64_t shared = 0, shared_logit = 0;
  if (l.shared_gate_w.address) {
    const int64_t sff = l.shared_gate_w.rows;
    // hidden2 is free again (the routed SwiGLU is in hidden); shared is the spare.
    dense_gate_up(l.shared_gate_w, l.shared_up, n, hidden2_.address(), shared_.address());
    ActivationInput shared_hidden(ops, shared_in_, hidden2_.address(), sff, n, sff);
    const RoundedRows sh = shared_hidden.for_weights(l.shared_down.type);
    ops.matmul(l.shared_down, sh.address, sh.stride, shared_.address(), hp.n_embd, n);
    shared = shared_.address();
    if (l.shared_gate_inp.address) {  // a plain f32 dot with the states, as on the CPU
      ops.matmul(l.shared_gate_inp, x.address(), hp.n_embd, shared_logit_.address(), 1, n);
      shared_logit = shared_logit_.address();
    }
  }
  if (upload) {
    // Each pair comes from exactly one side (zeros on the other): the sum has a whole-GPU run's
    // bits.
    ops.cmd.after_transfer(transfer);
    const MoeFfnWeights& m = *l.ram.model;
    const uint64_t base = uploaded_.address();
    const uint64_t* bytes = l.ram.bytes;
    const ExpertStacks staged{
        {m.gate_exps.type, base, ff, m.gate_exps.cols, m.gate_exps.row_bytes},
        {m.up_exps.type, base + bytes[0], ff, m.up_exps.cols, m.up_exps.row_bytes},
        {m.down_exps.type, base + bytes[0] + bytes[1], hp.n_embd, m.down_exps.cols,
         m.down_exps.row_bytes},
        l.ram_slots,
        l.ram.count};
    routed(staged, staged_down_.address());
    ops.add(down_.address(), staged_down_.address(), pairs * hp.n_embd);
  }
  // This layer is done with the stack: the next one's copy may start.
  if (next && uploads(*next, n) && make_room(*next)) {
    prefetched_layer_ = il + 1;
    prefetched_transfer_ = record_upload(ops, *next, il + 1, true);
  }
  ops.moe_combine(down_.address(), weights_.address(), out, shared, shared_logit, n, hp.n_embd, k);
  if (cpu_computes) cpu_.take_back(ops, out, n);
}

void GpuFfn::run_step(CommandList& cmd, ThreadPool& pool) {
  try {
    cmd.submit();
  } catch (...) {  // what did go to the queue must not wait for the host forever
    try {
      cmd.abandon_tasks();
    } catch (const Error&) {
    }
    throw;
  }
  cpu_.run_step(cmd, pool);
  timeline_ = cpu_.timeline();
  timeline_.uploads = uploads_;
}

void GpuFfn::record_stats(GpuOps& ops, int64_t n) {
  if (hp_.n_expert == 0 || n == 0) return;
  ops.cmd.copy(ids_all_, 0, ids_host_, 0,
               static_cast<uint64_t>(hp_.n_layer * n * hp_.n_expert_used) * 4);
}

void GpuFfn::add_stats(ForwardStats& stats, int64_t n, int64_t first_layer, int64_t last_layer) {
  const ModelHParams& hp = hp_;
  if (hp.n_expert == 0 || n == 0) return;
  const int64_t k = hp.n_expert_used;
  const auto* ids = static_cast<const int32_t*>(ids_host_.mapped());
  const bool count = static_cast<int64_t>(stats.expert_counts.size()) == hp.n_layer * hp.n_expert;
  for (int64_t il = first_layer; il < last_layer; ++il) {
    std::vector<bool> seen(static_cast<size_t>(hp.n_expert), false);
    for (int64_t i = 0; i < n * k; ++i) {
      const int32_t e = ids[il * n * k + i];
      if (e < 0 || e >= hp.n_expert) continue;
      if (!seen[static_cast<size_t>(e)]) ++stats.distinct_experts;
      seen[static_cast<size_t>(e)] = true;
      if (count) ++stats.expert_counts[static_cast<size_t>(il * hp.n_expert + e)];
    }
  }
}

// ---- keys and values --------------------------------------------------------------------

void KvPlacement::build(std::span<const int32_t> sequence, std::span<const int64_t> position,
                        std::span<const SequenceKv> kv, int64_t kv_layer) {
  const size_t n = sequence.size();
  STRATA_CHECK(n > 0, "GPU forward: a batch without tokens has no KV placement");
  const ops::KvLayerView& first = kv[static_cast<size_t>(sequence[0])][kv_layer];
  key = first.k;
  type = first.type;
  page_size = first.pages ? first.page_size : 0;
  int64_t max_slot = 0, max_capacity = 0;
  slot.resize(n);
  pages.clear();
  page_offset.assign(kv.size(), -1);
  for (size_t t = 0; t < n; ++t) {
    const auto s = static_cast<size_t>(sequence[t]);
    const ops::KvLayerView& view = kv[s][kv_layer];
    STRATA_CHECK(view.k == key && (view.pages ? view.page_size : 0) == page_size,
                 "GPU forward: the sequences of one batch must share one KV cache");
    slot[t] = static_cast<int32_t>(view.slot(position[t]));
    max_slot = std::max<int64_t>(max_slot, slot[t]);
    if (page_size && page_offset[s] < 0) {
      page_offset[s] = static_cast<int32_t>(pages.size());
      const int64_t n_pages = (view.capacity + page_size - 1) / page_size;
      for (int64_t p = 0; p < n_pages; ++p) {
        pages.push_back(view.pages[p]);
        max_slot = std::max<int64_t>(max_slot, (view.pages[p] + 1) * page_size - 1);
      }
    }
    if (!page_size) max_capacity = std::max(max_capacity, view.capacity);
  }
  if (pages.empty()) pages.push_back(0);
  n_slots = max_slot + 1;
  max_slots = page_size ? max_slot + 1 : max_capacity;
}

void GpuStepParams::write(std::span<const int32_t> tokens, std::span<const int64_t> positions,
                          std::span<const int32_t> sequence, const KvPlacement* kv) {
  n_ = static_cast<int64_t>(tokens.size());
  if (n_ > capacity_) {
    capacity_ = std::max(n_, 2 * capacity_);
    params_ = device_.allocate(static_cast<uint64_t>(capacity_) * 5 * 4, MemoryKind::host,
                               "step parameters");
  }
  auto* p = static_cast<int32_t*>(params_.mapped());
  max_positions_ = 0;
  for (int64_t t = 0; t < n_; ++t) {
    const auto i = static_cast<size_t>(t);
    max_positions_ = std::max(max_positions_, positions[i] + 1);
    p[t] = tokens[i];
    p[n_ + t] = static_cast<int32_t>(positions[i]);
    p[2 * n_ + t] = kv ? kv->slot[i] : 0;
    p[3 * n_ + 2 * t] = static_cast<int32_t>(positions[i] + 1);
    p[3 * n_ + 2 * t + 1] =
        kv && kv->page_size ? kv->page_offset[static_cast<size_t>(sequence[i])] : 0;
  }
  const std::vector<int32_t> none = {0};
  const std::vector<int32_t>& pages = kv ? kv->pages : none;
  const auto n_pages = static_cast<int64_t>(pages.size());
  if (n_pages > pages_capacity_) {
    pages_capacity_ = std::max(n_pages, 2 * pages_capacity_);
    pages_ = device_.allocate(static_cast<uint64_t>(pages_capacity_) * 4, MemoryKind::host,
                              "KV page tables");
  }
  std::memcpy(pages_.mapped(), pages.data(), pages.size() * 4);
}

// ---- output head ------------------------------------------------------------------------

GpuOutputHead::GpuOutputHead(Device& device, const ModelHParams& hp, const GpuMatrix& output,
                             uint64_t norm)
    : device_(device),
      hp_(hp),
      output_(output),
      norm_(norm),
      head_in_(device, "output head input") {}

void GpuOutputHead::record(GpuOps& ops, const Buffer& x, std::span<const int32_t> rows) {
  const ModelHParams& hp = hp_;
  const auto n = static_cast<int64_t>(rows.size());
  if (n == 0) return;
  if (n > rows_) {
    const int64_t cap = std::max(n, 2 * rows_);
    selected_ = device_.allocate(static_cast<uint64_t>(cap * hp.n_embd) * 4, MemoryKind::device,
                                 "output head input");
    logits_ =
        device_.allocate(static_cast<uint64_t>(cap * hp.n_vocab) * 4, MemoryKind::device, "logits");
    logits_host_ =
        device_.allocate(static_cast<uint64_t>(cap * hp.n_vocab) * 4, MemoryKind::host, "logits");
    rows_ = cap;
  }
  // Only the rows someone samples from pay for the (large) output matrix.
  const uint64_t row_bytes = static_cast<uint64_t>(hp.n_embd) * 4;
  for (int64_t i = 0; i < n; ++i) {
    ops.cmd.copy(x, static_cast<uint64_t>(rows[static_cast<size_t>(i)]) * row_bytes, selected_,
                 static_cast<uint64_t>(i) * row_bytes, row_bytes);
  }
  ops.rms_norm(selected_.address(), hp.n_embd, norm_, selected_.address(), hp.n_embd, n, hp.n_embd,
               hp.rms_eps);
  ActivationInput head(ops, head_in_, selected_.address(), hp.n_embd, n, hp.n_embd);
  const RoundedRows in = head.for_weights(output_.type);
  ops.matmul(output_, in.address, in.stride, logits_.address(), hp.n_vocab, n);
  ops.cmd.copy(logits_, 0, logits_host_, 0, static_cast<uint64_t>(n * hp.n_vocab) * 4);
}

void GpuOutputHead::read(float* logits, int64_t rows) {
  if (rows > 0) {
    std::memcpy(logits, logits_host_.mapped(), static_cast<size_t>(rows * hp_.n_vocab) * 4);
  }
}

std::vector<float> rope_frequencies(const ModelHParams& hp) {
  const ops::Rope rope(hp.rope_style, hp.head_dim, hp.n_rot, hp.rope_base, hp.yarn);
  std::vector<float> table = rope.inv_freq();
  table.push_back(rope.magnitude());
  return table;
}

}  // namespace strata::vk
