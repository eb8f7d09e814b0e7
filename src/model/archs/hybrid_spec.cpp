#include "model/archs/hybrid_spec.h"

#include "ops/gated_delta_net.h"
#include "util/error.h"

namespace strata::archs {

ModelSpec read_hybrid_spec(const GgufFile& file, const std::string& arch, ModelHParams& hp) {
  auto get = [&](const std::string& key) {
    const int64_t v = file.get_int(arch + "." + key);
    STRATA_CHECK(v > 0, "{}: {}.{} must be positive, found {}", file.name(), arch, key, v);
    return v;
  };

  ModelSpec o;
  const int64_t nextn = file.find_int(arch + ".nextn_predict_layers").value_or(0);
  STRATA_CHECK(nextn >= 0 && nextn < hp.n_layer, "{}: {}.nextn_predict_layers is {} of {} blocks",
               file.name(), arch, nextn, hp.n_layer);
  hp.n_layer -= nextn;
  o.skipped_layers = nextn;

  GatedDeltaNetParams& g = o.gdn;
  g.conv_kernel = get("ssm.conv_kernel");
  g.d_k = get("ssm.state_size");
  g.n_k_heads = get("ssm.group_count");
  g.n_v_heads = get("ssm.time_step_rank");
  const int64_t inner = get("ssm.inner_size");
  STRATA_CHECK(inner % g.n_v_heads == 0 && g.n_v_heads % g.n_k_heads == 0,
               "{}: ssm.inner_size {} / time_step_rank {} / group_count {} do not divide",
               file.name(), inner, g.n_v_heads, g.n_k_heads);
  STRATA_CHECK(g.conv_kernel <= ops::kMaxConvKernel, "{}: ssm.conv_kernel {} exceeds {}",
               file.name(), g.conv_kernel, ops::kMaxConvKernel);
  g.d_v = inner / g.n_v_heads;
  g.rms_eps = hp.rms_eps;
  g.chunked_min_tokens = 0;  // sequential recurrence: measured faster on CPU (see ops)

  LayerSpec attention, recurrent;
  attention.attention.qk_norm = AttentionLayout::QkNorm::required;
  attention.attention.gated_q = true;
  attention.moe = true;
  attention.moe_layout.n_ff_shexp =
      file.find_int(arch + ".expert_shared_feed_forward_length").value_or(0);
  attention.post_attention_norm = true;
  recurrent = attention;
  recurrent.mixer = LayerSpec::Mixer::gated_delta_net;
  if (const GgufArray* layers = file.find_array(arch + ".attention.recurrent_layers")) {
    STRATA_CHECK(static_cast<int64_t>(layers->items.size()) >= hp.n_layer,
                 "{}: {}.attention.recurrent_layers has {} entries for {} layers", file.name(),
                 arch, layers->items.size(), hp.n_layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const GgufValue& v = layers->items[static_cast<size_t>(il)];
      const bool is_recurrent = v.as_bool().value_or(v.as_int().value_or(0) != 0);
      o.layers.push_back(is_recurrent ? recurrent : attention);
    }
  } else {
    const int64_t interval = file.find_int(arch + ".full_attention_interval").value_or(4);
    STRATA_CHECK(interval > 0, "{}: full_attention_interval must be positive, found {}",
                 file.name(), interval);
    for (int64_t il = 0; il < hp.n_layer; ++il)
      o.layers.push_back((il + 1) % interval != 0 ? recurrent : attention);
  }
  return o;
}

}  // namespace strata::archs
