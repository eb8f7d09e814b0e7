#pragma once
// `strata plan --llama-cmd '<a whole llama.cpp command line>'`: the line a user runs today, pasted
// as it is (program name, shell quoting, line continuations), priced by the planner. The line is
// split as a POSIX shell would, the program name (llama-server, llama-cli, ...) dropped, its flags
// taken through the llama.cpp spellings (llama_flags.h), and every flag `strata plan` does not
// know left out with a note naming it, never silently.

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/llama_flags.h"

namespace strata::cli {

// The words of a shell command line: single quotes keep everything, double quotes keep all but
// \" \\ \$ \`, a backslash outside quotes keeps the next character, backslash-newline joins
// lines. Throws strata::Error for an unterminated quote.
std::vector<std::string> shell_words(std::string_view line);

// args with each `--llama-cmd LINE` (or `--llama-cmd=LINE`) replaced by LINE's flags, rewritten
// for `command` (args[0]); flags `known` says the command does not have are left out, with their
// value (the next word when it is not a flag), and named in the notes. Other args pass unchanged.
RewrittenArgs expand_llama_command(std::span<const std::string> args,
                                   const std::function<bool(const std::string&)>& known);

}  // namespace strata::cli
