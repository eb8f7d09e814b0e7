#include "model/hybrid_decoder.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "model/decoder.h"
#include "model/tensor_role.h"
#include "model/weight_loader.h"
#include "util/error.h"
#include "util/log.h"
#include "util/profiler.h"

namespace strata {
namespace {

std::string layer_name(int64_t layer, const char* name) {
  return "blk." + std::to_string(layer) + "." + name;
}

// Qwen3-Next's fused projections, whose rows are grouped by key head g (value heads g*r ..
// g*r + r - 1, r = n_v_heads / n_k_heads):
//   ssm_ba: per g, b of its r heads then a of its r heads;
//   ssm_in (older files): per g, q_g, k_g, v of its r heads, z of its r heads.
// Their rows are gathered into the separate matrices (qkv, gate, beta, alpha) the Qwen3.5 layout
// has, so one Gated DeltaNet path (CPU and GPU) serves both. Rows are whole quantized rows, so
// this is a copy of bytes; returns the buffer the new matrices point into. `in` may be empty
// (then w.qkv and w.gate are kept).
std::vector<uint8_t> split_fused_projections(const ops::WeightMatrix& in,
                                             const ops::WeightMatrix& ba,
                                             const GatedDeltaNetParams& p,
                                             GatedDeltaNetWeights& w) {
  const int64_t hk = p.n_k_heads, hv = p.n_v_heads, r = hv / hk;
  const int64_t conv_dim = p.conv_dim(), v_dim = hv * p.d_v;
  std::vector<uint8_t> buffer(static_cast<size_t>(ba.bytes() + (in.data ? in.bytes() : 0)));
  uint8_t* next = buffer.data();
  // A matrix of `rows` rows of src, row i taken from src row source(i).
  const auto gather = [&](const ops::WeightMatrix& src, int64_t rows, const auto& source) {
    ops::WeightMatrix out = src;
    out.data = next;
    out.rows = rows;
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(next + i * src.row_bytes, src.row(source(i)), static_cast<size_t>(src.row_bytes));
    next += rows * src.row_bytes;
    return out;
  };
  w.beta = gather(ba, hv, [&](int64_t h) { return h / r * 2 * r + h % r; });
  w.alpha = gather(ba, hv, [&](int64_t h) { return h / r * 2 * r + r + h % r; });
  if (in.data) {
    const int64_t group = 2 * p.d_k + 2 * r * p.d_v;  // rows per key head
    w.qkv = gather(in, conv_dim, [&](int64_t i) {
      const int64_t k_rows = hk * p.d_k;
      if (i < k_rows) return i / p.d_k * group + i % p.d_k;                         // q
      if (i < 2 * k_rows) return (i - k_rows) / p.d_k * group + p.d_k + i % p.d_k;  // k
      const int64_t v = i - 2 * k_rows;  // row of value head v / d_v
      return v / (r * p.d_v) * group + 2 * p.d_k + v % (r * p.d_v);
    });
    w.gate = gather(in, v_dim, [&](int64_t z) {
      return z / (r * p.d_v) * group + 2 * p.d_k + r * p.d_v + z % (r * p.d_v);
    });
  }
  return buffer;
}

}  // namespace

HybridDecoder::HybridDecoder(GgufFile file, ModelHParams hparams, Options options)
    : Model(std::move(file), std::move(hparams)),
      options_(std::move(options)),
      rope_(hparams_.rope_style, hparams_.head_dim, hparams_.n_rot, hparams_.rope_base) {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = options_.gdn;
  STRATA_CHECK(static_cast<int64_t>(options_.recurrent.size()) == hp.n_layer,
               "{}: {} recurrent-layer flags for {} layers", file_.name(),
               options_.recurrent.size(), hp.n_layer);
  WeightLoader loader(file_);
  token_embd_ = loader.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  output_norm_ = loader.vector("output_norm.weight", hp.n_embd);
  output_ = loader.optional_matrix("output.weight", hp.n_embd, hp.n_vocab);
  if (!output_.data) output_ = token_embd_;  // tied embeddings
  const int64_t conv_dim = p.conv_dim(), v_dim = p.n_v_heads * p.d_v;
  state_floats_ = kHeader;
  layers_.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    Layer& l = layers_[static_cast<size_t>(il)];
    l.attn_norm = loader.vector(layer_tensor(il, "attn_norm"), hp.n_embd);
    if (options_.recurrent[static_cast<size_t>(il)]) {
      GatedDeltaNetWeights& g = l.gdn;
      using Projections = Options::GdnProjections;
      if (options_.projections == Projections::separate) {
        g.qkv = loader.matrix(layer_tensor(il, "attn_qkv"), hp.n_embd, conv_dim);
        g.gate = loader.matrix(layer_tensor(il, "attn_gate"), hp.n_embd, v_dim);
        g.beta = loader.matrix(layer_tensor(il, "ssm_beta"), hp.n_embd, p.n_v_heads);
        g.alpha = loader.matrix(layer_tensor(il, "ssm_alpha"), hp.n_embd, p.n_v_heads);
      } else {
        const ops::WeightMatrix ba =
            loader.matrix(layer_tensor(il, "ssm_ba"), hp.n_embd, 2 * p.n_v_heads);
        if (options_.projections == Projections::fused_in) {
          const ops::WeightMatrix in =
              loader.matrix(layer_tensor(il, "ssm_in"), hp.n_embd, conv_dim + v_dim);
          l.split = split_fused_projections(in, ba, p, g);
        } else {
          g.qkv = loader.matrix(layer_tensor(il, "attn_qkv"), hp.n_embd, conv_dim);
          g.gate = loader.matrix(layer_tensor(il, "attn_gate"), hp.n_embd, v_dim);
          l.split = split_fused_projections({}, ba, p, g);
        }
      }
      // GGUF {kernel, conv_dim}: channel c's taps are consecutive; stored [tap][channel] here so
      // the convolution runs along channels.
      const float* conv = loader.floats(layer_tensor(il, "ssm_conv1d"), {p.conv_kernel, conv_dim});
      l.conv.resize(static_cast<size_t>(p.conv_kernel * conv_dim));
      for (int64_t c = 0; c < conv_dim; ++c) {
        for (int64_t j = 0; j < p.conv_kernel; ++j)
          l.conv[static_cast<size_t>(j * conv_dim + c)] = conv[c * p.conv_kernel + j];
      }
      g.conv = l.conv.data();
      g.dt_bias = loader.vector(layer_name(il, "ssm_dt.bias"), p.n_v_heads);
      g.a_neg = loader.vector(layer_name(il, "ssm_a"), p.n_v_heads);
      g.norm = loader.vector(layer_tensor(il, "ssm_norm"), p.d_v);
      g.out = loader.matrix(layer_tensor(il, "ssm_out"), v_dim, hp.n_embd);
      l.state_offset = state_floats_;
      state_floats_ += p.conv_state_floats() + p.ssm_state_floats();
    } else {
      AttentionLayout attention;
      attention.qk_norm = AttentionLayout::QkNorm::required;
      attention.gated_q = true;
      l.attn = declare_attention(loader, hp, il, attention);
    }
    l.post_norm = loader.vector(layer_tensor(il, "post_attention_norm"), hp.n_embd);
    MoeLayout moe;
    moe.n_ff_shexp = options_.n_ff_shexp;
    l.moe = declare_moe_ffn(loader, hp, il, moe);
  }
  warn_unused_tensors(loader, file_.name(), hp, options_.skipped_layers);
}

bool HybridDecoder::layer_has_kv(int64_t layer) const {
  return layer < 0 || layer >= hparams_.n_layer || !options_.recurrent[static_cast<size_t>(layer)];
}

void SequenceRuns::build(const ForwardBatch& batch, const BatchLayout& layout,
                         std::span<float* const> states, size_t n_sequences,
                         const std::string& arch) {
  STRATA_CHECK(states.size() == n_sequences,
               "{} keeps recurrent state: the batch has {} state buffers for {} sequences", arch,
               states.size(), n_sequences);
  for (size_t s = 0; s < states.size(); ++s) {
    STRATA_CHECK(states[s] != nullptr, "sequence {} has no recurrent state buffer", s);
  }
  const size_t n = layout.sequence.size();
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return layout.sequence[static_cast<size_t>(a)] < layout.sequence[static_cast<size_t>(b)];
  });
  tokens.resize(n);
  sequence.resize(n);
  position.resize(n);
  std::vector<int32_t> row_of(n);
  for (size_t i = 0; i < n; ++i) {
    const auto from = static_cast<size_t>(order[i]);
    tokens[i] = batch.tokens[from];
    sequence[i] = layout.sequence[from];
    position[i] = layout.position[from];
    row_of[from] = static_cast<int32_t>(i);
  }
  logit_rows.clear();
  for (int32_t row : layout.logit_rows) logit_rows.push_back(row_of[static_cast<size_t>(row)]);
  runs.clear();
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || sequence[i] != sequence[i - 1]) {
      runs.push_back({sequence[i], static_cast<int64_t>(i), 0});
    }
    runs.back().count++;
  }
  for (const Run& run : runs) {
    const float* state = states[static_cast<size_t>(run.sequence)];
    const auto consumed = static_cast<int64_t>(state[0]);
    const int64_t first = position[static_cast<size_t>(run.begin)];
    STRATA_CHECK(consumed == first,
                 "sequence {}: its recurrent state has consumed {} tokens, but the batch continues "
                 "it at position {} (a hybrid model's state cannot be rewound: restore a snapshot "
                 "taken at that position)",
                 run.sequence, consumed, first);
  }
}

void HybridDecoder::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                            float* logits, ThreadPool& pool, ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  layout_.build(batch, kv, hp.n_layer);
  ordered_.build(batch, layout_, batch.recurrent, kv.size(), hp.arch);
  x_.resize(ordered_.tokens.size() * static_cast<size_t>(hp.n_embd));
  {
    STRATA_PROFILE("embedding");
    embed_tokens(token_embd_, ordered_.tokens, x_.data());
  }
  run_layers(batch, kv, 0, hp.n_layer, x_.data(), pool, stats);
  for (const SequenceRuns::Run& run : ordered_.runs) {
    float* state = batch.recurrent[static_cast<size_t>(run.sequence)];
    state[0] = static_cast<float>(static_cast<int64_t>(state[0]) + run.count);
  }
  STRATA_PROFILE("output head");
  output_head(output_, output_norm_, hp.rms_eps, x_.data(), ordered_.logit_rows, logits, pool);
}

void HybridDecoder::forward_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                                   int64_t first, int64_t last, float* x, ThreadPool& pool,
                                   ForwardStats* stats) {
  layout_.build(batch, kv, hparams_.n_layer);
  ordered_.build(batch, layout_, batch.recurrent, kv.size(), hparams_.arch);
  run_layers(batch, kv, first, last, x, pool, stats);
}

void HybridDecoder::run_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                               int64_t first, int64_t last, float* x, ThreadPool& pool,
                               ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  const auto n = static_cast<int64_t>(ordered_.tokens.size());
  const size_t size = static_cast<size_t>(n * hp.n_embd);
  normed_.resize(size);
  delta_.resize(size);
  AttentionParams attn_params = attention_params(hp, rope_);
  attn_params.output_gate = true;
  MoeParams moe = moe_params(hp);
  if (stats) moe.distinct_experts = &stats->distinct_experts;
  const bool count_experts =
      stats && static_cast<int64_t>(stats->expert_counts.size()) == hp.n_layer * hp.n_expert;
  const GatedDeltaNetParams& p = options_.gdn;

  for (int64_t il = first; il < last; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    norm_rows(x, l.attn_norm, n);
    if (options_.recurrent[static_cast<size_t>(il)]) {
      layer_runs_.clear();
      for (const SequenceRuns::Run& run : ordered_.runs) {
        float* state = batch.recurrent[static_cast<size_t>(run.sequence)] + l.state_offset;
        layer_runs_.push_back({run.begin, run.count, state, state + p.conv_state_floats()});
      }
      gated_delta_net_block(l.gdn, p, normed_.data(), n, layer_runs_, delta_.data(), pool);
    } else {
      layer_caches_.clear();
      for (const SequenceKv& sequence_kv : kv) layer_caches_.push_back(sequence_kv[il]);
      const TokenPlacement at{ordered_.sequence, ordered_.position, layer_caches_};
      attention_block(l.attn, attn_params, normed_.data(), n, at, delta_.data(), pool);
    }
    add_residual(x, delta_.data(), static_cast<int64_t>(size));

    norm_rows(x, l.post_norm, n);
    moe.selection_counts = count_experts ? &stats->expert_counts[il * hp.n_expert] : nullptr;
    moe_ffn_block(l.moe, moe, normed_.data(), n, delta_.data(), pool);
    add_residual(x, delta_.data(), static_cast<int64_t>(size));
  }
}

void HybridDecoder::norm_rows(const float* x, const float* weight, int64_t n) {
  STRATA_PROFILE("norms");
  rms_norm_rows(x, weight, normed_.data(), n, hparams_.n_embd, hparams_.rms_eps);
}

int64_t HybridDecoder::dense_bytes_per_token() const {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = options_.gdn;
  int64_t total = output_.bytes() + token_embd_.row_bytes + hp.n_embd * 4;
  for (const Layer& l : layers_) {
    total += matrix_bytes({&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.gdn.qkv, &l.gdn.gate,
                           &l.gdn.beta, &l.gdn.alpha, &l.gdn.out, &l.moe.router, &l.moe.shared.gate,
                           &l.moe.shared.up, &l.moe.shared.down});
    total += 2 * hp.n_embd * 4;  // norms
    if (l.moe.shared_gate) total += hp.n_embd * 4;
    if (l.gdn.qkv.data)
      total += static_cast<int64_t>(l.conv.size()) * 4 + (2 * p.n_v_heads + p.d_v) * 4;
  }
  return total;
}

int64_t HybridDecoder::expert_bytes() const {
  if (layers_.empty()) return 0;
  const Layer& l = layers_.front();
  return matrix_bytes({&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps}) / hparams_.n_expert;
}

int64_t HybridDecoder::recurrent_bytes_per_token() const {
  return 2 * 4 * (state_floats_ - kHeader);  // every layer's conv state and S, read and written
}

}  // namespace strata
