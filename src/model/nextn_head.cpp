#include "model/nextn_head.h"

#include <algorithm>

#include "model/decoder.h"
#include "ops/rms_norm.h"
#include "quant/quant.h"
#include "util/error.h"

namespace strata {
namespace {

std::string nextn_tensor(int64_t layer, const char* what) {
  return "blk." + std::to_string(layer) + ".nextn." + what + ".weight";
}

}  // namespace

NextnHead::NextnHead(const ModelHParams& hp, const LayerSpec& layer_spec)
    : hp_(hp),
      layer_spec_(layer_spec),
      rope_(hp.rope_style, hp.head_dim, hp.n_rot, hp.rope_base, hp.yarn) {}

std::unique_ptr<NextnHead> NextnHead::load(WeightLoader& loader, const ModelHParams& hp,
                                           const ModelSpec& spec,
                                           const ops::WeightMatrix& token_embd,
                                           const ops::WeightMatrix& output,
                                           const float* output_norm) {
  if (spec.skipped_layers == 0) return nullptr;
  const int64_t il = hp.n_layer;
  ops::WeightMatrix eh_proj =
      loader.optional_matrix(nextn_tensor(il, "eh_proj"), 2 * hp.n_embd, hp.n_embd);
  if (!eh_proj.data) return nullptr;
  // The block is an attention layer like the trunk's last one (Qwen3.5's MTP block is one of its
  // full-attention layers, not a Gated DeltaNet one).
  const auto last_attention = std::find_if(spec.layers.rbegin(), spec.layers.rend(),
                                           [](const LayerSpec& l) { return !l.recurrent(); });
  STRATA_CHECK(last_attention != spec.layers.rend(), "a NextN block after no attention layer");
  std::unique_ptr<NextnHead> head(new NextnHead(hp, *last_attention));
  ModelSpec with_block = spec;
  with_block.layers.resize(static_cast<size_t>(il));
  with_block.layers.push_back(*last_attention);
  head->layer_ = load_layer_weights(loader, hp, with_block, il);
  head->eh_proj_ = eh_proj;
  head->enorm_ = loader.vector(nextn_tensor(il, "enorm"), hp.n_embd);
  head->hnorm_ = loader.vector(nextn_tensor(il, "hnorm"), hp.n_embd);
  head->head_norm_ = loader.optional_vector(nextn_tensor(il, "shared_head_norm"), hp.n_embd);
  if (!head->head_norm_) head->head_norm_ = output_norm;
  head->embedding_ =
      loader.optional_matrix(nextn_tensor(il, "embed_tokens"), hp.n_embd, hp.n_vocab);
  if (!head->embedding_.data) head->embedding_ = token_embd;
  head->head_ = loader.optional_matrix(nextn_tensor(il, "shared_head_head"), hp.n_embd, hp.n_vocab);
  if (!head->head_.data) head->head_ = output;
  return head;
}

void NextnHead::forward(std::span<const int32_t> tokens, const float* hidden, int64_t pos0,
                        const ops::KvLayerView& cache, float* hidden_out, float* logits,
                        NextnWorkspace& ws, ThreadPool& pool) const {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return;
  const int64_t d = hp_.n_embd;
  const auto size = static_cast<size_t>(n * d);
  ws.x.resize(size);
  ws.normed.resize(size);
  ws.delta.resize(size);
  ws.joined.resize(2 * size);

  // [enorm(embedding), hnorm(hidden)] per row, projected to n_embd.
  embed_tokens(embedding_, tokens, ws.normed.data());
  for (int64_t t = 0; t < n; ++t) {
    float* row = ws.joined.data() + 2 * t * d;
    ops::rms_norm(ws.normed.data() + t * d, enorm_, row, d, hp_.rms_eps);
    ops::rms_norm(hidden + t * d, hnorm_, row + d, d, hp_.rms_eps);
  }
  ws.projection_input.quantize(ws.joined.data(), n, 2 * d, 2 * d,
                               quant::traits(eh_proj_.type).activation_type);
  ops::matmul(eh_proj_, ws.projection_input, ws.x.data(), d, pool, ws.blocks.matmul);

  // The layer, as the decoder runs an attention layer (one sequence: the head's cache).
  rms_norm_rows(ws.x.data(), layer_.attn_norm, ws.normed.data(), n, d, hp_.rms_eps);
  ws.sequence.assign(static_cast<size_t>(n), 0);
  ws.position.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) ws.position[static_cast<size_t>(t)] = pos0 + t;
  const TokenPlacement at{ws.sequence, ws.position, std::span<const ops::KvLayerView>(&cache, 1)};
  attention_mixer(layer_, layer_spec_, attention_params(hp_, rope_), ws.normed.data(), n, at,
                  ws.delta.data(), ws.blocks, pool);
  add_residual(ws.x.data(), ws.delta.data(), n * d);
  rms_norm_rows(ws.x.data(), layer_.ffn_norm, ws.normed.data(), n, d, hp_.rms_eps);
  ffn_mixer(layer_, layer_spec_, moe_params(hp_), ws.normed.data(), n, ws.delta.data(), ws.blocks,
            pool);
  add_residual(ws.x.data(), ws.delta.data(), n * d);
  std::copy(ws.x.begin(), ws.x.end(), hidden_out);

  if (logits) {
    const int32_t last = static_cast<int32_t>(n - 1);
    output_head(head_, head_norm_, hp_.rms_eps, ws.x.data(), std::span<const int32_t>(&last, 1),
                logits, ws.blocks, pool);
  }
}

}  // namespace strata
