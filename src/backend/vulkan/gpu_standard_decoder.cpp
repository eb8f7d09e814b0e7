#include "backend/vulkan/gpu_standard_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/decoder.h"
#include "util/error.h"
#include "util/log.h"
#include "util/profiler.h"

namespace strata::vk {
namespace {

uint64_t matrix_bytes(const ops::WeightMatrix& w) {
  return w.data ? aligned_bytes(static_cast<uint64_t>(w.bytes())) : 0;
}

uint64_t vector_bytes(const float* v, int64_t n) {
  return v ? aligned_bytes(static_cast<uint64_t>(n) * 4) : 0;
}

}  // namespace

// Device buffers of one step, sized for `tokens` tokens and `rows` logit rows; grown on demand.
struct GpuStandardDecoder::Work {
  int64_t tokens = 0, rows = 0;
  Buffer x, normed, q, k, v, attn, delta, hidden, hidden2, down, router, ids_all, weights, shared,
      shared_logit, selected, logits;
  Buffer params;       // host-visible: token ids, positions, slots, per-token attention info
  Buffer logits_host;  // host-visible copy of the logits
  Buffer pages;        // host-visible page tables
  int64_t pages_capacity = 0;
  std::unique_ptr<CommandList> cmd;
};

GpuStandardDecoder::GpuStandardDecoder(std::unique_ptr<StandardDecoder> cpu,
                                       std::shared_ptr<Device> device)
    : Model(GgufFile::parse(cpu->file().name(), cpu->file().bytes()), cpu->hparams()),
      cpu_(std::move(cpu)),
      device_(std::move(device)),
      normed_in_(*device_, "normed states"),
      attn_in_(*device_, "attention output"),
      hidden_in_(*device_, "FFN hidden states"),
      shared_in_(*device_, "shared expert hidden states"),
      head_in_(*device_, "output head input") {
  upload_weights();
  kv_ = std::make_unique<DeviceKv>(*device_, hparams_.n_head_kv, hparams_.head_dim,
                                   std::vector<bool>(static_cast<size_t>(hparams_.n_layer), true));
  work_ = std::make_unique<Work>();
  work_->cmd = std::make_unique<CommandList>(*device_);
}

GpuStandardDecoder::~GpuStandardDecoder() = default;

void GpuStandardDecoder::upload_weights() {
  const ModelHParams& hp = hparams_;
  const StandardDecoder& m = *cpu_;
  uint64_t total = matrix_bytes(m.token_embd()) + vector_bytes(m.output_norm(), hp.n_embd) +
                   (m.output().data == m.token_embd().data ? 0 : matrix_bytes(m.output())) +
                   vector_bytes(m.output_norm(), hp.n_rot / 2);  // RoPE frequencies
  for (const auto& l : m.layers()) {
    for (const ops::WeightMatrix* w :
         {&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.dense.gate, &l.dense.up, &l.dense.down,
          &l.moe.router, &l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps, &l.moe.shared.gate,
          &l.moe.shared.up, &l.moe.shared.down})
      total += matrix_bytes(*w);
    total += vector_bytes(l.attn_norm, hp.n_embd) + vector_bytes(l.ffn_norm, hp.n_embd) +
             vector_bytes(l.attn.q_norm, hp.head_dim) + vector_bytes(l.attn.k_norm, hp.head_dim) +
             vector_bytes(l.moe.shared_gate, hp.n_embd);
  }
  weights_ = std::make_unique<DeviceWeights>(*device_, total);
  DeviceWeights& w = *weights_;
  token_embd_ = w.matrix(m.token_embd(), "token_embd.weight");
  output_norm_ = w.floats(m.output_norm(), hp.n_embd, "output_norm.weight");
  output_ =
      m.output().data == m.token_embd().data ? token_embd_ : w.matrix(m.output(), "output.weight");
  const auto optional = [&](const ops::WeightMatrix& x, const std::string& name) {
    return x.data ? w.matrix(x, name) : GpuMatrix{};
  };
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const StandardDecoder::Layer& src = m.layers()[static_cast<size_t>(il)];
    const auto name = [&](const char* t) { return layer_tensor(il, t); };
    Layer l;
    l.attn_norm = w.floats(src.attn_norm, hp.n_embd, name("attn_norm"));
    l.ffn_norm = w.floats(src.ffn_norm, hp.n_embd, name("ffn_norm"));
    l.q_norm = w.floats(src.attn.q_norm, hp.head_dim, name("attn_q_norm"));
    l.k_norm = w.floats(src.attn.k_norm, hp.head_dim, name("attn_k_norm"));
    l.wq = w.matrix(src.attn.wq, name("attn_q"));
    l.wk = w.matrix(src.attn.wk, name("attn_k"));
    l.wv = w.matrix(src.attn.wv, name("attn_v"));
    l.wo = w.matrix(src.attn.wo, name("attn_output"));
    l.gate = optional(src.dense.gate, name("ffn_gate"));
    l.up = optional(src.dense.up, name("ffn_up"));
    l.down = optional(src.dense.down, name("ffn_down"));
    l.router = optional(src.moe.router, name("ffn_gate_inp"));
    l.gate_exps = optional(src.moe.gate_exps, name("ffn_gate_exps"));
    l.up_exps = optional(src.moe.up_exps, name("ffn_up_exps"));
    l.down_exps = optional(src.moe.down_exps, name("ffn_down_exps"));
    if (l.gate_exps.address) {  // describe expert 0; the kernels step by expert
      l.gate_exps.rows = l.up_exps.rows = hp.n_ff_exp;
      l.down_exps.rows = hp.n_embd;
    }
    l.shared_gate_w = optional(src.moe.shared.gate, name("ffn_gate_shexp"));
    l.shared_up = optional(src.moe.shared.up, name("ffn_up_shexp"));
    l.shared_down = optional(src.moe.shared.down, name("ffn_down_shexp"));
    if (src.moe.shared_gate) {
      l.shared_gate_inp = GpuMatrix{
          GgmlType::F32, w.floats(src.moe.shared_gate, hp.n_embd, name("ffn_gate_inp_shexp")), 1,
          hp.n_embd, hp.n_embd * 4};
    }
    layers_.push_back(l);
  }
  // RoPE frequencies: the CPU's own table (progressive products), so angles agree.
  std::vector<float> inv_freq(static_cast<size_t>(hp.n_rot / 2));
  const float theta_scale = std::pow(hp.rope_base, -2.0f / static_cast<float>(hp.n_rot));
  float theta = 1.0f;
  for (auto& f : inv_freq) {
    f = theta;
    theta *= theta_scale;
  }
  inv_freq_ = w.floats(inv_freq.data(), static_cast<int64_t>(inv_freq.size()), "rope frequencies");
}

void GpuStandardDecoder::ensure_work(int64_t n, int64_t rows) {
  Work& w = *work_;
  const ModelHParams& hp = hparams_;
  if (n > w.tokens) {
    const int64_t cap = std::max(n, 2 * w.tokens);
    const int64_t k = std::max<int64_t>(hp.n_expert_used, 1);
    const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
    const int64_t ff = std::max(hp.n_ff, hp.n_ff_exp * k);
    const auto f32 = [&](int64_t count, const char* what) {
      return device_->allocate(static_cast<uint64_t>(count) * 4, MemoryKind::device,
                               fmt::format("{} for {} tokens", what, cap));
    };
    w.x = f32(cap * hp.n_embd, "hidden states");
    w.normed = f32(cap * hp.n_embd, "normed states");
    w.q = f32(cap * q_dim, "queries");
    w.k = f32(cap * kv_dim, "keys");
    w.v = f32(cap * kv_dim, "values");
    w.attn = f32(cap * q_dim, "attention output");
    w.delta = f32(cap * hp.n_embd, "layer output");
    w.hidden = f32(cap * ff, "FFN hidden states");
    w.hidden2 = f32(cap * ff, "FFN hidden states");
    w.down = f32(cap * k * hp.n_embd, "expert outputs");
    w.router = f32(cap * std::max<int64_t>(hp.n_expert, 1), "router logits");
    w.ids_all = f32(hp.n_layer * cap * k, "expert ids");
    w.weights = f32(cap * k, "expert weights");
    w.shared = f32(cap * std::max(hp.n_embd, ff), "shared expert output");
    w.shared_logit = f32(cap, "shared expert gate");
    w.params =
        device_->allocate(static_cast<uint64_t>(cap) * 5 * 4, MemoryKind::host, "step parameters");
    w.tokens = cap;
  }
  if (rows > w.rows) {
    const int64_t cap = std::max(rows, 2 * w.rows);
    w.selected = device_->allocate(static_cast<uint64_t>(cap * hp.n_embd) * 4, MemoryKind::device,
                                   "output head input");
    w.logits = device_->allocate(static_cast<uint64_t>(cap * hp.n_vocab) * 4, MemoryKind::device,
                                 "logits");
    w.logits_host =
        device_->allocate(static_cast<uint64_t>(cap * hp.n_vocab) * 4, MemoryKind::host, "logits");
    w.rows = cap;
  }
}

void GpuStandardDecoder::kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
  kv_->copy_slots(storage, from, to, n);
}

void GpuStandardDecoder::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                                 float* logits, ThreadPool& pool, ForwardStats* stats) {
  (void)pool;
  STRATA_PROFILE("gpu: forward");
  const ModelHParams& hp = hparams_;
  layout_.build(batch, kv, hp.n_layer);
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t rows = static_cast<int64_t>(layout_.logit_rows.size());
  if (n == 0) return;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = batch.tokens[static_cast<size_t>(t)];
    STRATA_CHECK(id >= 0 && id < hp.n_vocab,
                 "token id {} at position {} is outside the vocabulary (0..{})", id, t,
                 hp.n_vocab - 1);
  }
  ensure_work(n, std::max<int64_t>(rows, 1));
  Work& w = *work_;

  // Which device KV store: every sequence of a batch lives in the same host cache or pool.
  const ops::KvLayerView& first = kv[static_cast<size_t>(layout_.sequence[0])][0];
  const void* key = first.k;
  const int64_t page_size = first.pages ? first.page_size : 0;
  int64_t max_slot = 0, max_capacity = 0;
  std::vector<int32_t> pages;
  std::vector<int32_t> page_offset(kv.size(), -1);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t s = layout_.sequence[static_cast<size_t>(t)];
    const ops::KvLayerView& view = kv[static_cast<size_t>(s)][0];
    STRATA_CHECK(view.k == key && (view.pages ? view.page_size : 0) == page_size,
                 "GPU forward: the sequences of one batch must share one KV cache");
    max_slot = std::max(max_slot, view.slot(layout_.position[static_cast<size_t>(t)]));
    if (page_size && page_offset[static_cast<size_t>(s)] < 0) {
      page_offset[static_cast<size_t>(s)] = static_cast<int32_t>(pages.size());
      const int64_t n_pages = (view.capacity + page_size - 1) / page_size;
      for (int64_t p = 0; p < n_pages; ++p) {
        pages.push_back(view.pages[p]);
        max_slot = std::max<int64_t>(max_slot, (view.pages[p] + 1) * page_size - 1);
      }
    }
    if (!page_size) max_capacity = std::max(max_capacity, view.capacity);
  }
  const auto& kv_layers =
      kv_->ensure(key, first.type, max_slot + 1, page_size ? max_slot + 1 : max_capacity);

  // Step parameters: token ids, positions, slots, per-token {positions to attend, page offset}.
  int32_t* params = static_cast<int32_t*>(w.params.mapped());
  for (int64_t t = 0; t < n; ++t) {
    const int32_t s = layout_.sequence[static_cast<size_t>(t)];
    const int64_t pos = layout_.position[static_cast<size_t>(t)];
    params[t] = batch.tokens[static_cast<size_t>(t)];
    params[n + t] = static_cast<int32_t>(pos);
    params[2 * n + t] = static_cast<int32_t>(kv[static_cast<size_t>(s)][0].slot(pos));
    params[3 * n + 2 * t] = static_cast<int32_t>(pos + 1);
    params[3 * n + 2 * t + 1] = page_size ? page_offset[static_cast<size_t>(s)] : 0;
  }
  if (pages.empty()) pages.push_back(0);
  if (static_cast<int64_t>(pages.size()) > w.pages_capacity) {
    w.pages_capacity = std::max<int64_t>(static_cast<int64_t>(pages.size()), 2 * w.pages_capacity);
    w.pages = device_->allocate(static_cast<uint64_t>(w.pages_capacity) * 4, MemoryKind::host,
                                "KV page tables");
  }
  std::memcpy(w.pages.mapped(), pages.data(), pages.size() * 4);
  const uint64_t p0 = w.params.address();
  const uint64_t tokens_addr = p0, positions_addr = p0 + 4 * n, slots_addr = p0 + 8 * n,
                 attn_info_addr = p0 + 12 * n;

  CommandList& cmd = *w.cmd;
  cmd.begin();
  GpuOps ops{*device_, cmd};
  ops.get_rows(token_embd_, tokens_addr, n, w.x.address());
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
    ops.rms_norm(w.x.address(), hp.n_embd, l.attn_norm, w.normed.address(), hp.n_embd, n, hp.n_embd,
                 hp.rms_eps);
    ActivationInput normed(ops, normed_in_, w.normed.address(), hp.n_embd, n, hp.n_embd);
    const auto project = [&](const GpuMatrix& m, ActivationInput& in, uint64_t y,
                             int64_t y_stride) {
      const RoundedRows x = in.for_weights(m.type);
      ops.matmul(m, x.address, x.stride, y, y_stride, n);
    };
    project(l.wq, normed, w.q.address(), q_dim);
    project(l.wk, normed, w.k.address(), kv_dim);
    project(l.wv, normed, w.v.address(), kv_dim);
    if (l.q_norm) {
      ops.rms_norm(w.q.address(), hp.head_dim, l.q_norm, w.q.address(), hp.head_dim, n * hp.n_head,
                   hp.head_dim, hp.rms_eps);
    }
    if (l.k_norm) {
      ops.rms_norm(w.k.address(), hp.head_dim, l.k_norm, w.k.address(), hp.head_dim,
                   n * hp.n_head_kv, hp.head_dim, hp.rms_eps);
    }
    const bool neox = hp.rope_style == ops::RopeStyle::neox;
    ops.rope(w.q.address(), q_dim, positions_addr, inv_freq_, n, hp.n_head, hp.head_dim, hp.n_rot,
             neox);
    ops.rope(w.k.address(), kv_dim, positions_addr, inv_freq_, n, hp.n_head_kv, hp.head_dim,
             hp.n_rot, neox);
    const DeviceKv::Layer& cache = kv_layers[static_cast<size_t>(il)];
    ops.kv_store(first.type, w.k.address(), w.v.address(), cache.k, cache.v, slots_addr, n,
                 hp.n_head_kv, hp.head_dim);
    ops.attention(first.type, w.q.address(), q_dim, w.attn.address(), q_dim, cache.k, cache.v,
                  attn_info_addr, w.pages.address(), page_size, n, hp.n_head, hp.n_head_kv,
                  hp.head_dim, 1.0f / std::sqrt(static_cast<float>(hp.head_dim)));
    ActivationInput attn(ops, attn_in_, w.attn.address(), q_dim, n, q_dim);
    project(l.wo, attn, w.delta.address(), hp.n_embd);
    ops.add(w.x.address(), w.delta.address(), n * hp.n_embd);
    ops.rms_norm(w.x.address(), hp.n_embd, l.ffn_norm, w.normed.address(), hp.n_embd, n, hp.n_embd,
                 hp.rms_eps);
    record_ffn(ops, l, il, n);
    ops.add(w.x.address(), w.delta.address(), n * hp.n_embd);
  }
  // Output head, only for the rows someone samples from.
  for (int64_t i = 0; i < rows; ++i) {
    const uint64_t row_bytes = static_cast<uint64_t>(hp.n_embd) * 4;
    cmd.copy(w.x, static_cast<uint64_t>(layout_.logit_rows[static_cast<size_t>(i)]) * row_bytes,
             w.selected, static_cast<uint64_t>(i) * row_bytes, row_bytes);
  }
  if (rows > 0) {
    ops.rms_norm(w.selected.address(), hp.n_embd, output_norm_, w.selected.address(), hp.n_embd,
                 rows, hp.n_embd, hp.rms_eps);
    ActivationInput head(ops, head_in_, w.selected.address(), hp.n_embd, rows, hp.n_embd);
    const RoundedRows x = head.for_weights(output_.type);
    ops.matmul(output_, x.address, x.stride, w.logits.address(), hp.n_vocab, rows);
    cmd.copy(w.logits, 0, w.logits_host, 0, static_cast<uint64_t>(rows * hp.n_vocab) * 4);
  }
  cmd.end();
  cmd.submit_and_wait();
  for (ActivationScratch* s : {&normed_in_, &attn_in_, &hidden_in_, &shared_in_, &head_in_})
    s->release_retired();
  if (rows > 0) {
    std::memcpy(logits, w.logits_host.mapped(), static_cast<size_t>(rows * hp.n_vocab) * 4);
  }

  if (stats && hp.n_expert > 0) {  // expert selections, read back only when asked
    const int64_t k = hp.n_expert_used;
    std::vector<int32_t> ids(static_cast<size_t>(hp.n_layer * n * k));
    device_->download(w.ids_all, 0, ids.data(), ids.size() * 4);
    const bool count =
        static_cast<int64_t>(stats->expert_counts.size()) == hp.n_layer * hp.n_expert;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      std::vector<bool> seen(static_cast<size_t>(hp.n_expert), false);
      for (int64_t i = 0; i < n * k; ++i) {
        const int32_t e = ids[static_cast<size_t>(il * n * k + i)];
        if (e < 0 || e >= hp.n_expert) continue;
        if (!seen[static_cast<size_t>(e)]) ++stats->distinct_experts;
        seen[static_cast<size_t>(e)] = true;
        if (count) ++stats->expert_counts[static_cast<size_t>(il * hp.n_expert + e)];
      }
    }
  }
}

void GpuStandardDecoder::record_ffn(GpuOps& ops, const Layer& l, int64_t il, int64_t n) {
  const ModelHParams& hp = hparams_;
  Work& w = *work_;
  ActivationInput input(ops, normed_in_, w.normed.address(), hp.n_embd, n, hp.n_embd);
  // silu(gate x) * (up x) into `out` for n rows (experts: pairs reading rows / x_div).
  const auto gate_up = [&](const GpuMatrix& gate, const GpuMatrix& up, const uint64_t* ids,
                           int64_t rows, int64_t x_div, uint64_t out, uint64_t spare) {
    const RoundedRows xg = input.for_weights(gate.type), xu = input.for_weights(up.type);
    const int64_t ff = gate.rows;
    if (gate.type == up.type) {
      if (ids) {
        ops.matmul_experts(gate, &up, *ids, xg.address, xg.stride, x_div, out, ff, rows);
      } else {
        ops.matmul_swiglu(gate, up, xg.address, xg.stride, out, ff, rows);
      }
      return;
    }
    if (ids) {
      ops.matmul_experts(gate, nullptr, *ids, xg.address, xg.stride, x_div, out, ff, rows);
      ops.matmul_experts(up, nullptr, *ids, xu.address, xu.stride, x_div, spare, ff, rows);
    } else {
      ops.matmul(gate, xg.address, xg.stride, out, ff, rows);
      ops.matmul(up, xu.address, xu.stride, spare, ff, rows);
    }
    ops.swiglu(out, spare, rows * ff);
  };
  if (!l.router.address) {  // dense SwiGLU FFN
    gate_up(l.gate, l.up, nullptr, n, 1, w.hidden.address(), w.hidden2.address());
    ActivationInput hidden(ops, hidden_in_, w.hidden.address(), hp.n_ff, n, hp.n_ff);
    const RoundedRows h = hidden.for_weights(l.down.type);
    ops.matmul(l.down, h.address, h.stride, w.delta.address(), hp.n_embd, n);
    return;
  }
  const int64_t k = hp.n_expert_used, ff = hp.n_ff_exp, pairs = n * k;
  const uint64_t ids = w.ids_all.address() + static_cast<uint64_t>(il * w.tokens * k) * 4;
  const RoundedRows xr = input.for_weights(l.router.type);
  ops.matmul(l.router, xr.address, xr.stride, w.router.address(), hp.n_expert, n);
  ops.moe_route(w.router.address(), ids, w.weights.address(), n, hp.n_expert, k,
                hp.expert_weights_norm);
  gate_up(l.gate_exps, l.up_exps, &ids, pairs, k, w.hidden.address(), w.hidden2.address());
  ActivationInput hidden(ops, hidden_in_, w.hidden.address(), ff, pairs, ff);
  const RoundedRows h = hidden.for_weights(l.down_exps.type);
  ops.matmul_experts(l.down_exps, nullptr, ids, h.address, h.stride, 1, w.down.address(), hp.n_embd,
                     pairs);
  uint64_t shared = 0, shared_logit = 0;
  if (l.shared_gate_w.address) {
    const int64_t sff = l.shared_gate_w.rows;
    // hidden2 is free again (the routed SwiGLU is in hidden); shared is the spare.
    gate_up(l.shared_gate_w, l.shared_up, nullptr, n, 1, w.hidden2.address(), w.shared.address());
    ActivationInput shared_hidden(ops, shared_in_, w.hidden2.address(), sff, n, sff);
    const RoundedRows sh = shared_hidden.for_weights(l.shared_down.type);
    ops.matmul(l.shared_down, sh.address, sh.stride, w.shared.address(), hp.n_embd, n);
    shared = w.shared.address();
    if (l.shared_gate_inp.address) {  // a plain f32 dot with the states, as on the CPU
      ops.matmul(l.shared_gate_inp, w.normed.address(), hp.n_embd, w.shared_logit.address(), 1, n);
      shared_logit = w.shared_logit.address();
    }
  }
  ops.moe_combine(w.down.address(), w.weights.address(), w.delta.address(), shared, shared_logit, n,
                  hp.n_embd, k);
}

}  // namespace strata::vk
