// make-synthetic-model: writes a random-weight GGUF model of a real architecture.
//   make-synthetic-model --preset qwen3-30b-a3b --layers 8 --ftype Q4_K_M -o models/q3-30b-L8.gguf

#include <CLI/CLI.hpp>

#include "synthetic_model.h"
#include "util/error.h"
#include "util/log.h"

int main(int argc, char** argv) {
  using strata::tools::SyntheticModelSpec;
  CLI::App app{"Write a GGUF model with real tensor names and shapes and random weights"};
  SyntheticModelSpec s;
  std::string preset, out;
  int64_t layers = 0;
  app.add_option("-o,--output", out, "Output .gguf file")->required();
  app.add_option("--preset", preset,
                 "qwen3-30b-a3b: Qwen3-30B-A3B dimensions; qwen35-35b-a3b: Qwen3.5-35B-A3B "
                 "(Gated DeltaNet hybrid); use --layers");
  app.add_option("--arch", s.arch, "qwen3moe, qwen35moe, qwen3 or llama")->capture_default_str();
  app.add_option("--ftype", s.ftype, "Q4_K_M (mixed, as GGUF quantizers make it) or a type")
      ->capture_default_str();
  app.add_option("--layers", layers, "Layer count");
  app.add_option("--embd", s.n_embd, "Embedding size")->capture_default_str();
  app.add_option("--heads", s.n_head, "Attention heads")->capture_default_str();
  app.add_option("--kv-heads", s.n_head_kv, "KV heads")->capture_default_str();
  app.add_option("--head-dim", s.head_dim, "Head size")->capture_default_str();
  app.add_option("--ff", s.n_ff, "Dense FFN size")->capture_default_str();
  app.add_option("--experts", s.n_expert, "Experts per layer")->capture_default_str();
  app.add_option("--experts-used", s.n_expert_used, "Experts per token")->capture_default_str();
  app.add_option("--expert-ff", s.n_ff_exp, "Expert FFN size")->capture_default_str();
  app.add_option("--vocab", s.n_vocab, "Vocabulary size")->capture_default_str();
  app.add_option("--hot-experts", s.hot_fraction,
                 "Fraction of experts the router prefers (0: uniform)")
      ->capture_default_str();
  app.add_option("--skew", s.skew, "How strongly hot experts are preferred")->capture_default_str();
  app.add_option("--seed", s.seed, "Random seed")->capture_default_str();
  std::string vocab_from;
  app.add_option("--vocab-from", vocab_from,
                 "Copy the tokenizer and chat template from this GGUF file");
  app.add_flag(
         "--byte-vocab", s.byte_vocab,
         "Built-in byte-level vocabulary and ChatML template (a demo chat model that needs no "
         "other file)")
      ->excludes("--vocab-from");
  CLI11_PARSE(app, argc, argv);
  try {
    if (preset == "qwen3-30b-a3b" || preset == "qwen35-35b-a3b") {
      const SyntheticModelSpec base =
          preset == "qwen3-30b-a3b" ? strata::tools::qwen3_30b_a3b_spec(layers > 0 ? layers : 48)
                                    : strata::tools::qwen35_35b_a3b_spec(layers > 0 ? layers : 40);
      const std::string ftype = s.ftype;
      const double hot = s.hot_fraction, skew = s.skew;
      const uint64_t seed = s.seed;
      const bool byte_vocab_flag = s.byte_vocab;
      s = base;
      s.vocab_from = vocab_from;
      s.ftype = ftype;
      s.hot_fraction = hot;
      s.skew = skew;
      s.seed = seed;
      s.byte_vocab = byte_vocab_flag;
    } else if (!preset.empty()) {
      strata::fail("unknown preset '{}' (known: qwen3-30b-a3b, qwen35-35b-a3b)", preset);
    } else if (layers > 0) {
      s.n_layer = layers;
    }
    s.vocab_from = vocab_from;
    strata::tools::write_synthetic_model(s, out);
  } catch (const strata::Error& e) {
    strata::log::error("{}", e.what());
    return 1;
  }
  return 0;
}
