// make-synthetic-model: writes a random-weight GGUF model of a real architecture.
//   make-synthetic-model --preset qwen3-30b-a3b --layers 8 --ftype Q4_K_M -o models/q3-30b-L8.gguf
//   make-synthetic-model --preset gpt-oss-20b --layers 4 -o models/gpt-oss-20b-L4.gguf

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
                 std::string("A published shape: ") + strata::tools::synthetic_preset_names() +
                     " (qwen35-35b-a3b: the Gated DeltaNet hybrid); use --layers to cut the depth");
  app.add_option("--arch", s.arch,
                 "qwen3moe, qwen35moe, qwen3next, gpt-oss, glm4moe, mixtral, qwen3 or llama "
                 "(llama with --experts N > 0: Mixtral)")
      ->capture_default_str();
  app.add_option("--ftype", s.ftype,
                 "Q4_K_M (mixed, as GGUF quantizers make it), MXFP4_MOE (experts MXFP4, the rest "
                 "Q8_0; gpt-oss-20b's default) or a type")
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
  app.add_option("--shared-expert-ff", s.n_ff_shexp,
                 "Shared expert FFN size (qwen35moe, qwen3next, glm4moe)")
      ->capture_default_str();
  app.add_option("--sliding-window", s.sliding_window, "gpt-oss: the even layers' window")
      ->capture_default_str();
  app.add_option("--dense-layers", s.n_leading_dense, "glm4moe: leading dense FFN layers")
      ->capture_default_str();
  app.add_option("--nextn", s.n_nextn,
                 "glm4moe, qwen35moe: NextN/MTP (multi-token prediction) blocks after the layers "
                 "(GLM-4.5: 1)")
      ->capture_default_str();
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
    if (!preset.empty()) {
      SyntheticModelSpec p = strata::tools::synthetic_preset(preset, layers);
      // The preset's shape with the run's own choices (its file type only when one is given).
      if (app.count("--ftype") > 0) p.ftype = s.ftype;
      p.hot_fraction = s.hot_fraction;
      p.skew = s.skew;
      p.seed = s.seed;
      p.byte_vocab = s.byte_vocab;
      s = p;
    } else {
      if (layers > 0) s.n_layer = layers;
      // A llama file with experts is the Mixtral layout (plain llama stays dense by default).
      if (s.arch == "llama" && app.count("--experts") > 0 && s.n_expert > 0) s.arch = "mixtral";
    }
    s.vocab_from = vocab_from;
    strata::tools::write_synthetic_model(s, out);
  } catch (const strata::Error& e) {
    strata::log::error("{}", e.what());
    return 1;
  }
  return 0;
}
