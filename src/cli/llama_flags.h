#pragma once
// llama.cpp's command-line spellings, so the command a user already runs works here: before the
// arguments are parsed, each llama.cpp flag is rewritten to strata's own (-c -> --ctx, -ngl ->
// --gpu-layers, -ctk -> --kv-type, ...), and a flag that has no meaning in strata (-fa, -ub,
// --jinja, ...) is dropped with a one-line note saying why, never silently. One table
// (llama_flags.cpp) says which.

#include <span>
#include <string>
#include <vector>

namespace strata::cli {

struct RewrittenArgs {
  std::vector<std::string> args;   // what strata parses (without the program name)
  std::vector<std::string> notes;  // one line per flag taken from llama.cpp, for the user
};

// args: the command line without the program name, the sub-command first. Only the commands
// that load a model (run, bench, serve, plan, profile, logits) are rewritten. Throws
// strata::Error for llama.cpp flags strata cannot honour (-ctk and -ctv of different types).
RewrittenArgs rewrite_llama_flags(std::span<const std::string> args);

}  // namespace strata::cli
