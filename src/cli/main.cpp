// The strata binary: sub-commands over GGUF MoE models.

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/error.h"
#include "util/log.h"

int main(int argc, char** argv) {
  CLI::App app{
      "strata: plans, runs and serves Mixture-of-Experts GGUF models on the hardware you own"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata 0.1.0");
  strata::cli::add_inspect_command(app);
  strata::cli::add_devices_command(app);
  strata::cli::add_plan_command(app);
  strata::cli::add_run_command(app);
  strata::cli::add_logits_command(app);
  strata::cli::add_bench_command(app);
  strata::cli::add_tokenize_command(app);
  strata::cli::add_template_command(app);
  strata::cli::add_serve_command(app);
  strata::cli::add_profile_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const strata::Error& e) {
    strata::log::error("{}", e.what());
    return 1;
  } catch (const std::exception& e) {
    strata::log::error("unexpected failure: {}", e.what());
    return 2;
  }
  return 0;
}
