#include "model/layer_weights.h"

#include <cstdint>
#include <cstring>

#include "util/error.h"

namespace strata {
namespace {

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
  // Rows start on a 64-byte boundary, as in the mapped file: the float kernels' summation order
  // follows the weights' alignment, so results do not depend on where the heap put the buffer.
  constexpr size_t kAlign = 64;
  std::vector<uint8_t> buffer(static_cast<size_t>(ba.bytes() + (in.data ? in.bytes() : 0)) +
                              kAlign);
  uint8_t* next = buffer.data() + (kAlign - reinterpret_cast<uintptr_t>(buffer.data()) % kAlign);
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

// What the file holds that the layer's weights are built from (fused projections, the
// convolution as stored) besides what the weights point at directly.
struct FileOnly {
  ops::WeightMatrix fused_in, fused_ba;
  const float* conv = nullptr;  // GGUF {kernel, conv_dim}
};

ops::WeightMatrix* matrix_slot(LayerWeights& w, FileOnly& f, LayerTensor what) {
  switch (what) {
    case LayerTensor::attn_q:
      return &w.attn.wq;
    case LayerTensor::attn_k:
      return &w.attn.wk;
    case LayerTensor::attn_v:
      return &w.attn.wv;
    case LayerTensor::attn_output:
      return &w.attn.wo;
    case LayerTensor::gdn_qkv:
      return &w.gdn.qkv;
    case LayerTensor::gdn_gate:
      return &w.gdn.gate;
    case LayerTensor::gdn_beta:
      return &w.gdn.beta;
    case LayerTensor::gdn_alpha:
      return &w.gdn.alpha;
    case LayerTensor::gdn_ba:
      return &f.fused_ba;
    case LayerTensor::gdn_in:
      return &f.fused_in;
    case LayerTensor::gdn_out:
      return &w.gdn.out;
    case LayerTensor::ffn_gate:
      return &w.dense.gate;
    case LayerTensor::ffn_up:
      return &w.dense.up;
    case LayerTensor::ffn_down:
      return &w.dense.down;
    case LayerTensor::router:
      return &w.moe.router;
    case LayerTensor::gate_exps:
      return &w.moe.gate_exps;
    case LayerTensor::up_exps:
      return &w.moe.up_exps;
    case LayerTensor::down_exps:
      return &w.moe.down_exps;
    case LayerTensor::shexp_gate:
      return &w.moe.shared.gate;
    case LayerTensor::shexp_up:
      return &w.moe.shared.up;
    case LayerTensor::shexp_down:
      return &w.moe.shared.down;
    default:
      return nullptr;
  }
}

const float** floats_slot(LayerWeights& w, FileOnly& f, LayerTensor what) {
  switch (what) {
    case LayerTensor::attn_norm:
      return &w.attn_norm;
    case LayerTensor::ffn_norm:
      return &w.ffn_norm;
    case LayerTensor::attn_q_norm:
      return &w.attn.q_norm;
    case LayerTensor::attn_k_norm:
      return &w.attn.k_norm;
    case LayerTensor::attn_q_bias:
      return &w.attn.bq;
    case LayerTensor::attn_k_bias:
      return &w.attn.bk;
    case LayerTensor::attn_v_bias:
      return &w.attn.bv;
    case LayerTensor::attn_output_bias:
      return &w.attn.bo;
    case LayerTensor::attn_sinks:
      return &w.attn.sinks;
    case LayerTensor::gdn_conv:
      return &f.conv;
    case LayerTensor::gdn_dt_bias:
      return &w.gdn.dt_bias;
    case LayerTensor::gdn_a:
      return &w.gdn.a_neg;
    case LayerTensor::gdn_norm:
      return &w.gdn.norm;
    case LayerTensor::router_bias:
      return &w.moe.router_bias;
    case LayerTensor::selection_bias:
      return &w.moe.selection_bias;
    case LayerTensor::gate_exps_bias:
      return &w.moe.gate_bias;
    case LayerTensor::up_exps_bias:
      return &w.moe.up_bias;
    case LayerTensor::down_exps_bias:
      return &w.moe.down_bias;
    case LayerTensor::shexp_router:
      return &w.moe.shared_gate;
    default:
      return nullptr;
  }
}

void load_tensor(WeightLoader& loader, const TensorSpec& t, LayerWeights& w, FileOnly& f) {
  if (t.form == TensorForm::floats) {
    const float** slot = floats_slot(w, f, t.what);
    STRATA_CHECK(slot, "{}: no place for this tensor in a layer", t.name);
    if (t.shape.size() == 1) {
      *slot = t.optional ? loader.optional_vector(t.name, t.shape[0])
                         : loader.vector(t.name, t.shape[0]);
    } else {
      *slot = loader.floats(t.name, {t.shape[0], t.shape[1]});
    }
    return;
  }
  ops::WeightMatrix* slot = matrix_slot(w, f, t.what);
  STRATA_CHECK(slot, "{}: no place for this tensor in a layer", t.name);
  if (t.form == TensorForm::experts) {
    *slot = loader.experts(t.name, t.shape[0], t.shape[1], t.shape[2]);
  } else {
    *slot = t.optional ? loader.optional_matrix(t.name, t.shape[0], t.shape[1])
                       : loader.matrix(t.name, t.shape[0], t.shape[1]);
  }
}

// The layer's Gated DeltaNet weights from what the file holds: fused projections regrouped, the
// convolution transposed to [tap][channel] so it runs along channels.
void finish_gated_delta_net(const ModelSpec& spec, const FileOnly& f, LayerWeights& w) {
  const GatedDeltaNetParams& p = spec.gdn;
  if (spec.projections != GdnProjections::separate)
    w.split = split_fused_projections(f.fused_in, f.fused_ba, p, w.gdn);
  const int64_t conv_dim = p.conv_dim();
  w.conv.resize(static_cast<size_t>(p.conv_kernel * conv_dim));
  for (int64_t c = 0; c < conv_dim; ++c) {
    for (int64_t j = 0; j < p.conv_kernel; ++j)
      w.conv[static_cast<size_t>(j * conv_dim + c)] = f.conv[c * p.conv_kernel + j];
  }
  w.gdn.conv = w.conv.data();
}

}  // namespace

LayerWeights load_layer_weights(WeightLoader& loader, const ModelHParams& hp, const ModelSpec& spec,
                                int64_t layer) {
  LayerWeights w;
  FileOnly f;
  for (const TensorSpec& t : layer_tensors(hp, spec, layer)) load_tensor(loader, t, w, f);
  STRATA_CHECK(!w.attn.q_norm == !w.attn.k_norm,
               "layer {}: attn_q_norm and attn_k_norm come in pairs", layer);
  if (spec.layers[static_cast<size_t>(layer)].recurrent()) finish_gated_delta_net(spec, f, w);
  return w;
}

}  // namespace strata
