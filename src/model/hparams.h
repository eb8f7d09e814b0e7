#pragma once
// Hyper-parameters of a decoder model, read from "{arch}.*" GGUF metadata.

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "model/blocks.h"
#include "ops/rope.h"

namespace strata {

struct ModelHParams {
  std::string arch;
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // attention.key_length, or n_embd / n_head
  int64_t n_ff = 0;      // dense FFN (feed_forward_length); 0 when absent
  int64_t n_expert = 0;  // 0 for dense models
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;  // expert_feed_forward_length
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-6f;
  float rope_base = 10000.0f;
  int64_t n_rot = 0;  // rope.dimension_count, default head_dim
  ops::RopeStyle rope_style = ops::RopeStyle::norm;
  bool expert_weights_norm = true;  // renormalize the top-k router weights
  ExpertGating expert_gating = ExpertGating::softmax;
  float expert_weights_scale = 1.0f;
  ExpertActivation expert_activation = ExpertActivation::swiglu;
  ops::YarnScaling yarn;       // factor 0: none
  int64_t sliding_window = 0;  // the window of sliding-window layers (gpt-oss); 0: none

  // The window layer `layer` attends over (0: all positions); see sliding_layer_window.
  int64_t layer_window(int64_t layer) const;
};

// gpt-oss's files carry no pattern key: its even layers slide, its odd ones attend over all
// positions (the GGUF engines' default period 2). The one place that says which layers slide.
inline int64_t sliding_layer_window(int64_t layer, int64_t sliding_window) {
  return sliding_window > 0 && layer % 2 == 0 ? sliding_window : 0;
}

inline int64_t ModelHParams::layer_window(int64_t layer) const {
  return sliding_layer_window(layer, sliding_window);
}

// Reads the keys every transformer arch shares; the vocabulary size comes from
// "{arch}.vocab_size" or the tokenizer's token list, else the embedding tensor.
ModelHParams read_common_hparams(const GgufFile& file, const std::string& arch);

}  // namespace strata
