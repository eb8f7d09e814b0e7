#pragma once
// KL divergence of a model's predictions from a base model's on the same text, with the figures
// llama-perplexity's --kl-divergence prints: KLD per scored token (mean with its uncertainty,
// median, percentiles, maximum), how often both models put the same token on top, and the change
// in the probability of the text's next token (Δp = q - p).
//
// The base run is kept in a file (`strata perplexity --save-logits`): per scored token the base's
// log-probability of the next token and its `top` most likely tokens with their log-probabilities
// (all of them when top >= the vocabulary). With all of them the divergence is exact (as
// llama-perplexity sums it: terms with log p > -16); with fewer, the tokens outside the base's top
// are one bucket on each side, which gives a lower bound.

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace strata::quality {

// The base file: written while the base model is scored, read back row by row.
struct BaseLogitsHeader {
  uint32_t n_vocab = 0, ctx = 0, top = 0;
  std::vector<int32_t> tokens;  // the text's tokens (both runs must score the same ones)
};

class BaseLogitsWriter {
 public:
  BaseLogitsWriter(const std::string& path, const BaseLogitsHeader& header);
  ~BaseLogitsWriter();
  BaseLogitsWriter(const BaseLogitsWriter&) = delete;
  BaseLogitsWriter& operator=(const BaseLogitsWriter&) = delete;
  void add(std::span<const float> logits, int32_t next);
  void close();  // flushes; throws when the disk refused a write

 private:
  std::string path_;
  FILE* f_ = nullptr;
  uint32_t top_;
  std::vector<float> log_probs_;
  std::vector<int32_t> order_;
};

struct KldSummary {
  int64_t tokens = 0;
  double mean = 0, mean_uncertainty = 0, median = 0, p99 = 0, p90 = 0, maximum = 0;
  double same_top = 0;  // fraction of rows whose most likely token is the base's
  double mean_p_diff = 0, mean_p_diff_uncertainty = 0, rms_p_diff = 0;
  double ppl_base = 0;  // the base's perplexity over the same rows
};

class KldAccumulator {
 public:
  // Opens the base file; its header says what the run must match.
  explicit KldAccumulator(const std::string& path);
  ~KldAccumulator();
  KldAccumulator(const KldAccumulator&) = delete;
  KldAccumulator& operator=(const KldAccumulator&) = delete;
  const BaseLogitsHeader& header() const { return header_; }
  // The next scored row of this run against the base's same row.
  void add(std::span<const float> logits, int32_t next);
  // Throws unless every row of the base was met (the base scored more than this run).
  void check_finished() const;
  KldSummary summary() const;

 private:
  std::string path_;
  FILE* f_ = nullptr;
  BaseLogitsHeader header_;
  std::vector<int32_t> top_ids_;
  std::vector<float> top_log_probs_, log_q_;
  std::vector<float> kld_, p_diff_;
  int64_t same_top_ = 0;
  double sum_nll_base_ = 0;
};

}  // namespace strata::quality
