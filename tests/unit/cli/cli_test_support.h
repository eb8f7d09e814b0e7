#pragma once
// Runs the real strata binary for end-to-end CLI tests.

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace strata {

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// stdout, plus stderr when include_stderr (else stderr is dropped); `env` ("NAME=value ...",
// each followed by a space) is set for the command only.
inline RunResult run_strata_env(const std::string& env, const std::string& args,
                                bool include_stderr = true) {
  const std::string command =
      env + std::string(STRATA_EXE) + " " + args + (include_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline RunResult run_strata(const std::string& args, bool include_stderr = true) {
  return run_strata_env("", args, include_stderr);
}

}  // namespace strata
