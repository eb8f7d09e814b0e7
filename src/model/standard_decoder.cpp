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
      rope_(hparams_.rope_style, hparams_.head_dim, hparams_.n_rot, hparams_.rope_base) {
  const ModelHParams& hp = hparams_;
  WeightLoader loader(file_);
  token_embd_ = loader.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  output_norm_ = loader.vector("output_norm.weight", hp.n_embd);
  output_ = loader.optional_matrix("output.weight", hp.n_embd, hp.n_vocab);
  if (!output_.data) output_ = token_embd_;  // tied embeddings
  layers_.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    Layer& l = layers_[static_cast<size_t>(il)];
    l.attn_norm = loader.vector(layer_tensor(il, "attn_norm"), hp.n_embd);
    l.attn = declare_attention(loader, hp, il, options.qk_norm);
    l.ffn_norm = loader.vector(layer_tensor(il, "ffn_norm"), hp.n_embd);
    if (options.moe) {
      l.moe = declare_moe_ffn(loader, hp, il);
    } else {
      l.dense = declare_dense_ffn(loader, hp, il);
    }
  }
  for (const std::string& name : loader.unused()) {
    log::warn("{}: tensor '{}' is not used by the {} architecture", file_.name(), name, hp.arch);
  }
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
  const AttentionParams attn_params = attention_params(hp, rope_);
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
    attention_block(l.attn, attn_params, normed_.data(), n, at, delta_.data(), pool);
    add_residual(x, delta_.data(), static_cast<int64_t>(size));

    norm_rows(x, l.ffn_norm, n);
    if (options_.moe) {
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
  int64_t total = output_.bytes() + token_embd_.row_bytes + hp.n_embd * 4;
  for (const Layer& l : layers_) {
    total += matrix_bytes({&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.dense.gate,
                           &l.dense.up, &l.dense.down, &l.moe.router});
    total += 2 * hp.n_embd * 4;  // norms
  }
  return total;
}

int64_t StandardDecoder::expert_bytes() const {
  if (!options_.moe || layers_.empty()) return 0;
  const Layer& l = layers_.front();
  return matrix_bytes({&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps}) / hparams_.n_expert;
}

}  // namespace strata
