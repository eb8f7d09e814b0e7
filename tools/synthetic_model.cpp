#include "synthetic_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::tools {
namespace {

// The K-quant mix of a Q4_K_M file as GGUF quantizers make it: more bits where errors hurt
// most (output head, V projections, some down projections), 8 bits for the tiny K/V matrices
// of MoE models.
GgmlType tensor_type(const SyntheticModelSpec& s, const std::string& role, int64_t layer) {
  const bool moe = s.arch == "qwen3moe" || s.arch == "qwen35moe";
  if (s.ftype != "Q4_K_M") {
    const auto t = ggml_type_from_name(s.ftype);
    if (!t || !quant::is_supported(*t) || !quant::traits(*t).kernels.vec_dot) {
      fail("unknown or unsupported --ftype '{}' (Q4_K_M or a weight type such as Q8_0, IQ4_XS)",
           s.ftype);
    }
    if (role == "output" && (*t == GgmlType::Q2_K || *t == GgmlType::Q3_K)) return GgmlType::Q6_K;
    return *t;
  }
  const int64_t n = s.n_layer;
  const bool more_bits = layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
  if (role == "output") return GgmlType::Q6_K;
  if (role == "attn_k") return moe ? GgmlType::Q8_0 : GgmlType::Q4_K;
  if (role == "attn_v") return moe ? GgmlType::Q8_0 : (more_bits ? GgmlType::Q6_K : GgmlType::Q4_K);
  if (role == "attn_output") return moe ? GgmlType::Q5_K : GgmlType::Q4_K;
  if (role == "ffn_down") return more_bits ? GgmlType::Q6_K : GgmlType::Q4_K;
  if (role == "attn_qkv") return GgmlType::Q8_0;  // as GGUF quantizers treat GDN's qkv
  return GgmlType::Q4_K;
}

class Generator {
 public:
  explicit Generator(const SyntheticModelSpec& s) : s_(s), rng_(s.seed) {
    // The direction every token embedding shares a little of: hot experts' router rows point
    // along it, so they win the top-k more often.
    direction_.resize(static_cast<size_t>(s.n_embd));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    double norm = 0;
    for (auto& v : direction_) {
      v = normal(rng_);
      norm += double(v) * v;
    }
    for (auto& v : direction_)
      v = static_cast<float>(v / std::sqrt(norm) * std::sqrt(double(s.n_embd)));
  }

  // A tensor of `rows` rows of `cols`: rows are drawn from a pool of 64 quantized random rows
  // (std 1/sqrt(cols), plus `bias` times the shared direction), so even GB-sized tensors are
  // written at memcpy speed.
  GgufWriter::TensorFiller matrix(GgmlType type, int64_t cols, int64_t rows, float bias = 0.0f) {
    const uint64_t seed = rng_();
    return [=, this](std::span<uint8_t> out) {
      std::mt19937_64 rng(seed);
      std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
      constexpr int64_t kPool = 64;
      const int64_t row_bytes = quant::row_bytes(type, cols);
      std::vector<float> values(static_cast<size_t>(cols * kPool));
      for (int64_t i = 0; i < cols * kPool; ++i) values[static_cast<size_t>(i)] = normal(rng);
      if (bias != 0.0f) {
        // Only embedding rows (cols == n_embd) carry the shared direction.
        STRATA_CHECK(cols == static_cast<int64_t>(direction_.size()),
                     "direction bias needs rows of {} values, got {}", direction_.size(), cols);
        const float scale = bias / std::sqrt(static_cast<float>(cols));
        for (int64_t i = 0; i < cols * kPool; ++i) {
          values[static_cast<size_t>(i)] += scale * direction_[static_cast<size_t>(i % cols)];
        }
      }
      std::vector<uint8_t> pool(static_cast<size_t>(row_bytes * kPool));
      quant::kernels_exact(type, quant::Isa::scalar)
          .quantize_row(values.data(), pool.data(), cols * kPool);
      std::uniform_int_distribution<int64_t> pick(0, kPool - 1);
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(out.data() + r * row_bytes, pool.data() + pick(rng) * row_bytes,
                    static_cast<size_t>(row_bytes));
      }
    };
  }

  // Router [n_embd] -> [n_expert] in F32: random rows, hot experts tilted toward the direction.
  std::vector<uint8_t> router() {
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(s_.n_embd)));
    const int64_t hot = static_cast<int64_t>(std::llround(s_.hot_fraction * s_.n_expert));
    std::vector<float> w(static_cast<size_t>(s_.n_embd * s_.n_expert));
    for (int64_t e = 0; e < s_.n_expert; ++e) {
      // Spread hot experts over the id range rather than taking the first ones.
      const bool is_hot = hot > 0 && (e * hot) % s_.n_expert < hot;
      const float tilt =
          is_hot ? static_cast<float>(s_.skew) / static_cast<float>(s_.n_embd) : 0.0f;
      for (int64_t i = 0; i < s_.n_embd; ++i) {
        w[static_cast<size_t>(e * s_.n_embd + i)] =
            normal(rng_) + tilt * direction_[static_cast<size_t>(i)];
      }
    }
    return bytes_of(w);
  }

  // Norm weights around 1.
  std::vector<uint8_t> norm(int64_t n) { return normal_f32(n, 1.0f, 0.05f); }

  // n F32 values from N(mean, stddev).
  std::vector<uint8_t> normal_f32(int64_t n, float mean, float stddev) {
    std::normal_distribution<float> normal(mean, stddev);
    std::vector<float> w(static_cast<size_t>(n));
    for (auto& v : w) v = normal(rng_);
    return bytes_of(w);
  }

  // ssm_a = -exp(A_log), A_log uniform in [0, log 16) as the model initializes it.
  std::vector<uint8_t> ssm_a(int64_t n) {
    std::uniform_real_distribution<float> a_log(0.0f, std::log(16.0f));
    std::vector<float> w(static_cast<size_t>(n));
    for (auto& v : w) v = -std::exp(a_log(rng_));
    return bytes_of(w);
  }

 private:
  static std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }

  const SyntheticModelSpec& s_;
  std::mt19937_64 rng_;
  std::vector<float> direction_;
};

void check_spec(const SyntheticModelSpec& s) {
  STRATA_CHECK(
      s.arch == "qwen3moe" || s.arch == "qwen35moe" || s.arch == "qwen3" || s.arch == "llama",
      "--arch must be qwen3moe, qwen35moe, qwen3 or llama, got '{}'", s.arch);
  STRATA_CHECK(s.n_layer > 0 && s.n_embd > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.head_dim > 0 &&
                   s.n_vocab > 0,
               "layers, embedding size, heads, head dim and vocabulary must be positive");
  STRATA_CHECK(s.n_head % s.n_head_kv == 0, "{} heads are not a multiple of {} KV heads", s.n_head,
               s.n_head_kv);
  STRATA_CHECK(s.hot_fraction >= 0 && s.hot_fraction <= 1, "--hot-experts must be in [0, 1]");
  if (s.arch == "qwen35moe") {
    STRATA_CHECK(s.ssm_k_heads > 0 && s.ssm_v_heads % s.ssm_k_heads == 0 && s.ssm_head_dim > 0 &&
                     s.ssm_conv_kernel > 0 && s.full_attention_interval > 0 && s.n_ff_shexp > 0,
                 "qwen35moe: GDN heads {} / {} of {}, conv {}, interval {}, shared FFN {} are not "
                 "valid",
                 s.ssm_k_heads, s.ssm_v_heads, s.ssm_head_dim, s.ssm_conv_kernel,
                 s.full_attention_interval, s.n_ff_shexp);
  }
  if (s.arch == "qwen3moe" || s.arch == "qwen35moe") {
    STRATA_CHECK(
        s.n_expert > 0 && s.n_expert_used > 0 && s.n_expert_used <= s.n_expert && s.n_ff_exp > 0,
        "experts: {} with {} used and FFN {} is not a valid MoE", s.n_expert, s.n_expert_used,
        s.n_ff_exp);
  }
}

// Copies tokenizer.* metadata from another file, padding the per-token arrays to n_vocab.
void copy_vocabulary(const std::string& path, int64_t n_vocab, GgufWriter& w) {
  const GgufFile src = GgufFile::open(path);
  const GgufArray* tokens = src.find_array("tokenizer.ggml.tokens");
  if (!tokens) fail("{}: no tokenizer.ggml.tokens to copy", path);
  const int64_t have = static_cast<int64_t>(tokens->items.size());
  if (have > n_vocab) {
    fail("{} has {} tokens, more than the model's vocabulary of {} (raise --vocab)", path, have,
         n_vocab);
  }
  for (const auto& kv : src.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    const GgufArray* a = kv.value.as_array();
    const bool per_token =
        a && static_cast<int64_t>(a->items.size()) == have &&
        (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.token_type" ||
         kv.key == "tokenizer.ggml.scores");
    if (!per_token) {
      w.set(kv.key, kv.value);
      continue;
    }
    std::vector<GgufValue> items = a->items;
    for (int64_t i = have; i < n_vocab; ++i) {
      if (kv.key == "tokenizer.ggml.tokens")
        items.push_back(GgufValue::string(fmt::format("[PAD{}]", i)));
      if (kv.key == "tokenizer.ggml.token_type") items.push_back(GgufValue(int32_t{5}));  // unused
      if (kv.key == "tokenizer.ggml.scores") items.push_back(GgufValue(0.0f));
    }
    w.set(kv.key, GgufValue::array(a->element_type, std::move(items)));
  }
}

// The built-in byte-level vocabulary (see SyntheticModelSpec::byte_vocab). Byte b is the token
// GPT-2's byte-to-unicode mapping gives it: printable Latin-1 bytes stand for themselves, the
// others for code points from U+0100 on.
void write_byte_vocabulary(int64_t n_vocab, GgufWriter& w) {
  static const char* const kSpecial[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                         "<think>",       "</think>",     "<tool_call>",
                                         "</tool_call>",  "<|fim_pad|>"};
  constexpr int64_t kSpecials = sizeof kSpecial / sizeof kSpecial[0];
  if (n_vocab < 256 + kSpecials)
    fail("a byte vocabulary needs at least {} tokens, the model has {}", 256 + kSpecials, n_vocab);
  std::vector<std::string> tokens;
  std::vector<GgufValue> types;
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next_extra++);
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xc0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3f));
    }
    tokens.push_back(utf8);
    types.push_back(GgufValue(int32_t{1}));  // normal
  }
  for (int64_t i = 0; i < kSpecials; ++i) {
    tokens.push_back(kSpecial[i]);
    // <think> and <tool_call> tags are plain text to clients (user-defined), the rest control.
    types.push_back(GgufValue(int32_t{i >= 3 && i <= 6 ? 4 : 3}));
  }
  for (int64_t i = 256 + kSpecials; i < n_vocab; ++i) {
    tokens.push_back(fmt::format("[PAD{}]", i));
    types.push_back(GgufValue(int32_t{5}));  // unused
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::i32, std::move(types)));
  w.set("tokenizer.ggml.merges", GgufValue::string_array({}));
  w.set_u32("tokenizer.ggml.bos_token_id", 256);
  w.set_u32("tokenizer.ggml.eos_token_id", 258);
  w.set_u32("tokenizer.ggml.padding_token_id", 256);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template",
               "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
               "(message.content if message.content is string else '') + '<|im_end|>\\n' }}"
               "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
               "{%- endif %}");
}

// general.file_type as GGUF tools number it (so other engines label the file correctly).
uint32_t file_type(const std::string& ftype) {
  static const std::pair<const char*, uint32_t> kTypes[] = {
      {"F32", 0},   {"F16", 1},     {"Q4_0", 2},    {"Q4_1", 3},  {"Q8_0", 7},    {"Q5_0", 8},
      {"Q5_1", 9},  {"Q2_K", 10},   {"Q3_K", 11},   {"Q4_K", 14}, {"Q4_K_M", 15}, {"Q5_K", 16},
      {"Q6_K", 18}, {"IQ4_NL", 25}, {"IQ4_XS", 30}, {"BF16", 32}};
  for (const auto& [name, id] : kTypes) {
    if (ftype == name) return id;
  }
  return 0;
}

}  // namespace

SyntheticModelSpec qwen3_30b_a3b_spec(int64_t layers) {
  SyntheticModelSpec s;
  s.arch = "qwen3moe";
  s.n_layer = layers;
  s.n_embd = 2048;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_ff = 6144;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 768;
  s.n_vocab = 151936;
  s.n_ctx_train = 40960;
  s.rope_base = 1e6f;
  return s;
}

SyntheticModelSpec qwen35_35b_a3b_spec(int64_t layers) {
  SyntheticModelSpec s;
  s.arch = "qwen35moe";
  s.n_layer = layers;
  s.n_embd = 2048;
  s.n_head = 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.n_rot = 64;
  s.n_ff = 0;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_ff_exp = 512;
  s.n_ff_shexp = 512;
  s.ssm_conv_kernel = 4;
  s.ssm_k_heads = 16;
  s.ssm_v_heads = 32;
  s.ssm_head_dim = 128;
  s.full_attention_interval = 4;
  s.n_vocab = 248320;
  s.n_ctx_train = 262144;
  s.rope_base = 1e7f;
  return s;
}

void write_synthetic_model(const SyntheticModelSpec& s, const std::string& path) {
  check_spec(s);
  Generator gen(s);
  GgufWriter w;
  const std::string a = s.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", fmt::format("synthetic-{}-L{}-{}", a, s.n_layer, s.ftype));
  w.set_string("general.description", "random weights made by strata's synthetic model generator");
  w.set_u32("general.file_type", file_type(s.ftype));
  w.set_u32("general.quantization_version", 2);
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(s.n_ctx_train));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  if (s.n_ff > 0) w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim));
  w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim));
  w.set_f32(a + ".rope.freq_base", s.rope_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));
  if (a == "llama") w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.head_dim));
  const bool hybrid = a == "qwen35moe";
  const int64_t n_rot = s.n_rot > 0 ? s.n_rot : s.head_dim;
  if (hybrid) {
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(n_rot));
    // IMROPE sections (text uses one position for all, which reduces to NEOX).
    const int32_t q = static_cast<int32_t>(n_rot / 2);
    w.set(a + ".rope.dimension_sections",
          GgufValue::array(GgufValueType::i32,
                           {GgufValue(int32_t{q - q / 3 - q / 3}), GgufValue(int32_t{q / 3}),
                            GgufValue(int32_t{q / 3}), GgufValue(int32_t{0})}));
    w.set_u32(a + ".ssm.conv_kernel", static_cast<uint32_t>(s.ssm_conv_kernel));
    w.set_u32(a + ".ssm.state_size", static_cast<uint32_t>(s.ssm_head_dim));
    w.set_u32(a + ".ssm.group_count", static_cast<uint32_t>(s.ssm_k_heads));
    w.set_u32(a + ".ssm.time_step_rank", static_cast<uint32_t>(s.ssm_v_heads));
    w.set_u32(a + ".ssm.inner_size", static_cast<uint32_t>(s.ssm_v_heads * s.ssm_head_dim));
    w.set_u32(a + ".full_attention_interval", static_cast<uint32_t>(s.full_attention_interval));
    w.set_u32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(s.n_ff_shexp));
  }
  if (a == "qwen3moe" || hybrid) {
    w.set_u32(a + ".expert_count", static_cast<uint32_t>(s.n_expert));
    w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
  }
  if (s.byte_vocab) {
    write_byte_vocabulary(s.n_vocab, w);
  } else if (s.vocab_from.empty()) {
    w.set_string("tokenizer.ggml.model", "no_vocab");
  } else {
    copy_vocabulary(s.vocab_from, s.n_vocab, w);
  }

  const float embd_bias = s.hot_fraction > 0 ? 1.0f : 0.0f;
  w.add_tensor("token_embd.weight", tensor_type(s, "token_embd", 0), {s.n_embd, s.n_vocab},
               gen.matrix(tensor_type(s, "token_embd", 0), s.n_embd, s.n_vocab,
                          embd_bias * std::sqrt(float(s.n_embd))));
  w.add_tensor("output_norm.weight", GgmlType::F32, {s.n_embd}, gen.norm(s.n_embd));
  w.add_tensor("output.weight", tensor_type(s, "output", 0), {s.n_embd, s.n_vocab},
               gen.matrix(tensor_type(s, "output", 0), s.n_embd, s.n_vocab));
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  for (int64_t il = 0; il < s.n_layer; ++il) {
    auto name = [&](const char* n) { return fmt::format("blk.{}.{}.weight", il, n); };
    auto add = [&](const char* n, const char* role, std::vector<int64_t> shape) {
      const GgmlType t = tensor_type(s, role, il);
      int64_t rows = 1;
      for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
      w.add_tensor(name(n), t, shape, gen.matrix(t, shape[0], rows));
    };
    w.add_tensor(name("attn_norm"), GgmlType::F32, {s.n_embd}, gen.norm(s.n_embd));
    if (hybrid) {
      const bool recurrent = (il + 1) % s.full_attention_interval != 0;
      if (recurrent) {
        const int64_t dk = s.ssm_head_dim, v_dim = s.ssm_v_heads * dk;
        const int64_t conv_dim = 2 * s.ssm_k_heads * dk + v_dim;
        auto other = [&](const char* n) { return fmt::format("blk.{}.{}", il, n); };
        add("attn_qkv", "attn_qkv", {s.n_embd, conv_dim});
        add("attn_gate", "attn_gate", {s.n_embd, v_dim});
        add("ssm_beta", "ssm_beta", {s.n_embd, s.ssm_v_heads});
        add("ssm_alpha", "ssm_alpha", {s.n_embd, s.ssm_v_heads});
        w.add_tensor(name("ssm_conv1d"), GgmlType::F32, {s.ssm_conv_kernel, conv_dim},
                     gen.normal_f32(s.ssm_conv_kernel * conv_dim, 0.0f, 0.5f));
        w.add_tensor(other("ssm_dt.bias"), GgmlType::F32, {s.ssm_v_heads},
                     gen.normal_f32(s.ssm_v_heads, 0.0f, 0.5f));
        w.add_tensor(other("ssm_a"), GgmlType::F32, {s.ssm_v_heads}, gen.ssm_a(s.ssm_v_heads));
        w.add_tensor(name("ssm_norm"), GgmlType::F32, {dk}, gen.norm(dk));
        add("ssm_out", "ssm_out", {v_dim, s.n_embd});
      } else {
        add("attn_q", "attn_q", {s.n_embd, 2 * q_dim});  // query and gate per head
        add("attn_k", "attn_k", {s.n_embd, kv_dim});
        add("attn_v", "attn_v", {s.n_embd, kv_dim});
        add("attn_output", "attn_output", {q_dim, s.n_embd});
        w.add_tensor(name("attn_q_norm"), GgmlType::F32, {s.head_dim}, gen.norm(s.head_dim));
        w.add_tensor(name("attn_k_norm"), GgmlType::F32, {s.head_dim}, gen.norm(s.head_dim));
      }
      w.add_tensor(name("post_attention_norm"), GgmlType::F32, {s.n_embd}, gen.norm(s.n_embd));
      w.add_tensor(name("ffn_gate_inp"), GgmlType::F32, {s.n_embd, s.n_expert}, gen.router());
      add("ffn_gate_exps", "ffn_gate", {s.n_embd, s.n_ff_exp, s.n_expert});
      add("ffn_up_exps", "ffn_up", {s.n_embd, s.n_ff_exp, s.n_expert});
      add("ffn_down_exps", "ffn_down", {s.n_ff_exp, s.n_embd, s.n_expert});
      w.add_tensor(name("ffn_gate_inp_shexp"), GgmlType::F32, {s.n_embd},
                   gen.normal_f32(s.n_embd, 0.0f, 1.0f / std::sqrt(static_cast<float>(s.n_embd))));
      add("ffn_gate_shexp", "ffn_gate", {s.n_embd, s.n_ff_shexp});
      add("ffn_up_shexp", "ffn_up", {s.n_embd, s.n_ff_shexp});
      add("ffn_down_shexp", "ffn_down", {s.n_ff_shexp, s.n_embd});
      continue;
    }
    add("attn_q", "attn_q", {s.n_embd, q_dim});
    add("attn_k", "attn_k", {s.n_embd, kv_dim});
    add("attn_v", "attn_v", {s.n_embd, kv_dim});
    add("attn_output", "attn_output", {q_dim, s.n_embd});
    if (a != "llama") {
      w.add_tensor(name("attn_q_norm"), GgmlType::F32, {s.head_dim}, gen.norm(s.head_dim));
      w.add_tensor(name("attn_k_norm"), GgmlType::F32, {s.head_dim}, gen.norm(s.head_dim));
    }
    w.add_tensor(name("ffn_norm"), GgmlType::F32, {s.n_embd}, gen.norm(s.n_embd));
    if (a == "qwen3moe") {
      w.add_tensor(name("ffn_gate_inp"), GgmlType::F32, {s.n_embd, s.n_expert}, gen.router());
      add("ffn_gate_exps", "ffn_gate", {s.n_embd, s.n_ff_exp, s.n_expert});
      add("ffn_up_exps", "ffn_up", {s.n_embd, s.n_ff_exp, s.n_expert});
      add("ffn_down_exps", "ffn_down", {s.n_ff_exp, s.n_embd, s.n_expert});
    } else {
      add("ffn_gate", "ffn_gate", {s.n_embd, s.n_ff});
      add("ffn_up", "ffn_up", {s.n_embd, s.n_ff});
      add("ffn_down", "ffn_down", {s.n_ff, s.n_embd});
    }
  }
  log::info("writing {}", path);
  w.write(path);
}

}  // namespace strata::tools
