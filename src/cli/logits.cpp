// `strata logits`: teacher-forced logits in the ORCL format, to compare with any other engine.

#include "cli/commands.h"
#include "cli/model_options.h"
#include "runtime/logits_file.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {

void add_logits_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string tokens;
    std::string out;
    int n_gen = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "logits", "Write the logits after every token of a prompt (ORCL format, see README)");
  add_model_options(cmd, o->model);
  cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids")->required();
  cmd->add_option("-o,--output", o->out, "Output .orcl file")->required();
  cmd->add_option("-n,--n-gen", o->n_gen,
                  "Also generate this many greedy tokens (as the oracle files do)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->callback([o] {
    LogitsFile file;
    file.prompt = parse_token_list(o->tokens);
    const int64_t total = static_cast<int64_t>(file.prompt.size()) + o->n_gen;
    o->model.kv_positions = total;  // the KV cache allocated below: what the plan counts
    o->model.logit_rows = total;    // every row's logits
    auto model = load_model(o->model);
    file.n_vocab = static_cast<uint32_t>(model->hparams().n_vocab);
    ThreadPool pool(o->model.thread_count());
    Session session(*model, total, o->model.kv_cache_type(), pool);
    std::vector<float> logits;
    // The prompt in one batch, then one-token steps: row i is the logits after token i.
    session.eval(file.prompt, true, logits);
    file.logits = logits;
    std::vector<float> last(logits.end() - file.n_vocab, logits.end());
    for (int i = 0; i < o->n_gen; ++i) {
      const int32_t next = argmax(last);
      file.gen.push_back(next);
      if (i + 1 == o->n_gen) break;
      session.eval(std::span<const int32_t>(&next, 1), false, last);
      file.logits.insert(file.logits.end(), last.begin(), last.end());
    }
    // ORCL keeps n_prompt + n_gen - 1 rows: the logits after the last token are not stored.
    file.logits.resize(static_cast<size_t>(std::max<int64_t>(total - 1, 0)) * file.n_vocab);
    file.write(o->out);
    log::info("wrote {} rows of {} logits to {}", file.rows(), file.n_vocab, o->out);
    for (const Model::DeviceMemory& d : model->device_memory()) {
      log::info("{}: {} bytes of device memory allocated, budget {} bytes", d.device,
                d.allocated_bytes, d.budget_bytes);
    }
  });
}

}  // namespace strata::cli
