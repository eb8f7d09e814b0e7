// Constrained decoding: what one decoding step pays to mask the logits of the Qwen3 vocabulary
// (151,669 tokens; the logits row of a Qwen3 model has 151,936) for states of a realistic
// tool-argument schema, through the server's GrammarConstraint (the grammar layer's mask, then
// -infinity written into the disallowed logits). Cold: a fresh request (no memoized transitions,
// no mask cache: the first time a request meets a state); cold_cached_graph: the mask cache
// cleared but byte transitions memoized; warm: a state seen before (most steps inside a string).
// Run: build/release/bench/bench_grammar_mask (vocabulary from $STRATA_QWEN3_VOCAB, default the
// oracle folder's qwen3-vocab.gguf).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "gguf/gguf_file.h"
#include "grammar/json_schema.h"
#include "server/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace strata::grammar;
using json = nlohmann::ordered_json;

const strata::Tokenizer* qwen3_tokenizer() {
  static std::unique_ptr<strata::Tokenizer> tokenizer = []() -> std::unique_ptr<strata::Tokenizer> {
    const char* env = std::getenv("STRATA_QWEN3_VOCAB");
    const std::filesystem::path path =
        env ? env : std::filesystem::path(STRATA_ORACLE_DIR) / "tokenizer" / "qwen3-vocab.gguf";
    if (!std::filesystem::exists(path)) return nullptr;
    const strata::GgufFile file = strata::GgufFile::open(path.string());
    return strata::Tokenizer::from_gguf(file);
  }();
  return tokenizer.get();
}

std::shared_ptr<const TokenTrie> qwen3_trie() {
  static std::shared_ptr<const TokenTrie> trie =
      qwen3_tokenizer() ? strata::server::vocabulary_trie(*qwen3_tokenizer()) : nullptr;
  return trie;
}

std::shared_ptr<const Grammar> tool_grammar() {
  static std::shared_ptr<const Grammar> g = [] {
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"location", {{"type", "string"}, {"description", "City and country"}}},
          {"days", {{"type", "integer"}, {"minimum", 0}}},
          {"units", {{"enum", {"metric", "imperial"}}}},
          {"include_hourly", {{"type", "boolean"}}},
          {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 8}}},
          {"threshold", {{"type", "number"}}}}},
        {"required", {"location", "days"}},
        {"additionalProperties", false}};
    return grammar_for_json_schema(schema).grammar;
  }();
  return g;
}

// Bytes that lead to each benchmarked state.
const char* const kPrefixes[] = {
    "",                                         // start of value
    "{",                                        // after {
    "{\"location\": \"San Francisco, Cal",      // inside a string value
    "{\"location\": \"Paris\", \"days\": 1",    // inside a number
    "{\"location\": \"Paris\", \"days\": 3, ",  // between members
};
const char* const kNames[] = {"start", "after_brace", "in_string", "in_number", "between_members"};

enum class Mode { cold, cold_cached_graph, warm };

void BM_Mask(benchmark::State& state, Mode mode) {
  auto trie = qwen3_trie();
  if (!trie) {
    state.SkipWithError("Qwen3 vocabulary not found: set STRATA_QWEN3_VOCAB");
    return;
  }
  const strata::Tokenizer& tokenizer = *qwen3_tokenizer();
  const std::vector<int32_t> eog = tokenizer.vocab().end_of_generation;
  const char* prefix = kPrefixes[state.range(0)];
  state.SetLabel(kNames[state.range(0)]);
  const auto request = [&] {
    return std::make_unique<strata::server::GrammarConstraint>(tool_grammar(), trie, tokenizer, eog,
                                                               "");
  };
  auto c = request();
  std::vector<float> logits(151936, 0.5f);
  TokenConstraint& tokens = c->tokens();
  if (!tokens.accept_bytes(prefix)) {
    state.SkipWithError("benchmark prefix rejected by the grammar");
    return;
  }
  c->mask(logits);  // warms the graph and the cache
  for (auto _ : state) {
    if (mode == Mode::cold) {
      state.PauseTiming();
      c = request();  // (the old one is freed outside the timed part)
      c->tokens().accept_bytes(prefix);
      state.ResumeTiming();
      c->mask(logits);
    } else {
      if (mode == Mode::cold_cached_graph) tokens.clear_cache();
      c->mask(logits);
    }
    benchmark::DoNotOptimize(logits.data());
  }
}

BENCHMARK_CAPTURE(BM_Mask, cold, Mode::cold)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Mask, cold_cached_graph, Mode::cold_cached_graph)
    ->DenseRange(0, 4)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Mask, warm, Mode::warm)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
