// The messages users see when something is wrong read in plain words: what failed, the likely
// cause, what to do; never the code that failed or a library's exception name. One test per
// class of message.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

std::string write_file(const std::string& name, const std::string& contents) {
  const std::string path = (test::temp_dir() / name).string();
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::string tiny_model() {
  return (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
}

TEST(Messages, NoVulkanDriverSaysWhatToInstall) {
  SKIP_WITHOUT_GPU_BACKEND();
  const auto r = run_strata_env(
      "VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json ",
      "run -m " + tiny_model() + " --tokens 1 -n 1 --device vk0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no Vulkan driver for this GPU: install mesa-vulkan-drivers"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "&info")) << r.output;  // no source code
}

TEST(Messages, BadJsonNamesTheFileAndThePlace) {
  const std::string bad = write_file("profile-bad.json", "not json");
  const auto r = run_strata("plan -m " + tiny_model() + " --profile " + bad +
                            " --gpu none --ram 32G:29 --cores 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, bad + ": not valid JSON: line 1, column 2")) << r.output;
  EXPECT_FALSE(contains(r.output, "json.exception")) << r.output;
}

TEST(Messages, ChoicesAreWords) {
  const auto r = run_strata("serve -m " + tiny_model() + " --log-format xml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "xml not in {text,json,off}")) << r.output;
  EXPECT_FALSE(contains(r.output, "->")) << r.output;
}

TEST(Messages, TruncatedFileSaysSo) {
  std::ifstream in(tiny_model(), std::ios::binary);
  std::string head(100000, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const auto r = run_strata("inspect " + write_file("cut.gguf", head));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "the file ends early: it is truncated (a download cut short?)"))
      << r.output;
}

TEST(Messages, WrongKindsOfFileAreNamed) {
  auto r = run_strata("inspect " + write_file("page.gguf", "<!DOCTYPE html>\n<html>...</html>"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "not a GGUF file: this is an HTML page")) << r.output;
  r = run_strata("inspect " +
                 write_file("lfs.gguf", "version https://git-lfs.github.com/spec/v1\noid x\n"));
  EXPECT_TRUE(contains(r.output, "this is a Git LFS pointer to the model")) << r.output;
  r = run_strata("inspect " + write_file("other.gguf", "ABCDEFGH12345678"));
  EXPECT_TRUE(contains(r.output, "where a GGUF file starts with \"GGUF\"")) << r.output;
}

}  // namespace
}  // namespace strata
