// `strata service`: the systemd unit it writes (checked by systemd-analyze verify), the API key
// kept out of it, and what it refuses.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/systemd_unit.h"
#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Output (stdout and stderr) and exit status of a shell command.
RunResult shell(const std::string& command) {
  return run_shell(command + " 2>&1");
}

TEST(SystemdUnit, ArgumentsReachServeAsGiven) {
  EXPECT_EQ(cli::systemd_quote("plain"), "\"plain\"");
  EXPECT_EQ(cli::systemd_quote("two words"), "\"two words\"");
  // Neither variables nor specifiers expand; quotes and backslashes are escaped.
  EXPECT_EQ(cli::systemd_quote("$HOME %h"), "\"$$HOME %%h\"");
  EXPECT_EQ(cli::systemd_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(cli::environment_line("K", "x$y\"z"), "K=\"x\\$y\\\"z\"\n");
  EXPECT_TRUE(cli::is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(cli::is_loopback_host("localhost"));
  EXPECT_TRUE(cli::is_loopback_host("::1"));
  EXPECT_FALSE(cli::is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(cli::is_loopback_host("192.168.1.5"));
  EXPECT_TRUE(cli::valid_service_name("strata-coder@1"));
  EXPECT_FALSE(cli::valid_service_name("../etc/passwd"));
  EXPECT_FALSE(cli::valid_service_name("a b"));
  EXPECT_FALSE(cli::valid_service_name(""));
}

class Service : public testing::Test {
 protected:
  void SetUp() override {
    root_ = test::temp_dir() / "service-root";
    fs::remove_all(root_);
    model_ = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  }
  fs::path unit() const { return root_ / "etc/systemd/system/strata-test.service"; }
  fs::path env() const { return root_ / "etc/strata/strata-test.env"; }
  std::string install(const std::string& flags) const {
    return "service install --root " + root_.string() + " --name strata-test --model " + model_ +
           " " + flags;
  }
  fs::path root_;
  std::string model_;
};

TEST_F(Service, InstallWritesAUnitSystemdAccepts) {
  // A relative file flag, a key with shell and systemd specials, a non-loopback host.
  auto r = run_strata_env("STRATA_API_KEY= ", install("--host 0.0.0.0 --port 8090 --ctx 2048 "
                                                      "--api-key 'k$y\"1%h' --expert-profile "
                                                      "hot.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, unit().string())) << r.output;
  EXPECT_TRUE(contains(r.output, "systemctl left alone")) << r.output;

  const std::string text = read(unit());
  EXPECT_TRUE(contains(text, "Restart=on-failure")) << text;
  EXPECT_TRUE(contains(text, "\"-m\" \"" + fs::absolute(model_).lexically_normal().string() + "\""))
      << text;
  EXPECT_TRUE(
      contains(text, "\"--expert-profile\" \"" + (fs::current_path() / "hot.json").string()))
      << text;
  EXPECT_TRUE(contains(text, "EnvironmentFile=-/etc/strata/strata-test.env")) << text;
  EXPECT_FALSE(contains(text, "k$y")) << "the key is not in the world-readable unit";
  EXPECT_FALSE(contains(text, "api-key")) << text;

  // The key file: root only, and read back as the key.
  struct stat st {};
  ASSERT_EQ(::stat(env().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto key =
      shell("env -i bash -c 'set -a; . \"" + env().string() + "\"; printf %s \"$STRATA_API_KEY\"'");
  EXPECT_EQ(key.output, "k$y\"1%h");

  // systemd's own check of the unit: no error, no warning.
  auto verify = shell("systemd-analyze verify " + unit().string());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_EQ(verify.output, "") << verify.output;

  r = run_strata("service status --root " + root_.string() + " --name strata-test");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "unit: " + unit().string())) << r.output;

  r = run_strata("service uninstall --root " + root_.string() + " --name strata-test");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(unit()));
  EXPECT_FALSE(fs::exists(env()));
  r = run_strata("service status --root " + root_.string() + " --name strata-test");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "is not installed")) << r.output;
}

TEST_F(Service, InstallRefusesWhatWouldNotServeSafely) {
  auto r = run_strata_env("STRATA_API_KEY= ", install("--host 0.0.0.0"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "reachable from other machines")) << r.output;
  EXPECT_FALSE(fs::exists(unit()));

  r = run_strata(install("--ctx 2048 --no-such-flag"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--no-such-flag")) << r.output;
  EXPECT_FALSE(fs::exists(unit()));

  r = run_strata(install("--ctx many"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--ctx")) << r.output;
  EXPECT_FALSE(fs::exists(unit()));

  r = run_strata("service install --root " + root_.string() + " --model /no/such.gguf");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no such file")) << r.output;

  r = run_strata("service install --root " + root_.string() + " --name ../x --model " + model_);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--name '../x'")) << r.output;

  // The key from the environment counts as a key.
  r = run_strata_env("STRATA_API_KEY=from-env ", install("--host 0.0.0.0"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(read(env()), "STRATA_API_KEY=\"from-env\""));
}

}  // namespace
}  // namespace strata
