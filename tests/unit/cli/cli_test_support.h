#pragma once
// Runs the real strata binary for end-to-end CLI tests.

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace strata {

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// A shell command line's exit status and stdout (with its own redirections).
inline RunResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// stdout, plus stderr when include_stderr (else stderr is dropped); `env` ("NAME=value ...",
// each followed by a space) is set for the command only.
inline RunResult run_strata_env(const std::string& env, const std::string& args,
                                bool include_stderr = true) {
  return run_shell(env + std::string(STRATA_EXE) + " " + args +
                   (include_stderr ? " 2>&1" : " 2>/dev/null"));
}

// The environment of a command that keeps its measurements and run records in a fresh cache at
// `cache` (emptied here), with the load check off: ctest runs other tests on the same cores.
inline std::string fresh_cache_env(const std::filesystem::path& cache) {
  std::filesystem::remove_all(cache);
  return "XDG_CACHE_HOME=" + cache.string() + " STRATA_CALIBRATION_LOAD_CHECK=off ";
}

inline RunResult run_strata(const std::string& args, bool include_stderr = true) {
  return run_strata_env("", args, include_stderr);
}

// Token ids as --tokens takes them (and run prints them): "1,2,3".
inline std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out;
}

inline bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A strata built without the Vulkan backend says so in `strata devices`.
inline bool has_gpu_backend() {
  static const bool yes = !contains(run_strata("devices").output, "no GPU backend");
  return yes;
}

// The environment that shows strata only lavapipe (Mesa's Vulkan driver on the CPU), whatever
// else the machine has, so vk0 is always the same device; "" when lavapipe is not installed.
inline std::string lavapipe_only() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/vulkan/icd.d", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("lvp_icd.", 0) == 0) return "VK_ICD_FILENAMES=" + e.path().string() + " ";
  }
  return "";
}

}  // namespace strata

#define SKIP_WITHOUT_GPU_BACKEND()                             \
  if (!::strata::has_gpu_backend())                            \
    GTEST_SKIP() << "strata was built without the Vulkan GPU " \
                    "backend";                                 \
  ASSERT_FALSE(::strata::lavapipe_only().empty())              \
      << "lavapipe is not installed (Debian: mesa-vulkan-drivers)"
