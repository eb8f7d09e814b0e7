// `strata perplexity`: how well a model predicts a text, computed as llama-perplexity computes it
// (quality/perplexity.h), so a quant type or a placement can be compared with another engine's
// figures.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "gguf/gguf_file.h"
#include "quality/importance.h"
#include "quality/kl_divergence.h"
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
    std::string save_logits, kld, save_imatrix;
    int64_t save_top = 256;
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
  cmd->add_option("--save-logits", o->save_logits,
                  "Keep this (base) model's predictions in FILE for a later --kld run: per scored "
                  "token its --save-top most likely tokens");
  cmd->add_option("--save-top", o->save_top,
                  "Tokens kept per row by --save-logits (the vocabulary or more: all of them, and "
                  "the divergence is exact; fewer: a lower bound)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--save-imatrix", o->save_imatrix,
                  "Also collect an importance matrix over the text into FILE (llama.cpp's imatrix "
                  "GGUF) for `strata quantize --imatrix`; runs on the CPU");
  cmd->add_option("--kld", o->kld,
                  "KL divergence of this model's predictions from the base run saved in FILE "
                  "(same text, --ctx and --chunks), with top-token agreement and the change in "
                  "the next token's probability")
      ->check(CLI::ExistingFile);
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
    // The collector knows the weights by where the file maps them: the CPU's blocks, mmap-ed.
    if (!o->save_imatrix.empty()) {
      if (o->model.device != "none" && o->model.device != "auto")
        log::warn("--save-imatrix runs on the CPU: --device {} is not used", o->model.device);
      o->model.device = "none";
      o->model.load = "mmap";
    }
    auto model = load_model(o->model);
    std::unique_ptr<quality::ImportanceCollector> importance;
    if (!o->save_imatrix.empty()) {
      importance = std::make_unique<quality::ImportanceCollector>(model->file());
      STRATA_CHECK(model->set_activation_observer(importance.get()),
                   "--save-imatrix: this model does not run its blocks on the CPU");
    }
    ThreadPool pool(o->model.thread_count());
    Session session(*model, ctx, o->model.kv_cache_type(), pool);
    const auto n_vocab = static_cast<uint32_t>(model->hparams().n_vocab);
    std::unique_ptr<quality::BaseLogitsWriter> base_out;
    if (!o->save_logits.empty()) {
      base_out = std::make_unique<quality::BaseLogitsWriter>(
          o->save_logits, quality::BaseLogitsHeader{.n_vocab = n_vocab,
                                                    .ctx = static_cast<uint32_t>(ctx),
                                                    .top = static_cast<uint32_t>(o->save_top),
                                                    .tokens = tokens});
    }
    std::unique_ptr<quality::KldAccumulator> kld;
    if (!o->kld.empty()) {
      kld = std::make_unique<quality::KldAccumulator>(o->kld);
      const quality::BaseLogitsHeader& h = kld->header();
      STRATA_CHECK(h.n_vocab == n_vocab, "--kld {}: the base has a vocabulary of {}, this model {}",
                   o->kld, h.n_vocab, n_vocab);
      STRATA_CHECK(h.ctx == static_cast<uint32_t>(ctx),
                   "--kld {}: the base was scored at --ctx {}, this run at {}", o->kld, h.ctx, ctx);
      STRATA_CHECK(h.tokens == tokens,
                   "--kld {}: the base scored another text (or one tokenized otherwise)", o->kld);
    }
    const quality::RowScorer on_row = [&](std::span<const float> row, int32_t next) {
      if (base_out) base_out->add(row, next);
      if (kld) kld->add(row, next);
    };
    const int64_t n_chunks =
        quality::perplexity_chunks(static_cast<int64_t>(tokens.size()), options);
    log::info("scoring {} chunks of {} tokens ({} tokens in the text), the second half of each",
              n_chunks, ctx, tokens.size());
    nlohmann::json running = nlohmann::json::array();
    const auto start = std::chrono::steady_clock::now();
    const quality::PerplexityEstimate e = quality::perplexity(
        session, tokens, options,
        [&](const quality::PerplexityEstimate& p) {
          running.push_back(p.ppl);
          if (o->json) return;
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          fmt::print(
              stderr, "[{}/{}] PPL {:.4f} +/- {:.5f}  ({:.1f} s, {:.0f} s left)\n", p.chunks,
              n_chunks, p.ppl, p.ppl_error, seconds,
              seconds / static_cast<double>(p.chunks) * static_cast<double>(n_chunks - p.chunks));
        },
        on_row);
    if (base_out) {
      base_out->close();
      log::info("base predictions of {} tokens written to {}", e.tokens, o->save_logits);
    }
    if (importance) {
      model->set_activation_observer(nullptr);
      quality::ImportanceMatrix m = importance->result();
      STRATA_CHECK(!m.entries.empty(),
                   "--save-imatrix: no product of the model's weights was seen (were they "
                   "copied out of the file?)");
      m.datasets = {std::filesystem::path(o->text_file).filename().string()};
      m.chunks = e.chunks;
      m.chunk_size = ctx;
      m.write(o->save_imatrix);
      log::info("importance matrix of {} tensors over {} chunks written to {}", m.entries.size(),
                e.chunks, o->save_imatrix);
    }
    nlohmann::json kld_json;
    if (kld) {
      kld->check_finished();
      const quality::KldSummary k = kld->summary();
      kld_json = {{"tokens", k.tokens},
                  {"mean", k.mean},
                  {"mean_uncertainty", k.mean_uncertainty},
                  {"median", k.median},
                  {"p90", k.p90},
                  {"p99", k.p99},
                  {"maximum", k.maximum},
                  {"same_top", k.same_top},
                  {"mean_p_diff", k.mean_p_diff},
                  {"mean_p_diff_uncertainty", k.mean_p_diff_uncertainty},
                  {"rms_p_diff", k.rms_p_diff},
                  {"ppl_base", k.ppl_base},
                  // the base kept every token: exact; fewer: a lower bound
                  {"exact", kld->header().top >= kld->header().n_vocab}};
      if (!o->json) {
        fmt::print(
            "KL divergence from the base ({} tokens): mean {:.6f} +/- {:.6f}, median {:.6f}, "
            "90% {:.6f}, 99% {:.6f}, max {:.6f}\n"
            "same top token: {:.3f}%; next token's probability: mean change {:.3f} +/- {:.3f}%, "
            "RMS {:.3f}%; base PPL {:.4f}\n",
            k.tokens, k.mean, k.mean_uncertainty, k.median, k.p90, k.p99, k.maximum,
            100 * k.same_top, 100 * k.mean_p_diff, 100 * k.mean_p_diff_uncertainty,
            100 * k.rms_p_diff, k.ppl_base);
        if (kld->header().top < kld->header().n_vocab) {
          fmt::print(
              "(the divergence is a lower bound: the base kept its {} most likely tokens of "
              "{}; --save-top {} keeps them all)\n",
              kld->header().top, kld->header().n_vocab, kld->header().n_vocab);
        }
      }
    }
    if (o->json) {
      fmt::print("{}\n", nlohmann::json{{"model", o->model.path},
                                        {"file", o->text_file},
                                        {"ctx", ctx},
                                        {"chunks", e.chunks},
                                        {"tokens_scored", e.tokens},
                                        {"ppl", e.ppl},
                                        {"ppl_error", e.ppl_error},
                                        {"mean_nll", e.mean_nll},
                                        {"running_ppl", running},
                                        {"kld", kld_json}}
                             .dump(2));
    } else {
      fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f} ({} chunks of {}, {} tokens scored)\n",
                 e.ppl, e.ppl_error, e.chunks, ctx, e.tokens);
    }
  });
}

}  // namespace strata::cli
