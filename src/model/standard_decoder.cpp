#include "model/standard_decoder.h"

#include "model/decoder.h"
#include "model/weight_loader.h"
#include "util/error.h"
#include "util/log.h"
#include "util/profiler.h"

namespace strata {

StandardDecoder::StandardDecoder(GgufFile file, ModelHParams hparams, Options options)
    : Model(std::move(file), std::move(hparams)),
      options_(options),
      rope_(hparams_.rope_style, hparams_.head_dim, hparams_.n_rot, hparams_.rope_base,
            hparams_.yarn) {
  const ModelHParams& hp = hparams_;
  WeightLoader loader(file_);
  token_embd_ = loader.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  output_norm_ = loader.vector("output_norm.weight", hp.n_embd);
  output_ = loader.optional_matrix("output.weight", hp.n_embd, hp.n_vocab);
  if (!output_.data) output_ = token_embd_;  // tied embeddings
  STRATA_CHECK(options_.leading_dense >= 0 && options_.leading_dense <= hp.n_layer,
               "{}: {}.leading_dense_block_count is {} of {} layers", file_.name(), hp.arch,
               options_.leading_dense, hp.n_layer);
  layers_.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    Layer& l = layers_[static_cast<size_t>(il)];
    l.attn_norm = loader.vector(layer_tensor(il, "attn_norm"), hp.n_embd);
    l.attn = declare_attention(loader, hp, il, options_.attention);
    l.ffn_norm = loader.vector(layer_tensor(il, options_.ffn_norm), hp.n_embd);
    if (options_.moe && il >= options_.leading_dense) {
      l.moe = declare_moe_ffn(loader, hp, il, options_.moe_layout);
    } else {
      l.dense = declare_dense_ffn(loader, hp, il);
    }
  }
  warn_unused_tensors(loader, file_.name(), hp, options_.skipped_layers);
}

void StandardDecoder::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                              float* logits, ThreadPool& pool, ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  layout_.build(batch, kv, hp.n_layer);
  x_.resize(batch.tokens.size() * static_cast<size_t>(hp.n_embd));
  {
    STRATA_PROFILE("embedding");
    embed_tokens(token_embd_, batch.tokens, x_.data());
  }
  run_layers(kv, 0, hp.n_layer, x_.data(), pool, stats);
  STRATA_PROFILE("output head");
  output_head(output_, output_norm_, hp.rms_eps, x_.data(), layout_.logit_rows, logits, pool);
}

void StandardDecoder::forward_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                                     int64_t first, int64_t last, float* x, ThreadPool& pool,
                                     ForwardStats* stats) {
  layout_.build(batch, kv, hparams_.n_layer);
  run_layers(kv, first, last, x, pool, stats);
}

void StandardDecoder::run_layers(std::span<const SequenceKv> kv, int64_t first, int64_t last,
                                 float* x, ThreadPool& pool, ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  const auto n = static_cast<int64_t>(layout_.sequence.size());
  const size_t size = static_cast<size_t>(n * hp.n_embd);
  normed_.resize(size);
  delta_.resize(size);
  AttentionParams attn_params = attention_params(hp, rope_);
  MoeParams moe = moe_params(hp);
  if (stats) moe.distinct_experts = &stats->distinct_experts;
  const bool count_experts =
      stats && static_cast<int64_t>(stats->expert_counts.size()) == hp.n_layer * hp.n_expert;

  for (int64_t il = first; il < last; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    norm_rows(x, l.attn_norm, n);
    layer_caches_.clear();
    for (const SequenceKv& sequence_kv : kv) layer_caches_.push_back(sequence_kv[il]);
    const TokenPlacement at{layout_.sequence, layout_.position, layer_caches_};
    attn_params.sliding_window = hp.layer_window(il);
    attention_block(l.attn, attn_params, normed_.data(), n, at, delta_.data(), pool);
    add_residual(x, delta_.data(), static_cast<int64_t>(size));

    norm_rows(x, l.ffn_norm, n);
    if (l.is_moe()) {
      moe.selection_counts = count_experts ? &stats->expert_counts[il * hp.n_expert] : nullptr;
      moe_ffn_block(l.moe, moe, normed_.data(), n, delta_.data(), pool);
    } else {
      dense_ffn_block(l.dense, normed_.data(), n, delta_.data(), pool);
    }
    add_residual(x, delta_.data(), static_cast<int64_t>(size));
  }
}

void StandardDecoder::norm_rows(const float* x, const float* weight, int64_t n) {
  STRATA_PROFILE("norms");
  rms_norm_rows(x, weight, normed_.data(), n, hparams_.n_embd, hparams_.rms_eps);
}

int64_t StandardDecoder::dense_bytes_per_token() const {
  const ModelHParams& hp = hparams_;
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  auto floats = [](const float* v, int64_t n) { return v ? n * 4 : int64_t{0}; };
  int64_t total = output_.bytes() + token_embd_.row_bytes + hp.n_embd * 4;
  for (const Layer& l : layers_) {
    total += matrix_bytes({&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.dense.gate,
                           &l.dense.up, &l.dense.down, &l.moe.router, &l.moe.shared.gate,
                           &l.moe.shared.up, &l.moe.shared.down});
    total += 2 * hp.n_embd * 4;  // norms
    // The f32 vectors every token reads too: q/k norms, attention biases and sinks, the
    // router's biases, the shared expert's gate.
    const AttentionWeights& a = l.attn;
    total += floats(a.q_norm, hp.head_dim) + floats(a.k_norm, hp.head_dim);
    total += floats(a.bq, q_dim) + floats(a.bk, kv_dim) + floats(a.bv, kv_dim) +
             floats(a.bo, hp.n_embd) + floats(a.sinks, hp.n_head);
    total += floats(l.moe.router_bias, hp.n_expert) + floats(l.moe.selection_bias, hp.n_expert) +
             floats(l.moe.shared_gate, hp.n_embd);
  }
  return total;
}

int64_t StandardDecoder::expert_bytes() const {
  if (!options_.moe || options_.leading_dense >= hparams_.n_layer) return 0;
  const Layer& l = layers_[static_cast<size_t>(options_.leading_dense)];
  const ModelHParams& hp = hparams_;
  // gpt-oss's per-expert biases (f32) are read with the expert's matrices.
  const int64_t bias_floats = (l.moe.gate_bias ? hp.n_ff_exp : 0) +
                              (l.moe.up_bias ? hp.n_ff_exp : 0) + (l.moe.down_bias ? hp.n_embd : 0);
  return matrix_bytes({&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps}) / hp.n_expert +
         bias_floats * 4;
}

}  // namespace strata
