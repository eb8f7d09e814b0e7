#pragma once
// The shared building blocks of decoder layers. Each takes a weights struct and a params struct
// and works on a batch of n tokens: x is [n][n_embd], row-major.

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "model/activation_observer.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/rope.h"
#include "util/thread_pool.h"

namespace strata {

// Activations of one input quantized per partner type, so q/k/v (or gate/up) that share an
// input but differ in weight type each quantize it at most once.
class ActivationCache {
 public:
  void reset(const float* x, int64_t n_rows, int64_t cols) {
    x_ = x;
    rows_ = n_rows;
    cols_ = cols;
    valid_.assign(valid_.size(), false);
  }
  const ops::QuantizedRows& get(GgmlType type);
  const float* values() const { return x_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

 private:
  const float* x_ = nullptr;
  int64_t rows_ = 0, cols_ = 0;
  std::vector<GgmlType> types_;
  std::deque<ops::QuantizedRows> rows_by_type_;  // deque: references stay valid as it grows
  std::vector<bool> valid_;
};

// The rotary angles of a step's positions, computed by its first attention layer for all of them.
struct RopeAngles {
  const ops::Rope* rope = nullptr;
  std::vector<int64_t> positions;
  std::vector<float> cos_sin;  // [token][rope->n_rot()]
};

// The buffers the blocks compute in, owned by the caller (a decoder keeps one for its steps) and
// passed to every block: named per block, grown on demand, so no buffer serves two purposes at
// once. One per thread that calls blocks.
struct BlockWorkspace {
  // Attention: projections, the attended values, the gate of a gated query.
  std::vector<float> q, k, v, attn, gate, query_gate;
  RopeAngles rope_angles;
  ops::AttentionPartials attention_partials;  // ranges attended apart (attend_by_range)
  ActivationCache attn_input, attn_output;
  // Dense FFN (and the shared expert).
  std::vector<float> ffn_gate, ffn_up;
  ActivationCache ffn_input, ffn_hidden;
  // MoE: router logits, (token, expert) rows of the expert products, the shared expert's output.
  std::vector<float> router_logits, expert_gate, expert_up, expert_down, shared_out;
  ActivationCache moe_input;
  ops::QuantizedRows expert_hidden;
  // Gated DeltaNet.
  std::vector<float> gdn_qkv, gdn_mixed, gdn_z, gdn_b, gdn_a, gdn_gates, gdn_out;
  ActivationCache gdn_input, gdn_gated;
  // Output head: the normed rows that want logits, as the head's activations.
  std::vector<float> head_normed;
  ops::QuantizedRows head_input;
  // How the blocks' matrix products run (the model's settings).
  ops::MatmulSettings matmul;
  ActivationObserver* observer = nullptr;  // sees every product's input rows when set
};

// ---- attention --------------------------------------------------------------------------

struct AttentionWeights {
  ops::WeightMatrix wq;           // [n_embd] -> [n_head * head_dim] (x2 when output_gate)
  ops::WeightMatrix wk;           // [n_embd] -> [n_head_kv * head_dim]
  ops::WeightMatrix wv;           // [n_embd] -> [n_head_kv * head_dim]
  ops::WeightMatrix wo;           // [n_head * head_dim] -> [n_embd]
  const float* q_norm = nullptr;  // [head_dim], per-head RMSNorm (Qwen3); null when absent
  const float* k_norm = nullptr;
  // Optional biases of the projections (gpt-oss all four, GLM-4.5 q/k/v); null when absent.
  const float* bq = nullptr;     // [n_head * head_dim] (query part only when output_gate)
  const float* bk = nullptr;     // [n_head_kv * head_dim]
  const float* bv = nullptr;     // [n_head_kv * head_dim]
  const float* bo = nullptr;     // [n_embd]
  const float* sinks = nullptr;  // [n_head] attention-sink logits (gpt-oss); null when absent
};

struct AttentionParams {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float rms_eps = 1e-6f;
  const ops::Rope* rope = nullptr;
  // Gated attention (Qwen3-Next, Qwen3.5): wq gives per head head_dim query values then
  // head_dim gate values, and each head's output is multiplied by sigmoid(gate).
  bool output_gate = false;
  // Sliding-window layers (gpt-oss): position p attends to positions q with p - q < window.
  // 0: full causal attention.
  int64_t sliding_window = 0;
};

// Where each token of a batch lives: token t is at position[t] of sequence sequence[t], whose
// cache for this layer is caches[sequence[t]].
struct TokenPlacement {
  std::span<const int32_t> sequence;  // [n]
  std::span<const int64_t> position;  // [n]
  std::span<const ops::KvLayerView> caches;
};

// out[n][n_embd] = attention(x) for a batch of tokens from one or several sequences. Every
// token's key and value are stored in its sequence's cache first; then each token attends over
// positions [0, position] of its own sequence (causal, and blind to the other sequences).
void attention_block(const AttentionWeights& w, const AttentionParams& p, const float* x, int64_t n,
                     const TokenPlacement& at, float* out, BlockWorkspace& ws, ThreadPool& pool);

// ---- feed-forward -----------------------------------------------------------------------

struct DenseFfnWeights {
  ops::WeightMatrix gate;  // [n_embd] -> [n_ff]
  ops::WeightMatrix up;    // [n_embd] -> [n_ff]
  ops::WeightMatrix down;  // [n_ff] -> [n_embd]
};

// out = down(silu(gate x) * up x)
void dense_ffn_block(const DenseFfnWeights& w, const float* x, int64_t n, float* out,
                     BlockWorkspace& ws, ThreadPool& pool);

struct MoeFfnWeights {
  ops::WeightMatrix router;     // [n_embd] -> [n_expert]
  ops::WeightMatrix gate_exps;  // [n_expert][n_ff_exp][n_embd]
  ops::WeightMatrix up_exps;    // [n_expert][n_ff_exp][n_embd]
  ops::WeightMatrix down_exps;  // [n_expert][n_embd][n_ff_exp]
  // Optional shared expert, added to every token: sigmoid(shared_gate . x) * shared(x) when
  // shared_gate is set, else shared(x). Absent when shared.gate.data is null.
  DenseFfnWeights shared;              // [n_embd] -> [n_ff_shexp] -> [n_embd]
  const float* shared_gate = nullptr;  // [n_embd]
  // Optional biases (gpt-oss): router [n_expert], per expert gate/up [n_expert][n_ff_exp] and
  // down [n_expert][n_embd]. selection_bias (GLM-4.5's score correction, [n_expert]) only
  // changes which experts are chosen (sigmoid gating).
  const float* router_bias = nullptr;
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
  const float* selection_bias = nullptr;
};

// How the router's logits become expert weights: softmax over all experts (top-k of the
// probabilities, optionally renormalized), or GLM-4.5's per-expert sigmoid.
enum class ExpertGating { softmax, sigmoid };
// The experts' activation: SwiGLU, or gpt-oss's clamped variant (ops::swiglu_oai).
enum class ExpertActivation { swiglu, swiglu_oai };

struct MoeParams {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  bool renormalize = true;
  ExpertGating gating = ExpertGating::softmax;
  float weights_scale = 1.0f;  // routed weights multiplied by this (GLM-4.5: 2.5)
  ExpertActivation activation = ExpertActivation::swiglu;
  // When set, counts how often each expert was selected ([n_expert]) and how many distinct
  // experts ran this step (their weight bytes are what the step streamed).
  uint64_t* selection_counts = nullptr;
  int64_t* distinct_experts = nullptr;
};

// out = sum over the top-k experts of weight_e * down_e(silu(gate_e x) * up_e x) (+ the shared
// expert). Tokens are
// grouped by expert so each selected expert's weights are read once per call; experts no token
// selected are never touched.
void moe_ffn_block(const MoeFfnWeights& w, const MoeParams& p, const float* x, int64_t n,
                   float* out, BlockWorkspace& ws, ThreadPool& pool);

// out[n][n_embd] = sum over the pairs (t, j) whose expert `included` holds (null: every expert)
// of chosen_weight[t * k + j] * expert_e(x_t), where e = chosen[t * k + j]: the routed experts of
// moe_ffn_block for selections made elsewhere (hybrid execution: the GPU routes and computes the
// experts it holds, the CPU these). No shared expert.
void moe_experts_block(const MoeFfnWeights& w, const MoeParams& p, const float* x, int64_t n,
                       std::span<const int32_t> chosen, std::span<const float> chosen_weight,
                       const std::vector<bool>* included, float* out, BlockWorkspace& ws,
                       ThreadPool& pool);

// ---- Gated DeltaNet (linear attention) --------------------------------------------------

struct GatedDeltaNetWeights {
  ops::WeightMatrix qkv;           // [n_embd] -> [conv_dim]: q heads, k heads, v heads
  ops::WeightMatrix gate;          // [n_embd] -> [n_v_heads * d_v] (z, the output gate)
  ops::WeightMatrix beta;          // [n_embd] -> [n_v_heads]
  ops::WeightMatrix alpha;         // [n_embd] -> [n_v_heads]
  const float* conv = nullptr;     // [conv_kernel][conv_dim]
  const float* dt_bias = nullptr;  // [n_v_heads]
  const float* a_neg = nullptr;    // [n_v_heads] = -exp(A_log)
  const float* norm = nullptr;     // [d_v], shared by the heads
  ops::WeightMatrix out;           // [n_v_heads * d_v] -> [n_embd]
};

struct GatedDeltaNetParams {
  int64_t n_k_heads = 0;
  int64_t n_v_heads = 0;  // a multiple of n_k_heads
  int64_t d_k = 0;
  int64_t d_v = 0;
  int64_t conv_kernel = 4;
  float rms_eps = 1e-6f;
  // Which k-head value head h reads: h % n_k_heads (Qwen3.5, reordered by the converter) or
  // h / (n_v_heads / n_k_heads) (Qwen3-Next).
  bool k_head_modulo = true;
  // Runs of at least this many tokens use the chunked recurrence (0: never).
  int64_t chunked_min_tokens = 0;

  int64_t conv_dim() const { return 2 * n_k_heads * d_k + n_v_heads * d_v; }
  // Floats of one sequence's state: conv inputs, then S of every value head.
  int64_t conv_state_floats() const { return (conv_kernel - 1) * conv_dim(); }
  int64_t ssm_state_floats() const { return n_v_heads * d_v * d_k; }
};

// Rows [begin, begin + count) of a batch: consecutive tokens of one sequence, in order, and
// that sequence's state for this layer.
struct RecurrentRun {
  int64_t begin = 0;
  int64_t count = 0;
  float* conv_state = nullptr;  // [conv_kernel - 1][conv_dim]
  float* ssm_state = nullptr;   // [n_v_heads][d_v][d_k]
};

// out[n][n_embd] = the Gated DeltaNet layer applied to x[n][n_embd]; every row belongs to
// exactly one run, whose states advance over its tokens.
void gated_delta_net_block(const GatedDeltaNetWeights& w, const GatedDeltaNetParams& p,
                           const float* x, int64_t n, std::span<const RecurrentRun> runs,
                           float* out, BlockWorkspace& ws, ThreadPool& pool);

}  // namespace strata
