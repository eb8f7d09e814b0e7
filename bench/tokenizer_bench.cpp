// Tokenizer encode speed on one core: 100 KB of text, as MB/s and ms per 100 KB.
//   build/release/bench/bench_tokenizer   (reads the oracle Qwen3 vocabulary)
// "prose": the oracle corpus records in shuffled order (words repeat, as in real text);
// "unique": random letter strings, so no word is ever seen twice (the worst case).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string oracle_dir() {
  const char* env = std::getenv("STRATA_ORACLE_DIR");
  return env ? env : STRATA_ORACLE_DIR;
}

const strata::Tokenizer& tokenizer() {
  static strata::GgufFile file =
      strata::GgufFile::open(oracle_dir() + "/tokenizer/qwen3-vocab.gguf");
  static auto t = strata::Tokenizer::from_gguf(file);
  return *t;
}

std::string prose_100kb() {
  std::ifstream in(oracle_dir() + "/tokenizer/corpus.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<std::string> records;
  size_t start = 0;
  for (size_t at; (at = data.find("\n\x1e\n", start)) != std::string::npos; start = at + 3) {
    records.push_back(data.substr(start, at - start));
  }
  std::mt19937 rng(1);
  std::string out;
  while (out.size() < 100000) {
    std::shuffle(records.begin(), records.end(), rng);
    for (const auto& r : records) out += r + "\n";
  }
  return out.substr(0, 100000);
}

std::string unique_words_100kb() {
  std::mt19937 rng(2);
  std::string out;
  while (out.size() < 100000) {
    const int len = 3 + static_cast<int>(rng() % 8);
    for (int i = 0; i < len; ++i) out += static_cast<char>('a' + rng() % 26);
    out += rng() % 10 == 0 ? ". " : " ";
  }
  return out.substr(0, 100000);
}

void encode(benchmark::State& state, const std::string& text) {
  const strata::Tokenizer& t = tokenizer();
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = t.encode(text, true);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_EncodeProse100KB(benchmark::State& state) {
  encode(state, prose_100kb());
}
void BM_EncodeUniqueWords100KB(benchmark::State& state) {
  // A new text each run would cost more than the encode; the cache is cleared by using fresh
  // words on every iteration instead.
  const strata::Tokenizer& t = tokenizer();
  std::mt19937 rng(3);
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::string text = unique_words_100kb();
    std::shuffle(text.begin(), text.end(), rng);  // new words each iteration
    state.ResumeTiming();
    const auto ids = t.encode(text, true);
    benchmark::DoNotOptimize(ids.data());
    bytes += text.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

BENCHMARK(BM_EncodeProse100KB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeUniqueWords100KB)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
