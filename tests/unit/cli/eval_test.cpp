// `strata eval` on the shipped tasks (tools/train/eval_tasks.jsonl) with the trained model:
// results, resuming, the GPU path, refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

const fs::path kTrain = test::test_data_dir() / ".." / ".." / "tools" / "train";
const std::string kModel = (kTrain / "strata-coder-tiny.gguf").string();

// The first `n` multiple-choice and the first `m` short-answer tasks of the shipped file.
fs::path some_tasks(int n, int m, const std::string& name) {
  std::ifstream in(kTrain / "eval_tasks.jsonl");
  const fs::path out = test::temp_dir() / name;
  std::ofstream f(out);
  std::string line;
  while (std::getline(in, line)) {
    const bool choice = nlohmann::json::parse(line).contains("choices");
    if (choice ? n-- > 0 : m-- > 0) f << line << "\n";
  }
  return out;
}

nlohmann::json run_eval(const std::string& flags, const std::string& env = "") {
  auto r = run_strata_env(env, "eval -m " + kModel + " --ctx 2048 --json " + flags, false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

std::vector<nlohmann::json> lines(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(EvalCommand, TheShippedTasksBeatChanceOnChoices) {
  const auto results = test::temp_dir() / "eval-all.jsonl";
  fs::remove(results);
  const nlohmann::json s =
      run_eval("--device none --tasks " + (kTrain / "eval_tasks.jsonl").string() + " --results " +
               results.string());
  EXPECT_EQ(s["tasks"], 120);
  const auto rs = lines(results);
  ASSERT_EQ(rs.size(), 120u);
  int64_t choices = 0, right = 0, correct = 0;
  for (const auto& r : rs) {
    correct += r["correct"].get<bool>();
    if (r["kind"] != "choice") continue;
    ++choices;
    right += r["correct"].get<bool>();
    EXPECT_EQ(r["log_likelihoods"].size(), 4u);
  }
  EXPECT_EQ(choices, 60);
  EXPECT_EQ(s["correct"], correct);
  // Four choices: chance is 25%; measured 40% (Zen 5).
  EXPECT_GE(right, 18) << "the trained model picks the asked-for function no better than chance";
  const double low = s["ci95"][0], high = s["ci95"][1];
  EXPECT_LE(low, s["accuracy"].get<double>());
  EXPECT_GE(high, s["accuracy"].get<double>());
}

TEST(EvalCommand, AStoppedRunResumesFromItsResults) {
  const auto tasks = some_tasks(3, 2, "eval-five.jsonl");
  const auto results = test::temp_dir() / "eval-resume.jsonl";
  fs::remove(results);
  const nlohmann::json first = run_eval("--device none --limit 3 --tasks " + tasks.string() +
                                        " --results " + results.string());
  EXPECT_EQ(first["tasks"], 3);
  ASSERT_EQ(lines(results).size(), 3u);
  auto r = run_strata("eval -m " + kModel + " --ctx 2048 --device none --tasks " + tasks.string() +
                      " --results " + results.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "3 of the 5 tasks done before, 2 to run")) << r.output;
  const auto all = lines(results);
  ASSERT_EQ(all.size(), 5u) << "only the two new tasks were run";
  // The same five in one go give the same results.
  const auto fresh = test::temp_dir() / "eval-fresh.jsonl";
  fs::remove(fresh);
  run_eval("--device none --tasks " + tasks.string() + " --results " + fresh.string());
  const auto again = lines(fresh);
  ASSERT_EQ(again.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(all[i]["id"], again[i]["id"]);
    EXPECT_EQ(all[i]["prediction"], again[i]["prediction"]);
  }
}

TEST(EvalCommand, TheGpuChoosesAndAnswersAsTheCpuDoes) {
  if (!has_gpu_backend() || lavapipe_only().empty())
    GTEST_SKIP() << "built without Vulkan, or no lavapipe";
  const auto tasks = some_tasks(2, 1, "eval-three.jsonl");
  const auto cpu = test::temp_dir() / "eval-cpu.jsonl", gpu = test::temp_dir() / "eval-gpu.jsonl";
  fs::remove(cpu);
  fs::remove(gpu);
  run_eval("--device none --tasks " + tasks.string() + " --results " + cpu.string());
  run_eval("--device vk0 --tasks " + tasks.string() + " --results " + gpu.string(),
           lavapipe_only());
  const auto c = lines(cpu), g = lines(gpu);
  ASSERT_EQ(c.size(), 3u);
  ASSERT_EQ(g.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i]["prediction"], g[i]["prediction"]) << c[i]["id"];
    if (c[i]["kind"] != "choice") continue;
    for (size_t k = 0; k < 4; ++k) {
      const double a = c[i]["log_likelihoods"][k], b = g[i]["log_likelihoods"][k];
      EXPECT_NEAR(a, b, 0.01 * std::abs(a) + 0.05) << c[i]["id"] << " choice " << k;
    }
  }
}

TEST(EvalCommand, RefusesMalformedTasksNamingTheLine) {
  const auto bad = test::temp_dir() / "eval-bad.jsonl";
  const auto check = [&](const std::string& body, const std::string& message) {
    std::ofstream(bad) << R"({"id": "ok", "question": "2+2?", "answer": "4"})"
                       << "\n"
                       << body << "\n";
    auto r = run_strata("eval -m " + kModel + " --device none --tasks " + bad.string());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "line 2")) << r.output;
    EXPECT_TRUE(contains(r.output, message)) << r.output;
  };
  check(R"({"id": "a", "question": "q", "choices": ["x", "y"], "answer": 2})", "index");
  check(R"({"id": "ok", "question": "q", "answer": "a"})", "used twice");
  check(R"({"id": "b", "question": "q"})", "\"answer\" is missing");
  check(R"({"id": "c", "answer": "a"})", "\"question\"");
  check("not json", "not a JSON object");
}

}  // namespace
}  // namespace strata
