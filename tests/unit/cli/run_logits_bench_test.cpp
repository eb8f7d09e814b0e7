// `strata run`, `strata logits` and `strata bench` end to end on oracle models.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli_test_support.h"
#include "runtime/logits_file.h"
#include "support/test_support.h"

namespace strata {
namespace {

TEST(RunCommand, GreedyTokensMatchTheReferenceOnF16Models) {
  for (const char* m : {"tiny-qwen3moe-F16", "tiny-qwen3-F16", "tiny-llama-F16"}) {
    SCOPED_TRACE(m);
    const auto ref = LogitsFile::read(
        (test::oracle_dir() / "logits" / (std::string(m) + ".f16kv.orcl")).string());
    const auto r = run_strata(
        "run -m " + (test::oracle_dir() / "models" / (std::string(m) + ".gguf")).string() +
            " --tokens " + join(ref.prompt) + " -n " + std::to_string(ref.gen.size()),
        false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, join(ref.gen) + "\n");
  }
}

// --spec: the same tokens as the reference engine's greedy continuation, whatever drafts them
// (prompt lookup; a dense draft model of the same vocabulary; the model drafting for itself, whose
// every guess is kept); the timing line says how many were checked and kept.
TEST(RunCommand, SpeculativeDecodingGivesTheReferencesTokens) {
  const auto ref =
      LogitsFile::read((test::oracle_dir() / "logits" / "tiny-qwen3moe-F16.f16kv.orcl").string());
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-F16.gguf").string();
  const std::string base = "run -m " + model + " --device none --tokens " + join(ref.prompt) +
                           " -n " + std::to_string(ref.gen.size());
  for (const std::string& spec :
       {std::string(" --spec auto"),
        " --draft-model " + (test::oracle_dir() / "models" / "tiny-qwen3-F16.gguf").string(),
        " --spec draft --draft-model " + model}) {
    SCOPED_TRACE(spec);
    const auto r = run_strata(base + spec, false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, join(ref.gen) + "\n");
  }
  const auto self = run_strata(base + " --spec draft --draft-model " + model);
  const size_t at = self.output.find("drafts ");
  ASSERT_NE(at, std::string::npos) << self.output;
  int kept = 0, checked = 0;
  ASSERT_EQ(std::sscanf(self.output.c_str() + at, "drafts %d of %d kept", &kept, &checked), 2);
  EXPECT_GT(checked, 0);
  EXPECT_EQ(kept, checked);

  auto r = run_strata(base + " --spec mtp");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--spec mtp: the model has no multi-token-prediction block"),
            std::string::npos)
      << r.output;
  r = run_strata(base + " --spec fast");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("must be auto, ngram, mtp, draft or off"), std::string::npos) << r.output;
}

TEST(RunCommand, ClearErrors) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3-Q8_0.gguf").string();
  auto r = run_strata("run -m " + model + " --tokens 1,x,3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'x' is not a token id"), std::string::npos) << r.output;
  r = run_strata("run -m " + model + " --tokens 1,2 --kv-type q4");
  EXPECT_NE(r.output.find("KV cache type 'q4' is not supported"), std::string::npos) << r.output;
  r = run_strata("run -m " + model + " --tokens 1,2 --load disk");
  EXPECT_NE(r.output.find("--load must be mmap or ram"), std::string::npos) << r.output;
  r = run_strata("run -m " + model + " --tokens 1,2,600");
  EXPECT_NE(r.output.find("token id 600"), std::string::npos) << r.output;
  r = run_strata("run -m " + model + " --tokens 1,2 -n 10 --ctx 8");
  EXPECT_NE(r.output.find("exceed the context size 8"), std::string::npos) << r.output;
}

TEST(RunCommand, TextPromptOnAModelWithAVocabulary) {
  // A small random model carrying the Qwen3 tokenizer, made by the generator next to strata.
  const std::string generator =
      std::filesystem::path(STRATA_EXE).parent_path() / "make-synthetic-model";
  const auto model = (test::temp_dir() / "vocab-model.gguf").string();
  const std::string make =
      generator + " --ftype Q8_0 --embd 64 --heads 1 --kv-heads 1 --layers 1 " +
      "--vocab 151936 --vocab-from " +
      (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string() + " -o " + model + " 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  auto r = run_strata("run -m " + model + " -p 'Hello there' -n 6 --ignore-eos", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(r.output.empty());
  r = run_strata("run -m " + model + " -p 'Hello there' -n 6 --ignore-eos --ids", false);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), ','), 5) << r.output;
  r = run_strata("run -m " + (test::oracle_dir() / "models" / "tiny-llama-F16.gguf").string() +
                 " -p 'Hello' -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("has no vocabulary"), std::string::npos) << r.output;
}

// Issue 40: a CPU run with a prompt of one micro-batch (64+ tokens) and 32+ generated tokens joins
// this machine's records (hardware.json), which `strata plan` learns from; a short one does not.
TEST(RunCommand, ALongEnoughCpuRunIsRecorded) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  const auto cache = test::temp_dir() / "run-record-cache";
  const std::string env = fresh_cache_env(cache);
  std::vector<int32_t> prompt(64);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + i % 200);
  const std::string run = "run -m " + model + " --device none -t 2 --tokens " + join(prompt);
  auto r = run_strata_env(env, run + " -n 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(cache / "strata" / "hardware.json")) << r.output;
  r = run_strata_env(env, run + " -n 32 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "recorded this run in")) << r.output;
  std::ifstream in(cache / "strata" / "hardware.json");
  const auto records = nlohmann::json::parse(in)["run_records"];
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["n_prompt"], 64);
  EXPECT_EQ(records[0]["n_gen"], 32);
  EXPECT_EQ(records[0]["depth"], 64);
  EXPECT_EQ(records[0]["threads"], 2);
  EXPECT_EQ(records[0]["source"], "run");
  EXPECT_GT(records[0]["tg_tok_s"].get<double>(), 0);
  EXPECT_GT(records[0]["pp_tok_s"].get<double>(), 0);
}

TEST(LogitsCommand, WritesOrclThatMatchesTheReference) {
  const std::string m = "tiny-qwen3moe-F16";
  const auto ref = LogitsFile::read((test::oracle_dir() / "logits" / (m + ".f16kv.orcl")).string());
  const auto out = (test::temp_dir() / "ours.orcl").string();
  for (const std::string load : {"mmap", "ram"}) {
    const auto r =
        run_strata("logits -m " + (test::oracle_dir() / "models" / (m + ".gguf")).string() +
                   " --load " + load + " --tokens " + join(ref.prompt) + " -n " +
                   std::to_string(ref.gen.size()) + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto ours = LogitsFile::read(out);
    EXPECT_EQ(ours.prompt, ref.prompt);
    EXPECT_EQ(ours.gen, ref.gen);
    ASSERT_EQ(ours.logits.size(), ref.logits.size());
    EXPECT_LT(test::nmse(ours.logits.data(), ref.logits.data(), ours.logits.size()), 1e-5);
  }
}

TEST(LogitsCommand, RepackOnAndOffGiveIdenticalLogits) {
  // The tile GEMM and the row-by-row kernels sum in the same order: bit-identical logits.
  for (const std::string m :
       {"tiny-qwen3moe-Q4_K_M", "tiny-qwen3moe-Q8_0", "tiny-qwen3moe-Q5_K_M"}) {
    const auto ref =
        LogitsFile::read((test::oracle_dir() / "logits" / (m + ".f16kv.orcl")).string());
    std::vector<LogitsFile> runs;
    for (const std::string repack : {"on", "off"}) {
      const auto out = (test::temp_dir() / ("repack-" + repack + ".orcl")).string();
      const auto r =
          run_strata("logits -m " + (test::oracle_dir() / "models" / (m + ".gguf")).string() +
                     " --repack " + repack + " --tokens " + join(ref.prompt) + " -n 4 -o " + out);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      runs.push_back(LogitsFile::read(out));
    }
    EXPECT_EQ(runs[0].logits, runs[1].logits) << m;
    EXPECT_EQ(runs[0].gen, runs[1].gen) << m;
  }
}

TEST(BenchCommand, JsonReportsSpeedsBytesAndRoofline) {
  const auto r = run_strata(
      "bench -m " + (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string() +
          " -p 32 -n 8 -r 2 -t 2 --json",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_GT(j["pp"]["tok_per_s"].get<double>(), 0);
  EXPECT_GT(j["tg"]["tok_per_s"].get<double>(), 0);
  EXPECT_EQ(j["pp"]["runs"].size(), 2u);
  EXPECT_GT(j["ram_read_gbps"].get<double>(), 0);
  EXPECT_GT(j["roofline_fraction"].get<double>(), 0);
  // 2 layers, 2 experts per token each: at least 2 and at most 4 distinct experts per step.
  EXPECT_GE(j["experts_per_token"].get<double>(), 2.0);
  EXPECT_LE(j["experts_per_token"].get<double>(), 4.0);
  EXPECT_GT(j["bytes_per_token"].get<double>(), j["dense_bytes_per_token"].get<double>());
  // Issue 36: the compute roofs of the main weight type (Q4_K here) next to the RAM's, and the
  // one that binds generation: the lower of the two.
  ASSERT_TRUE(j.contains("compute_roofs")) << r.output;
  EXPECT_EQ(j["compute_roofs"]["type"], "Q4_K");
  // The tiny model stays in cache: byte tiles packed ahead, not compact tiles (those are for
  // weights streamed from RAM), and its roofs are measured as it runs.
  EXPECT_FALSE(j["compute_roofs"]["compact_tiles"].get<bool>());
  const double decode_roof = j["compute_roofs"]["decode_gbps"].get<double>();
  EXPECT_GT(decode_roof, 0);
  EXPECT_GT(j["compute_roofs"]["prefill_gmacs"].get<double>(), 0);
  EXPECT_EQ(j["tg_binding_roof"],
            decode_roof < j["ram_read_gbps"].get<double>() ? "compute" : "RAM");
  EXPECT_GE(j["tg_binding_fraction"].get<double>(), j["roofline_fraction"].get<double>());
  EXPECT_GT(j["tg_compute_fraction"].get<double>(), 0);
  EXPECT_GT(j["pp_compute_fraction"].get<double>(), 0);
}

// --agent N: an agent's turn, a prompt of N tokens (pp) and then -n tokens decoded at depth N from
// the prompt's own state: no second fill of the context. The report adds up the turn.
TEST(BenchCommand, AgentTurnDecodesFromThePromptsOwnState) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const auto text = run_strata("bench -m " + model + " --agent 48 -n 4 -r 1 --no-bandwidth");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("decoding from the prompt's own state (depth 48)"), std::string::npos)
      << text.output;
  EXPECT_EQ(text.output.find("filling the context"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("agent      prompt of 48 tokens in "), std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find("tg4 "), std::string::npos) << text.output;

  const auto r =
      run_strata("bench -m " + model + " --agent 48 -n 4 -r 1 --no-bandwidth --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["pp"]["tokens"], 48);
  EXPECT_EQ(j["tg"]["tokens"], 4);
  EXPECT_EQ(j["tg"]["depth"], 48);
  const auto& a = j["agent"];
  EXPECT_EQ(a["prompt_tokens"], 48);
  EXPECT_EQ(a["decode_tokens"], 4);
  EXPECT_NEAR(a["time_to_first_token_s"].get<double>(), 48 / j["pp"]["tok_per_s"].get<double>(),
              1e-9);
  EXPECT_NEAR(a["decode_s"].get<double>(), 4 / j["tg"]["tok_per_s"].get<double>(), 1e-9);
  EXPECT_NEAR(a["turn_s"].get<double>(),
              a["time_to_first_token_s"].get<double>() + a["decode_s"].get<double>(), 1e-9);

  // Without --agent, -p N -d N reuses the prompt's state too; without -n, 128 tokens.
  const auto same = run_strata("bench -m " + model + " -p 32 -d 32 -n 2 -r 1 --no-bandwidth");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("decoding from the prompt's own state (depth 32)"), std::string::npos)
      << same.output;
  const auto default_n =
      run_strata("bench -m " + model + " --agent 16 -r 1 --no-bandwidth --json", false);
  ASSERT_EQ(default_n.exit_code, 0) << default_n.output;
  EXPECT_EQ(nlohmann::json::parse(default_n.output)["tg"]["tokens"], 128);

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--agent 48 -p 32", "--agent 48 is a prompt of 48 tokens: drop -p 32"},
           {"--agent 48 -d 16", "--agent 48 decodes at depth 48: drop -d 16"},
           {"--agent 48 -n 0", "--agent measures decoding after the prompt: -n must be > 0"}}) {
    const auto bad = run_strata("bench -m " + model + " " + args);
    EXPECT_EQ(bad.exit_code, 1) << args;
    EXPECT_NE(bad.output.find(message), std::string::npos) << args << ": " << bad.output;
  }
}

// --edit-replay: a rename in 160 answer tokens generated (forced) with and without n-gram drafts;
// the run checks that both generated exactly the answer, and drafts were checked and most kept.
TEST(BenchCommand, EditReplayDraftsTheCopiedCode) {
  const auto r = run_strata(
      "bench -m " + (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string() +
          " -p 0 -n 0 --edit-replay 160 -r 1 --no-bandwidth --json",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto e = nlohmann::json::parse(r.output)["edit_replay"];
  EXPECT_EQ(e["tokens"], 160);
  EXPECT_GT(e["renamed"].get<int>(), 0);
  EXPECT_GT(e["tok_s_plain"].get<double>(), 0);
  EXPECT_GT(e["tok_s_drafted"].get<double>(), 0);
  EXPECT_GT(e["drafted"].get<int>(), 0);
  EXPECT_GT(e["kept"].get<int>() * 2, e["drafted"].get<int>()) << "most drafted tokens are kept";
  EXPECT_LE(e["kept"].get<int>(), e["drafted"].get<int>());
  // With every measurement off, nothing is run.
  const auto small = run_strata(
      "bench -m " + (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string() +
      " -p 0 -n 0 --edit-replay 0");
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_NE(small.output.find("nothing to measure"), std::string::npos) << small.output;
}

// --verify N alone (-n 0) measures steps of 1..N tokens at -d's depth: the context is filled to
// the depth first and holds the largest step after it.
TEST(BenchCommand, VerifyStepsRunAtTheDepthWithoutATgRun) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  const auto r =
      run_strata("bench -m " + model + " -p 0 -n 0 -d 24 --verify 3 -r 1 --no-bandwidth");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("filling the context to depth 24"), std::string::npos) << r.output;
  const auto j =
      run_strata("bench -m " + model + " -p 0 -n 0 --verify 4 -r 1 --no-bandwidth --json", false);
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const auto verify = nlohmann::json::parse(j.output)["verify"];
  ASSERT_EQ(verify.size(), 4u) << j.output;
  EXPECT_EQ(verify[3]["tokens"], 4);
  EXPECT_DOUBLE_EQ(verify[0]["relative"].get<double>(), 1.0);
}

// gpt-oss's sliding layers (layer 0 of the tiny model, window 16) read only their window of the
// cache: at depth 64 a token reads 64-67 positions in layer 1 and 16 in layer 0.
TEST(BenchCommand, SlidingWindowLayersReadOnlyTheirWindow) {
  const std::string model =
      (test::oracle_dir() / "archs" / "models" / "tiny-gpt-oss-Q8_0.gguf").string();
  const auto r = run_strata(
      "bench -m " + model + " --device none -p 0 -n 4 -d 64 -r 1 --no-bandwidth --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  // f16 K and V of 2 KV heads x 64 in 2 layers: 1024 bytes a position; positions 64..67.
  const double full = (64 + 67) / 2.0, windowed = 16;
  EXPECT_NEAR(j["kv_bytes_per_token"].get<double>(), (full + windowed) / 2 * 1024, 1e-6);
}

TEST(BenchCommand, UsesThePlannedSettingsUnlessFlagsAreGiven) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  auto r = run_strata("bench -m " + model + " -p 8 -n 2 -r 1 --json --no-bandwidth", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["load"], "ram");  // a 2 MiB model fits in memory
  EXPECT_EQ(j["kv_type"], "f16");
  r = run_strata("bench -m " + model + " -p 8 -n 2 -r 1 --json --no-bandwidth --load mmap -t 1",
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["load"], "mmap");
  EXPECT_EQ(j["threads"], 1);
  r = run_strata("bench -m " + model + " -p 8 -n 2 -r 1 --no-bandwidth");
  EXPECT_NE(r.output.find("plan: "), std::string::npos) << r.output;
}

TEST(BenchCommand, ExpertProfileRecordsThePromptsRoutingForThePlanner) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const std::string out = (test::temp_dir() / "bench-experts.json").string();
  auto r =
      run_strata("bench -m " + model + " -p 24 -n 2 -r 1 --no-bandwidth --expert-profile " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  ASSERT_TRUE(in.good()) << out;
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["tokens"], 24);
  // 2 layers of 8 experts, 2 chosen per token: each layer's counts add up to 48, from one run.
  ASSERT_EQ(j["expert_counts"].size(), 2u);
  for (const auto& layer : j["expert_counts"]) {
    ASSERT_EQ(layer.size(), 8u);
    int64_t sum = 0;
    for (const auto& c : layer) sum += c.get<int64_t>();
    EXPECT_EQ(sum, 48);
  }
  // (Hypothetical hardware: no calibration needed to check the file is accepted.)
  r = run_strata("plan -m " + model + " --profile " + out + " --gpu none --ram 8G:20 --cores 2",
                 true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bench-experts.json"), std::string::npos) << r.output;

  r = run_strata("bench -m " + model + " -p 0 -n 2 --no-bandwidth --expert-profile " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("needs -p > 0"), std::string::npos) << r.output;
  const std::string dense = (test::oracle_dir() / "models" / "tiny-qwen3-Q8_0.gguf").string();
  r = run_strata("bench -m " + dense + " -p 8 -n 0 --no-bandwidth --expert-profile " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("has no routed experts"), std::string::npos) << r.output;
}

// With --verify N the steps of N tokens are profiled too (what each drafted token adds).
TEST(BenchCommand, ProfileSplitsPrefillDecodeAndVerifyByOp) {
  const auto r = run_strata(
      "bench -m " + (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string() +
          " -p 16 -n 4 -r 1 -t 1 --verify 3 --json --no-bandwidth --profile",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"prefill_profile", "decode_profile", "verify_profile"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    std::set<std::string> ops;
    double share = 0;
    for (const auto& op : j[key]) {
      ops.insert(op["op"].get<std::string>());
      EXPECT_GE(op["ms_per_token"].get<double>(), 0);
      share += op["share"].get<double>();
    }
    // The timed scopes do not overlap, so together they cannot exceed the run.
    EXPECT_LE(share, 1.0 + 1e-6) << key;
    for (const char* op : {"attention: over the kv cache", "moe: experts gate+up", "output head"})
      EXPECT_TRUE(ops.count(op)) << key << " lacks " << op;
  }
}

}  // namespace
}  // namespace strata
