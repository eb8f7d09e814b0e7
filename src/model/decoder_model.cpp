#include "model/decoder_model.h"

#include <algorithm>
#include <chrono>

#include "model/decoder.h"
#include "model/weight_loader.h"
#include "ops/compact_tiles.h"
#include "ops/rms_norm.h"
#include "util/error.h"
#include "util/log.h"
#include "util/profiler.h"

namespace strata {

DecoderModel::DecoderModel(GgufFile file, ModelHParams hparams, ModelSpec spec)
    : Model(std::move(file), std::move(hparams)),
      spec_(std::move(spec)),
      rope_(hparams_.rope_style, hparams_.head_dim, hparams_.n_rot, hparams_.rope_base,
            hparams_.yarn) {
  const ModelHParams& hp = hparams_;
  STRATA_CHECK(static_cast<int64_t>(spec_.layers.size()) == hp.n_layer,
               "{}: a spec of {} layers for {} layers", file_.name(), spec_.layers.size(),
               hp.n_layer);
  WeightLoader loader(file_);
  token_embd_ = loader.matrix(kTokenEmbdTensor, hp.n_embd, hp.n_vocab);
  output_norm_ = loader.vector(kOutputNormTensor, hp.n_embd);
  output_ = loader.optional_matrix(kOutputTensor, hp.n_embd, hp.n_vocab);
  if (!output_.data) output_ = token_embd_;  // tied embeddings
  const GatedDeltaNetParams& p = spec_.gdn;
  if (spec_.has_recurrent()) state_floats_ = kHeader;
  layers_.reserve(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    layers_.push_back(load_layer_weights(loader, hp, spec_, il));
    if (spec_.layers[static_cast<size_t>(il)].recurrent()) {
      layers_.back().state_offset = state_floats_;
      state_floats_ += p.conv_state_floats() + p.ssm_state_floats();
    }
  }
  nextn_ = NextnHead::load(loader, hp, spec_, token_embd_, output_, output_norm_);
  warn_unused_tensors(loader, file_.name(), hp, spec_.skipped_layers);
  converted_ = loader.take_converted();
}

bool DecoderModel::layer_has_kv(int64_t layer) const {
  return layer < 0 || layer >= hparams_.n_layer ||
         !spec_.layers[static_cast<size_t>(layer)].recurrent();
}

std::vector<Model::LayerDevices> DecoderModel::layer_devices() const {
  std::vector<LayerDevices> out = Model::layer_devices();
  for (size_t il = 0; il < out.size() && il < layers_.size(); ++il)
    if (!layers_[il].moe.router.data) out[il].experts.clear();
  return out;
}

void DecoderModel::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
                           ThreadPool& pool, ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  rows_.build(batch, kv, hp.n_layer, state_floats_ > 0, hp.arch);
  x_.resize(rows_.tokens().size() * static_cast<size_t>(hp.n_embd));
  {
    STRATA_PROFILE("embedding");
    embed_tokens(token_embd_, rows_.tokens(), x_.data());
  }
  run_layers(batch, kv, 0, hp.n_layer, x_.data(), pool, stats);
  rows_.advance_states(batch.recurrent);
  if (batch.hidden) {
    for (int64_t i = 0; i < rows_.size(); ++i) {
      ops::rms_norm(x_.data() + i * hp.n_embd, output_norm_,
                    batch.hidden + rows_.batch_row(i) * hp.n_embd, hp.n_embd, hp.rms_eps);
    }
  }
  STRATA_PROFILE("output head");
  output_head(output_, output_norm_, hp.rms_eps, x_.data(), rows_.logit_rows(), logits, workspace_,
              pool);
}

void DecoderModel::forward_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                                  int64_t first, int64_t last, float* x, ThreadPool& pool,
                                  ForwardStats* stats) {
  rows_.build(batch, kv, hparams_.n_layer, state_floats_ > 0, hparams_.arch);
  run_layers(batch, kv, first, last, x, pool, stats);
}

void DecoderModel::run_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                              int64_t first, int64_t last, float* x, ThreadPool& pool,
                              ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  const int64_t n = rows_.size();
  const size_t size = static_cast<size_t>(n * hp.n_embd);
  normed_.resize(size);
  delta_.resize(size);
  AttentionParams attn_params = attention_params(hp, rope_);
  MoeParams moe = moe_params(hp);
  if (stats) moe.distinct_experts = &stats->distinct_experts;
  const bool count_experts =
      stats && static_cast<int64_t>(stats->expert_counts.size()) == hp.n_layer * hp.n_expert;
  const GatedDeltaNetParams& p = spec_.gdn;

  for (int64_t il = first; il < last; ++il) {
    const LayerSpec& spec = spec_.layers[static_cast<size_t>(il)];
    const LayerWeights& l = layers_[static_cast<size_t>(il)];
    norm_rows(x, l.attn_norm, n);
    if (spec.recurrent()) {
      layer_runs_.clear();
      for (const SequenceRuns::Run& run : rows_.runs()) {
        float* state = batch.recurrent[static_cast<size_t>(run.sequence)] + l.state_offset;
        layer_runs_.push_back({run.begin, run.count, state, state + p.conv_state_floats()});
      }
      gated_delta_net_block(l.gdn, p, normed_.data(), n, layer_runs_, delta_.data(), workspace_,
                            pool);
    } else {
      layer_caches_.clear();
      for (const SequenceKv& sequence_kv : kv) layer_caches_.push_back(sequence_kv[il]);
      const TokenPlacement at{rows_.sequence(), rows_.position(), layer_caches_};
      attention_mixer(l, spec, attn_params, normed_.data(), n, at, delta_.data(), workspace_, pool);
    }
    add_residual(x, delta_.data(), static_cast<int64_t>(size));

    norm_rows(x, l.ffn_norm, n);
    moe.selection_counts =
        spec.moe && count_experts ? &stats->expert_counts[il * hp.n_expert] : nullptr;
    ffn_mixer(l, spec, moe, normed_.data(), n, delta_.data(), workspace_, pool);
    add_residual(x, delta_.data(), static_cast<int64_t>(size));
  }
}

void DecoderModel::norm_rows(const float* x, const float* weight, int64_t n) {
  STRATA_PROFILE("norms");
  rms_norm_rows(x, weight, normed_.data(), n, hparams_.n_embd, hparams_.rms_eps);
}

int64_t DecoderModel::dense_bytes_per_token() const {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = spec_.gdn;
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  auto floats = [](const float* v, int64_t n) { return v ? n * 4 : int64_t{0}; };
  int64_t total = output_.bytes() + token_embd_.row_bytes + hp.n_embd * 4;
  for (const LayerWeights& l : layers_) {
    total += matrix_bytes({&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.gdn.qkv, &l.gdn.gate,
                           &l.gdn.beta, &l.gdn.alpha, &l.gdn.out, &l.dense.gate, &l.dense.up,
                           &l.dense.down, &l.moe.router, &l.moe.shared.gate, &l.moe.shared.up,
                           &l.moe.shared.down});
    total += 2 * hp.n_embd * 4;  // norms
    // The f32 vectors every token reads too: q/k norms, attention biases and sinks, the
    // router's biases, the shared expert's gate, the convolution and the recurrence's vectors.
    const AttentionWeights& a = l.attn;
    total += floats(a.q_norm, hp.head_dim) + floats(a.k_norm, hp.head_dim);
    total += floats(a.bq, q_dim) + floats(a.bk, kv_dim) + floats(a.bv, kv_dim) +
             floats(a.bo, hp.n_embd) + floats(a.sinks, hp.n_head);
    total += floats(l.moe.router_bias, hp.n_expert) + floats(l.moe.selection_bias, hp.n_expert) +
             floats(l.moe.shared_gate, hp.n_embd);
    if (l.gdn.qkv.data)
      total += static_cast<int64_t>(l.conv.size()) * 4 + (2 * p.n_v_heads + p.d_v) * 4;
  }
  return total;
}

void DecoderModel::set_matmul_settings(const ops::MatmulSettings& settings) {
  workspace_.matmul = settings;
  if (settings.compact_tiles && !settings.pack_tiles && file_.writable())
    rewrite_into_compact_tiles();
  if (!settings.pack_tiles || !settings.tile_gemm) {
    packed_tiles_.unpack();
    return;
  }
  if (packed_tiles_.bytes() > 0) return;  // packed already
  for (LayerWeights& l : layers_)
    for_each_matrix(l, [&](ops::WeightMatrix& w) { packed_tiles_.pack(w); });
  packed_tiles_.pack(output_);
  if (packed_tiles_.bytes() > 0)
    log::debug("weights packed into tiles: {:.1f} MiB",
               static_cast<double>(packed_tiles_.bytes()) / (1 << 20));
}

void DecoderModel::rewrite_into_compact_tiles() {
  if (compact_bytes_ > 0) return;
  const auto start = std::chrono::steady_clock::now();
  ops::CompactTiles compact;
  // The embedding's rows are read one by one (and the output's, when tied to it): never rewritten.
  const auto convert = [&](ops::WeightMatrix& w, int64_t row_group) {
    if (w.data && w.data != token_embd_.data) compact.convert(w, row_group);
  };
  const int64_t n_expert = std::max<int64_t>(1, hparams_.n_expert);
  const auto convert_layer = [&](LayerWeights& l) {
    for_each_matrix(l, [&](ops::WeightMatrix& w) {
      const bool experts = &w == &l.moe.gate_exps || &w == &l.moe.up_exps || &w == &l.moe.down_exps;
      convert(w, experts ? w.rows / n_expert : w.rows);  // an expert's rows are used alone
    });
  };
  for (LayerWeights& l : layers_) convert_layer(l);
  convert(output_, output_.rows);
  if (nextn_)
    nextn_->for_each_matrix(convert_layer, [&](ops::WeightMatrix& w) { convert(w, w.rows); });
  compact_bytes_ = compact.bytes();
  if (compact_bytes_ > 0) {
    log::debug("{:.1f} MiB of weights rewritten into compact tiles in {:.2f} s",
               static_cast<double>(compact_bytes_) / (1 << 20),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

int64_t DecoderModel::expert_bytes() const {
  const size_t first = spec_.first_moe_layer();
  if (first >= layers_.size()) return 0;
  const LayerWeights& l = layers_[first];
  const ModelHParams& hp = hparams_;
  // gpt-oss's per-expert biases (f32) are read with the expert's matrices.
  const int64_t bias_floats = (l.moe.gate_bias ? hp.n_ff_exp : 0) +
                              (l.moe.up_bias ? hp.n_ff_exp : 0) + (l.moe.down_bias ? hp.n_embd : 0);
  return matrix_bytes({&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps}) / hp.n_expert +
         bias_floats * 4;
}

int64_t DecoderModel::recurrent_bytes_per_token() const {
  if (state_floats_ == 0) return 0;
  return 2 * 4 * (state_floats_ - kHeader);  // every layer's conv state and S, read and written
}

}  // namespace strata
