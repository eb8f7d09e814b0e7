#pragma once
// Each sub-command registers itself on the CLI11 app; main() only dispatches.

#include <CLI/CLI.hpp>

namespace strata::cli {

void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_template_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_service_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_quantize_command(CLI::App& app);

}  // namespace strata::cli
