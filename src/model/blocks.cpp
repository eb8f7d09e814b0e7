#include "model/blocks.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <vector>

#include "ops/activations.h"
#include "ops/gated_delta_net.h"
#include "ops/moe_routing.h"
#include "ops/rms_norm.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/profiler.h"

namespace strata {
namespace {

// gpt-oss's expert activation constants (fixed by the model, not in the file).
constexpr float kSwigluOaiAlpha = 1.702f;
constexpr float kSwigluOaiLimit = 7.0f;

// The most tokens one attention task takes: a block's rows stay in a thread's caches.
constexpr int64_t kMaxAttentionBlock = 16;

// Steps of up to this many tokens (verify steps) run the router's product and the routing in
// one pool run, a block of tokens per thread, instead of the routing on one thread after it
// (16 tokens' routing was 4% of a 16-token step of the trained model, one thread busy). Larger
// batches keep the product split by rows, which reads the router once.
constexpr int64_t kRoutedInTasksMaxTokens = 32;

// b with room for n floats (its contents are the caller's to write).
float* room(std::vector<float>& b, int64_t n) {
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return b.data();
}

// The same input rows by several matrices (out: w.rows values per row) in one pool run: a
// decode step's small products each cost a barrier.
struct Projection {
  const ops::WeightMatrix& w;
  float* out;
};
void project_together(std::initializer_list<Projection> projections, ActivationCache& input,
                      const BlockWorkspace& ws, ThreadPool& pool) {
  std::array<ops::MatmulPart, 4> parts;  // a Gated DeltaNet layer's four at most
  STRATA_CHECK(projections.size() <= parts.size(), "{} projections together, at most {}",
               projections.size(), parts.size());
  // Every activation type first: a new one may move those quantized before.
  for (const Projection& p : projections) {
    if (ws.observer) ws.observer->dense(p.w.data, input.values(), input.rows(), input.cols());
    input.get(quant::traits(p.w.type).activation_type);
  }
  size_t n = 0;
  for (const Projection& p : projections)
    parts[n++] = {&p.w, &input.get(quant::traits(p.w.type).activation_type), p.out, p.w.rows};
  ops::matmul_together({parts.data(), n}, pool, ws.matmul);
}

void project(const ops::WeightMatrix& w, ActivationCache& input, float* out,
             const BlockWorkspace& ws, ThreadPool& pool) {
  project_together({{w, out}}, input, ws, pool);
}

// Runs fn(expert, row_begin, row_end) over the pool for every active expert and every block of
// its rows (`expert`: one expert's matrix; n_tokens: the step's): the (selected expert, row
// block) work split, so each expert's bytes stream once. The experts share the run, so their
// blocks together balance the threads. Then done(expert), on the thread that finished the
// expert's last block and after every block's writes: the expert's own follow-up work runs in the
// same pool run instead of on one thread after it.
template <typename Fn, typename Done>
void for_each_expert_block(const std::vector<int32_t>& active, const ops::WeightMatrix& expert,
                           int64_t n_tokens, ThreadPool& pool, Fn fn, Done done) {
  const int64_t rows = expert.rows;
  const int64_t block =
      ops::matmul_row_block(expert, n_tokens, pool.size(), static_cast<int64_t>(active.size()));
  const int64_t blocks = (rows + block - 1) / block;
  std::vector<std::atomic<int64_t>> blocks_left(active.size());
  for (auto& left : blocks_left) left.store(blocks, std::memory_order_relaxed);
  pool.run(static_cast<int64_t>(active.size()) * blocks, [&](int64_t task, int) {
    const auto i = static_cast<size_t>(task / blocks);
    const int64_t r0 = task % blocks * block;
    fn(static_cast<int64_t>(active[i]), r0, std::min(rows, r0 + block));
    if (blocks_left[i].fetch_sub(1, std::memory_order_acq_rel) == 1)
      done(static_cast<int64_t>(active[i]));
  });
}

// Tasks of per-token work of a few microseconds: for a step of a few tokens (decode, short verify
// steps) cheaper on this thread than a round trip through the pool.
template <typename Fn>
void run_small_steps_here(ThreadPool& pool, int64_t n_tokens, int64_t count, const Fn& fn) {
  if (n_tokens <= 4) {
    for (int64_t task = 0; task < count; ++task) fn(task, 0);
  } else {
    pool.run(count, fn);
  }
}

// rows[t] += bias for n rows of `cols` values (no bias: nothing).
void add_bias_rows(float* rows, const float* bias, int64_t n, int64_t cols) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < cols; ++i) rows[t * cols + i] += bias[i];
  }
}

const ops::KvLayerView& cache_of(const TokenPlacement& at, int64_t token) {
  return at.caches[static_cast<size_t>(at.sequence[static_cast<size_t>(token)])];
}

}  // namespace

const ops::QuantizedRows& ActivationCache::get(GgmlType type) {
  for (size_t i = 0; i < types_.size(); ++i) {
    if (types_[i] != type) continue;
    if (!valid_[i]) {
      rows_by_type_[i].quantize(x_, rows_, cols_, cols_, type);
      valid_[i] = true;
    }
    return rows_by_type_[i];
  }
  types_.push_back(type);
  rows_by_type_.emplace_back().quantize(x_, rows_, cols_, cols_, type);
  valid_.push_back(true);
  return rows_by_type_.back();
}

void attention_block(const AttentionWeights& w, const AttentionParams& p, const float* x, int64_t n,
                     const TokenPlacement& at, float* out, BlockWorkspace& ws, ThreadPool& pool) {
  const int64_t hd = p.head_dim;
  const int64_t q_dim = p.n_head * hd, kv_dim = p.n_head_kv * hd;
  float* q = room(ws.q, n * q_dim);
  float* k = room(ws.k, n * kv_dim);
  float* v = room(ws.v, n * kv_dim);
  float* attn = room(ws.attn, n * q_dim);
  float* gate = p.output_gate ? room(ws.gate, n * q_dim) : nullptr;

  ActivationCache& input = ws.attn_input;
  input.reset(x, n, w.wq.cols);
  {
    STRATA_PROFILE("attention: q/k/v projections");
    if (p.output_gate) {
      // Per head: head_dim query values, then head_dim gate values.
      float* qg = room(ws.query_gate, n * 2 * q_dim);
      project_together({{w.wq, qg}, {w.wk, k}, {w.wv, v}}, input, ws, pool);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < p.n_head; ++h) {
          const float* src = qg + t * 2 * q_dim + h * 2 * hd;
          std::copy(src, src + hd, q + t * q_dim + h * hd);
          std::copy(src + hd, src + 2 * hd, gate + t * q_dim + h * hd);
        }
      }
    } else {
      project_together({{w.wq, q}, {w.wk, k}, {w.wv, v}}, input, ws, pool);
    }
    add_bias_rows(q, w.bq, n, q_dim);
    add_bias_rows(k, w.bk, n, kv_dim);
    add_bias_rows(v, w.bv, n, kv_dim);
  }

  // Per-head q/k norms, rotary embeddings, then the new keys and values into the cache.
  {
    STRATA_PROFILE("attention: q/k norm, rope, kv store");
    // The step's first attention layer computes the angles; the others find them here.
    RopeAngles& angles = ws.rope_angles;
    const int64_t n_rot = p.rope->n_rot();
    const bool fresh = angles.rope != p.rope || !std::ranges::equal(angles.positions, at.position);
    if (fresh) {
      angles.rope = p.rope;
      angles.positions.assign(at.position.begin(), at.position.end());
      angles.cos_sin.resize(static_cast<size_t>(n * n_rot));
    }
    // A block of consecutive tokens per thread: their head rows are normed together (the norm's
    // rows share its passes), then each token is rotated and stored.
    const int64_t per_block = n <= 4 ? n : (n + pool.size() - 1) / pool.size();
    run_small_steps_here(pool, n, (n + per_block - 1) / per_block, [&](int64_t block, int) {
      const int64_t t0 = block * per_block, t1 = std::min(n, t0 + per_block);
      if (w.q_norm) {
        float* qb = q + t0 * q_dim;
        ops::rms_norm_rows(qb, w.q_norm, qb, (t1 - t0) * p.n_head, hd, p.rms_eps);
      }
      if (w.k_norm) {
        float* kb = k + t0 * kv_dim;
        ops::rms_norm_rows(kb, w.k_norm, kb, (t1 - t0) * p.n_head_kv, hd, p.rms_eps);
      }
      for (int64_t t = t0; t < t1; ++t) {
        float* qt = q + t * q_dim;
        float* kt = k + t * kv_dim;
        const int64_t pos = at.position[static_cast<size_t>(t)];
        float* cos_sin = angles.cos_sin.data() + t * n_rot;
        if (fresh) p.rope->angles(pos, cos_sin);
        p.rope->apply_heads(qt, p.n_head, cos_sin);
        p.rope->apply_heads(kt, p.n_head_kv, cos_sin);
        ops::kv_store(cache_of(at, t), pos, kt, v + t * kv_dim);
      }
    });
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = p.n_head / p.n_head_kv;
  {
    STRATA_PROFILE("attention: over the kv cache");
    // Tasks of consecutive tokens of one sequence (a block) over one KV head or one range of
    // positions: a block's query heads read each chunk of its keys and values once (attend_block
    // and attend_range give every token what it would get alone, so the blocking is free to
    // follow the thread count). Blocks are as large as leaves the threads evenly busy
    // (ops::attention_makespan): a verify step's tokens share their decoded chunks, a prefill
    // leaves a few tasks per thread. The costliest tasks (longest contexts) run first.
    std::vector<int64_t> lengths(static_cast<size_t>(n)), firsts;
    for (int64_t t = 0; t < n; ++t)
      lengths[static_cast<size_t>(t)] = at.position[static_cast<size_t>(t)] + 1;
    if (p.sliding_window > 0) {
      firsts.resize(static_cast<size_t>(n));
      for (size_t t = 0; t < firsts.size(); ++t)
        firsts[t] = std::max<int64_t>(0, lengths[t] - p.sliding_window);
    }
    // A block's tokens [first, first + count): their lengths summed (cost), the longest, and
    // the first position any of them sees.
    struct TokenBlock {
      int64_t first, count, cost, longest, window_first;
    };
    const auto window_first = [&](int64_t t) {
      return firsts.empty() ? int64_t{0} : firsts[static_cast<size_t>(t)];
    };
    const auto blocks_of = [&](int64_t max_block) {
      std::vector<TokenBlock> blocks;
      for (int64_t t = 0; t < n;) {
        TokenBlock b{t, 1, lengths[static_cast<size_t>(t)], lengths[static_cast<size_t>(t)],
                     window_first(t)};
        for (int64_t e = t + 1;
             e < n && b.count < max_block &&
             at.sequence[static_cast<size_t>(e)] == at.sequence[static_cast<size_t>(t)];
             ++e, ++b.count) {
          b.cost += lengths[static_cast<size_t>(e)];
          b.longest = std::max(b.longest, lengths[static_cast<size_t>(e)]);
          b.window_first = std::min(b.window_first, window_first(e));
        }
        blocks.push_back(b);
        t += b.count;
      }
      std::stable_sort(blocks.begin(), blocks.end(),
                       [](const TokenBlock& a, const TokenBlock& b) { return a.cost > b.cost; });
      return blocks;
    };
    const auto shapes_of = [](const std::vector<TokenBlock>& blocks) {
      std::vector<ops::AttentionBlockShape> shapes;
      for (const TokenBlock& b : blocks) shapes.push_back({b.count, b.cost, b.longest});
      return shapes;
    };
    // The block size whose tasks end soonest, the larger on a tie (fewer chunks decoded). Tokens
    // for four full-size tasks per thread or more take the largest blocks without a search. Every
    // attention layer of a step sees the same tokens, so the layers after the first take the
    // size the first found (a layer with another window or head count searches again).
    struct BlockChoice {
      std::vector<int64_t> positions;
      std::vector<int32_t> sequence;
      int64_t window = -1, n_head_kv = 0, n_head = 0, max_block = 0;
      int threads = 0;
      bool by_ranges = false;
    };
    thread_local BlockChoice chosen;
    const int64_t largest = std::min<int64_t>(n, kMaxAttentionBlock);
    const bool plenty = n * p.n_head_kv >= 4 * pool.size() * kMaxAttentionBlock;
    const bool chosen_before = chosen.window == p.sliding_window &&
                               chosen.n_head_kv == p.n_head_kv && chosen.n_head == p.n_head &&
                               chosen.threads == pool.size() &&
                               std::ranges::equal(chosen.positions, at.position) &&
                               std::ranges::equal(chosen.sequence, at.sequence);
    if (!chosen_before) {
      double soonest = std::numeric_limits<double>::infinity();
      for (int64_t max_block = largest; max_block >= (plenty ? largest : 1); --max_block) {
        const std::vector<ops::AttentionBlockShape> shapes = shapes_of(blocks_of(max_block));
        const bool ranges =
            ops::attention_by_ranges(shapes, p.n_head_kv, p.n_head, hd, pool.size());
        const double makespan =
            ops::attention_makespan(shapes, ranges, p.n_head_kv, p.n_head, pool.size());
        if (makespan < soonest) {
          soonest = makespan;
          chosen.max_block = max_block;
          chosen.by_ranges = ranges;
        }
      }
      chosen.positions.assign(at.position.begin(), at.position.end());
      chosen.sequence.assign(at.sequence.begin(), at.sequence.end());
      chosen.window = p.sliding_window;
      chosen.n_head_kv = p.n_head_kv;
      chosen.n_head = p.n_head;
      chosen.threads = pool.size();
    }
    const std::vector<TokenBlock> blocks = blocks_of(chosen.max_block);
    const bool by_ranges = chosen.by_ranges;
    const auto options_of = [&](const TokenBlock& b, int64_t kvh) {
      ops::AttendOptions options;
      if (!firsts.empty()) options.first_position = firsts.data() + b.first;
      if (w.sinks) options.sinks = w.sinks + kvh * group;
      return options;
    };
    if (!by_ranges) {
      pool.run(static_cast<int64_t>(blocks.size()) * p.n_head_kv, [&](int64_t task, int) {
        const TokenBlock& b = blocks[static_cast<size_t>(task / p.n_head_kv)];
        const int64_t kvh = task % p.n_head_kv;
        ops::attend_block(cache_of(at, b.first), kvh, q + b.first * q_dim + kvh * group * hd, q_dim,
                          group, b.count, lengths.data() + b.first, scale,
                          attn + b.first * q_dim + kvh * group * hd, q_dim, options_of(b, kvh));
      });
    } else {
      // Few tasks for the threads (decode, short verify batches) at long contexts: each (block,
      // range of positions) is a task over every KV head, reading whole cache slots; a block's
      // ranges are then merged in order (ops::attend_range: the same bits as attend_block).
      struct RangeTask {
        size_t block;
        int64_t range, partial;
      };
      std::vector<RangeTask> tasks;
      std::vector<int64_t> first_task;  // [block]: its ranges are tasks[first_task[b]...]
      int64_t partials = 0;
      for (size_t bi = 0; bi < blocks.size(); ++bi) {
        const TokenBlock& b = blocks[bi];
        first_task.push_back(static_cast<int64_t>(tasks.size()));
        for (int64_t r = b.window_first / ops::kAttentionRange;
             r < ops::attention_ranges(b.longest); ++r) {
          tasks.push_back({bi, r, partials});
          partials += b.count * p.n_head;
        }
      }
      first_task.push_back(static_cast<int64_t>(tasks.size()));
      ws.attention_partials.reset(1, partials, hd);
      const ops::AttentionPartial all = ws.attention_partials.range(0);
      pool.run(static_cast<int64_t>(tasks.size()), [&](int64_t i, int) {
        const RangeTask& task = tasks[static_cast<size_t>(i)];
        const TokenBlock& b = blocks[task.block];
        ops::attend_range(cache_of(at, b.first), 0, p.n_head_kv, q + b.first * q_dim, q_dim, group,
                          b.count, lengths.data() + b.first, scale, task.range, options_of(b, 0),
                          all.from_row(task.partial, hd));
      });
      pool.run(static_cast<int64_t>(blocks.size()), [&](int64_t bi, int) {
        const TokenBlock& b = blocks[static_cast<size_t>(bi)];
        const int64_t rows = b.count * p.n_head;
        thread_local ops::AttentionPartials sum_storage;
        sum_storage.reset(1, rows, hd);
        const ops::AttentionPartial sum = sum_storage.range(0);
        ops::clear_partial(sum, rows, hd);
        for (int64_t i = first_task[static_cast<size_t>(bi)];
             i < first_task[static_cast<size_t>(bi) + 1]; ++i)
          ops::merge_partial(all.from_row(tasks[static_cast<size_t>(i)].partial, hd), rows, hd,
                             sum);
        ops::finish_attention(sum, b.count, p.n_head, hd, w.sinks, attn + b.first * q_dim, q_dim);
      });
    }
  }

  STRATA_PROFILE("attention: output projection");
  if (gate) {
    for (int64_t i = 0; i < n * q_dim; ++i) attn[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  }
  ActivationCache& attn_out = ws.attn_output;
  attn_out.reset(attn, n, q_dim);
  project(w.wo, attn_out, out, ws, pool);
  add_bias_rows(out, w.bo, n, w.wo.rows);
}

void dense_ffn_block(const DenseFfnWeights& w, const float* x, int64_t n, float* out,
                     BlockWorkspace& ws, ThreadPool& pool) {
  STRATA_PROFILE("dense ffn");
  const int64_t n_ff = w.gate.rows;
  float* gate = room(ws.ffn_gate, n * n_ff);
  float* up = room(ws.ffn_up, n * n_ff);
  ActivationCache& input = ws.ffn_input;
  ActivationCache& hidden = ws.ffn_hidden;
  input.reset(x, n, w.gate.cols);
  project_together({{w.gate, gate}, {w.up, up}}, input, ws, pool);
  ops::swiglu(gate, up, gate, n * n_ff);
  hidden.reset(gate, n, n_ff);
  project(w.down, hidden, out, ws, pool);
}

namespace {

// out += sigmoid(shared_gate . x) * shared_ffn(x) for every token (no gate: weight 1).
void shared_expert(const MoeFfnWeights& w, const float* x, int64_t n, float* out,
                   BlockWorkspace& ws, ThreadPool& pool) {
  const int64_t n_embd = w.router.cols;
  float* shared = room(ws.shared_out, n * n_embd);
  dense_ffn_block(w.shared, x, n, shared, ws, pool);
  for (int64_t t = 0; t < n; ++t) {
    float weight = 1.0f;
    if (w.shared_gate) {
      float dot = 0;
      for (int64_t i = 0; i < n_embd; ++i) dot += w.shared_gate[i] * x[t * n_embd + i];
      weight = 1.0f / (1.0f + std::exp(-dot));
    }
    ops::axpy(weight, shared + t * n_embd, out + t * n_embd, n_embd);
  }
}

}  // namespace

namespace {

// The routed part of the MoE block for selections already made: tokens grouped by expert so
// each selected expert's weights are read once; pairs whose expert `included` leaves out are
// skipped (null: none are).
void routed_experts(const MoeFfnWeights& w, const MoeParams& p, ActivationCache& input, int64_t n,
                    std::span<const int32_t> chosen, std::span<const float> chosen_weight,
                    const std::vector<bool>* included, float* out, BlockWorkspace& ws,
                    ThreadPool& pool) {
  const int64_t n_embd = w.router.cols, k = p.n_expert_used, n_ff = p.n_ff_exp;
  static profile::Slot gate_up_slot("moe: experts gate+up"),
      down_slot("moe: experts down + weighted sum");
  std::optional<profile::Scope> phase;
  const auto wanted = [&](int32_t e) {
    STRATA_CHECK(e >= 0 && e < p.n_expert, "MoE: expert id {} of {} experts", e, p.n_expert);
    return !included || (*included)[static_cast<size_t>(e)];
  };

  // Group tokens by expert: expert e's tokens are ids[first[e] .. first[e+1]).
  std::vector<int64_t> first(static_cast<size_t>(p.n_expert + 1), 0);
  for (int32_t e : chosen)
    if (wanted(e)) first[static_cast<size_t>(e) + 1]++;
  for (int64_t e = 0; e < p.n_expert; ++e) first[e + 1] += first[e];
  const int64_t rows_total = first[static_cast<size_t>(p.n_expert)];  // (token, expert) pairs
  std::vector<int32_t> ids(static_cast<size_t>(rows_total));
  std::vector<float> ids_weight(static_cast<size_t>(rows_total));
  {
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = chosen[static_cast<size_t>(t * k + j)];
        if (!wanted(e)) continue;
        const int64_t slot = fill[static_cast<size_t>(e)]++;
        ids[slot] = static_cast<int32_t>(t);
        ids_weight[slot] = chosen_weight[static_cast<size_t>(t * k + j)];
      }
    }
  }
  std::vector<int32_t> active;  // experts with at least one token
  for (int64_t e = 0; e < p.n_expert; ++e) {
    if (first[e + 1] > first[e]) active.push_back(static_cast<int32_t>(e));
    if (p.selection_counts) p.selection_counts[e] += static_cast<uint64_t>(first[e + 1] - first[e]);
  }
  if (p.distinct_experts) *p.distinct_experts += static_cast<int64_t>(active.size());
  // The threads claim experts in this order: the busiest first, so the last ones claimed are the
  // short ones and the threads end together (each expert's rows and sums do not depend on it).
  std::stable_sort(active.begin(), active.end(), [&](int32_t a, int32_t b) {
    return first[a + 1] - first[a] > first[b + 1] - first[b];
  });
  if (rows_total == 0) {
    std::fill(out, out + n * n_embd, 0.0f);
    return;
  }

  if (ws.observer) {
    for (int32_t e : active) {
      const int64_t off = first[e], count = first[e + 1] - first[e];
      ws.observer->expert(w.gate_exps.data, e, input.values(), &ids[off], count, input.cols());
      ws.observer->expert(w.up_exps.data, e, input.values(), &ids[off], count, input.cols());
    }
  }
  phase.emplace(gate_up_slot);
  // Gate and up projections: work items are (active expert, block of rows). Once an expert's rows
  // are done, its biases, the activation and the quantization of its hidden rows for the down
  // projection follow on the same thread.
  float* gate = room(ws.expert_gate, rows_total * n_ff);
  float* up = room(ws.expert_up, rows_total * n_ff);
  const ops::QuantizedRows& xq = input.get(quant::traits(w.gate_exps.type).activation_type);
  const ops::QuantizedRows& xq_up = input.get(quant::traits(w.up_exps.type).activation_type);
  ops::QuantizedRows& hidden = ws.expert_hidden;
  hidden.shape(rows_total, n_ff, quant::traits(w.down_exps.type).activation_type);
  // Gate and up share row blocks: whole compact tiles if either is in them.
  ops::WeightMatrix gate_up_shape = w.gate_exps.slice(0, n_ff);
  gate_up_shape.compact = w.gate_exps.compact || w.up_exps.compact;
  for_each_expert_block(
      active, gate_up_shape, n, pool,
      [&](int64_t e, int64_t r0, int64_t r1) {
        const int64_t off = first[e], count = first[e + 1] - first[e];
        ops::matmul_rows_indexed(w.gate_exps.slice(e * n_ff, n_ff), xq, &ids[off], count,
                                 gate + off * n_ff, n_ff, r0, r1, ws.matmul);
        ops::matmul_rows_indexed(w.up_exps.slice(e * n_ff, n_ff), xq_up, &ids[off], count,
                                 up + off * n_ff, n_ff, r0, r1, ws.matmul);
      },
      [&](int64_t e) {
        const int64_t off = first[e], count = first[e + 1] - first[e];
        float* g = gate + off * n_ff;
        float* u = up + off * n_ff;
        if (w.gate_bias) {
          add_bias_rows(g, w.gate_bias + e * n_ff, count, n_ff);
          add_bias_rows(u, w.up_bias + e * n_ff, count, n_ff);
        }
        if (p.activation == ExpertActivation::swiglu_oai) {
          ops::swiglu_oai(g, u, g, count * n_ff, kSwigluOaiAlpha, kSwigluOaiLimit);
        } else {
          ops::swiglu(g, u, g, count * n_ff);
        }
        hidden.quantize_rows(g, off, count, n_ff);
      });

  phase.emplace(down_slot);
  // Down projection of each (token, expert) row, then the weighted sum per token.
  std::vector<int32_t> identity(static_cast<size_t>(rows_total));
  for (int64_t i = 0; i < rows_total; ++i)
    identity[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (ws.observer) {
    for (int32_t e : active) {
      ws.observer->expert(w.down_exps.data, e, gate, &identity[first[e]], first[e + 1] - first[e],
                          n_ff);
    }
  }
  float* down = room(ws.expert_down, rows_total * n_embd);
  for_each_expert_block(
      active, w.down_exps.slice(0, n_embd), n, pool,
      [&](int64_t e, int64_t r0, int64_t r1) {
        const int64_t off = first[e], count = first[e + 1] - first[e];
        ops::matmul_rows_indexed(w.down_exps.slice(e * n_embd, n_embd), hidden, &identity[off],
                                 count, down + off * n_embd, n_embd, r0, r1, ws.matmul);
      },
      [&](int64_t e) {  // each expert's own output bias, before its weight
        if (w.down_bias) {
          add_bias_rows(down + first[e] * n_embd, w.down_bias + e * n_embd, first[e + 1] - first[e],
                        n_embd);
        }
      });
  ops::combine_expert_rows(ids, ids_weight, down, n, n_embd, out, pool);
}

}  // namespace

void moe_ffn_block(const MoeFfnWeights& w, const MoeParams& p, const float* x, int64_t n,
                   float* out, BlockWorkspace& ws, ThreadPool& pool) {
  const int64_t k = p.n_expert_used;
  ActivationCache& input = ws.moe_input;
  input.reset(x, n, w.router.cols);
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> chosen_weight(static_cast<size_t>(n * k));
  {
    static profile::Slot router_slot("moe: router");
    profile::Scope phase(router_slot);
    float* logits = room(ws.router_logits, n * p.n_expert);
    // Tokens [t0, t1) of the step: their logits' biases and their choice of experts.
    const auto route = [&](int64_t t0, int64_t t1) {
      add_bias_rows(logits + t0 * p.n_expert, w.router_bias, t1 - t0, p.n_expert);
      for (int64_t t = t0; t < t1; ++t) {
        if (p.gating == ExpertGating::sigmoid) {
          ops::route_top_k_sigmoid(logits + t * p.n_expert, w.selection_bias, p.n_expert, k,
                                   p.renormalize, p.weights_scale, &chosen[t * k],
                                   &chosen_weight[t * k]);
        } else {
          ops::route_top_k(logits + t * p.n_expert, p.n_expert, k, p.renormalize, &chosen[t * k],
                           &chosen_weight[t * k]);
          for (int64_t j = 0; j < k; ++j) chosen_weight[t * k + j] *= p.weights_scale;
        }
      }
    };
    const int64_t macs = n * w.router.rows * w.router.cols;  // under the inline bound: no pool
    if (macs > ops::kInlineMatmulMacs && n <= kRoutedInTasksMaxTokens && pool.size() > 1 &&
        !ws.observer) {
      // Each logit is the same product whichever tokens share its call (the kernels' bits do
      // not depend on the grouping), so this split changes no bit.
      const ops::QuantizedRows& xr = input.get(quant::traits(w.router.type).activation_type);
      static const std::array<int32_t, kRoutedInTasksMaxTokens> ids = [] {
        std::array<int32_t, kRoutedInTasksMaxTokens> a{};
        for (size_t t = 0; t < a.size(); ++t) a[t] = static_cast<int32_t>(t);
        return a;
      }();
      const int64_t per_task = (n + pool.size() - 1) / pool.size();
      pool.run((n + per_task - 1) / per_task, [&](int64_t task, int) {
        const int64_t t0 = task * per_task, t1 = std::min(n, t0 + per_task);
        ops::matmul_rows_indexed(w.router, xr, &ids[static_cast<size_t>(t0)], t1 - t0,
                                 logits + t0 * p.n_expert, p.n_expert, 0, p.n_expert, ws.matmul);
        route(t0, t1);
      });
    } else {
      project(w.router, input, logits, ws, pool);
      route(0, n);
    }
  }
  routed_experts(w, p, input, n, chosen, chosen_weight, nullptr, out, ws, pool);
  if (w.shared.gate.data) {
    static profile::Slot shared_slot("moe: shared expert");
    profile::Scope phase(shared_slot);
    shared_expert(w, x, n, out, ws, pool);
  }
}

void moe_experts_block(const MoeFfnWeights& w, const MoeParams& p, const float* x, int64_t n,
                       std::span<const int32_t> chosen, std::span<const float> chosen_weight,
                       const std::vector<bool>* included, float* out, BlockWorkspace& ws,
                       ThreadPool& pool) {
  STRATA_CHECK(static_cast<int64_t>(chosen.size()) == n * p.n_expert_used &&
                   chosen_weight.size() == chosen.size(),
               "moe_experts_block: {} selections and {} weights for {} tokens x {} experts",
               chosen.size(), chosen_weight.size(), n, p.n_expert_used);
  ActivationCache& input = ws.moe_input;
  input.reset(x, n, w.router.cols);
  routed_experts(w, p, input, n, chosen, chosen_weight, included, out, ws, pool);
}

void gated_delta_net_block(const GatedDeltaNetWeights& w, const GatedDeltaNetParams& p,
                           const float* x, int64_t n, std::span<const RecurrentRun> runs,
                           float* out, BlockWorkspace& ws, ThreadPool& pool) {
  const int64_t conv_dim = p.conv_dim(), hk = p.n_k_heads, hv = p.n_v_heads;
  const int64_t v_dim = hv * p.d_v;
  const int64_t q_off = 0, k_off = hk * p.d_k, v_off = 2 * hk * p.d_k;
  float* qkv = room(ws.gdn_qkv, n * conv_dim);
  float* mixed = room(ws.gdn_mixed, n * conv_dim);
  float* z = room(ws.gdn_z, n * v_dim);
  float* b = room(ws.gdn_b, n * hv);
  float* a = room(ws.gdn_a, n * hv);
  float* gates = room(ws.gdn_gates, 2 * n * hv);  // beta, then g
  float* o = room(ws.gdn_out, n * v_dim);
  float* beta = gates;
  float* g = gates + n * hv;

  // The per-token work around the recurrence is a few microseconds for a decode step: cheaper
  // on this thread than a round trip through the pool.
  auto for_tasks = [&](int64_t count, const auto& fn) { run_small_steps_here(pool, n, count, fn); };
  ActivationCache& input = ws.gdn_input;
  input.reset(x, n, w.qkv.cols);
  {
    STRATA_PROFILE("gdn: projections");
    project_together({{w.qkv, qkv}, {w.gate, z}, {w.beta, b}, {w.alpha, a}}, input, ws, pool);
  }
  {
    STRATA_PROFILE("gdn: conv, norms, gates");
    // Convolution: each run's tokens in order, channels split over the pool.
    constexpr int64_t kChannelBlock = 512;
    const int64_t blocks = (conv_dim + kChannelBlock - 1) / kChannelBlock;
    for_tasks(static_cast<int64_t>(runs.size()) * blocks, [&](int64_t task, int) {
      const RecurrentRun& r = runs[static_cast<size_t>(task / blocks)];
      const int64_t c0 = task % blocks * kChannelBlock;
      ops::causal_conv1d_silu(qkv + r.begin * conv_dim, mixed + r.begin * conv_dim, conv_dim,
                              r.count, c0, std::min(conv_dim, c0 + kChannelBlock), w.conv,
                              p.conv_kernel, conv_dim, r.conv_state);
    });
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(p.d_k));
    for_tasks(n, [&](int64_t t, int) {
      float* row = mixed + t * conv_dim;
      for (int64_t h = 0; h < hk; ++h) {
        ops::l2_norm(row + q_off + h * p.d_k, p.d_k, p.rms_eps, q_scale);
        ops::l2_norm(row + k_off + h * p.d_k, p.d_k, p.rms_eps);
      }
      ops::delta_gates(b + t * hv, a + t * hv, w.a_neg, w.dt_bias, hv, beta + t * hv, g + t * hv);
    });
  }
  {
    STRATA_PROFILE("gdn: delta rule");
    const int64_t group = hv / hk;
    pool.run(static_cast<int64_t>(runs.size()) * hv, [&](int64_t task, int) {
      const RecurrentRun& r = runs[static_cast<size_t>(task / hv)];
      const int64_t h = task % hv;
      const int64_t kh = p.k_head_modulo ? h % hk : h / group;
      const float* base = mixed + r.begin * conv_dim;
      ops::DeltaRuleRun run;
      run.q = base + q_off + kh * p.d_k;
      run.k = base + k_off + kh * p.d_k;
      run.v = base + v_off + h * p.d_v;
      run.qk_stride = run.v_stride = conv_dim;
      run.beta = beta + r.begin * hv + h;
      run.g = g + r.begin * hv + h;
      run.gate_stride = hv;
      run.out = o + r.begin * v_dim + h * p.d_v;
      run.out_stride = v_dim;
      run.n_tokens = r.count;
      float* state = r.ssm_state + h * p.d_v * p.d_k;
      if (p.chunked_min_tokens > 0 && r.count >= p.chunked_min_tokens) {
        ops::delta_rule_chunked(state, run, p.d_k, p.d_v);
      } else {
        ops::delta_rule_sequential(state, run, p.d_k, p.d_v);
      }
    });
  }
  {
    STRATA_PROFILE("gdn: gated norm, output projection");
    for_tasks(n, [&](int64_t t, int) {
      for (int64_t h = 0; h < hv; ++h) {
        ops::gated_rms_norm(o + t * v_dim + h * p.d_v, w.norm, z + t * v_dim + h * p.d_v, p.d_v,
                            p.rms_eps);
      }
    });
    ActivationCache& gated = ws.gdn_gated;
    gated.reset(o, n, v_dim);
    project(w.out, gated, out, ws, pool);
  }
}

}  // namespace strata
