// `strata perplexity`: how well a model predicts a text, computed as llama-perplexity computes it
// (quality/perplexity.h), so a quant type or a placement can be compared with another engine's
// figures.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "gguf/gguf_file.h"
#include "quality/perplexity.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {

void add_perplexity_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string text_file;
    int64_t chunks = 0;
    int64_t batch = 512;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  o->model.ctx = 512;  // llama-perplexity's default chunk
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a text, as llama-perplexity computes it: chunks of --ctx tokens, the second "
      "half of each scored");
  add_model_options(cmd, o->model);
  cmd->add_option("-f,--file", o->text_file, "The text to score (UTF-8)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--chunks", o->chunks, "Score at most this many chunks (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("-b,--batch", o->batch, "Tokens per forward batch within a chunk")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--json", o->json, "Print the result as JSON (the chunks' running PPL with it)");
  cmd->callback([o] {
    std::ifstream in(o->text_file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    STRATA_CHECK(in.good() || in.eof(), "cannot read {}", o->text_file);
    const int64_t ctx = o->model.ctx;
    // Tokenized as llama-perplexity does: BOS where the vocabulary adds one, specials as text.
    const GgufFile vocab_file = GgufFile::open(o->model.path);
    const auto tokenizer = Tokenizer::from_gguf(vocab_file);
    const std::vector<int32_t> tokens =
        tokenizer->encode(text.str(), /*parse_special=*/false, /*add_bos=*/true);
    STRATA_CHECK(static_cast<int64_t>(tokens.size()) >= 2 * ctx,
                 "{} is {} tokens: perplexity at --ctx {} needs at least {} (a longer text or a "
                 "smaller --ctx)",
                 o->text_file, tokens.size(), ctx, 2 * ctx);
    quality::PerplexityOptions options;
    options.ctx = ctx;
    options.max_chunks = o->chunks;
    options.batch = std::min(o->batch, ctx);
    if (tokenizer->vocab().add_bos) options.bos = tokenizer->vocab().bos;
    o->model.kv_positions = ctx;
    o->model.logit_rows = options.batch;  // every row of a batch
    auto model = load_model(o->model);
    ThreadPool pool(o->model.thread_count());
    Session session(*model, ctx, o->model.kv_cache_type(), pool);
    const int64_t n_chunks =
        quality::perplexity_chunks(static_cast<int64_t>(tokens.size()), options);
    log::info("scoring {} chunks of {} tokens ({} tokens in the text), the second half of each",
              n_chunks, ctx, tokens.size());
    nlohmann::json running = nlohmann::json::array();
    const auto start = std::chrono::steady_clock::now();
    const quality::PerplexityEstimate e =
        quality::perplexity(session, tokens, options, [&](const quality::PerplexityEstimate& p) {
          running.push_back(p.ppl);
          if (o->json) return;
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          fmt::print(
              stderr, "[{}/{}] PPL {:.4f} +/- {:.5f}  ({:.1f} s, {:.0f} s left)\n", p.chunks,
              n_chunks, p.ppl, p.ppl_error, seconds,
              seconds / static_cast<double>(p.chunks) * static_cast<double>(n_chunks - p.chunks));
        });
    if (o->json) {
      fmt::print("{}\n", nlohmann::json{{"model", o->model.path},
                                        {"file", o->text_file},
                                        {"ctx", ctx},
                                        {"chunks", e.chunks},
                                        {"tokens_scored", e.tokens},
                                        {"ppl", e.ppl},
                                        {"ppl_error", e.ppl_error},
                                        {"mean_nll", e.mean_nll},
                                        {"running_ppl", running}}
                             .dump(2));
    } else {
      fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f} ({} chunks of {}, {} tokens scored)\n",
                 e.ppl, e.ppl_error, e.chunks, ctx, e.tokens);
    }
  });
}

}  // namespace strata::cli
