#include "quality/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace strata::quality {
namespace {

constexpr uint32_t kMagic = 0x4c4b5453;  // "STKL"
constexpr uint32_t kVersion = 1;
// llama-perplexity leaves out the base's tokens below this log-probability (e^-16 = 1e-7).
constexpr float kSmallestLogProb = -16.0f;

// log softmax(logits) into `out`, the exponentials summed in double.
void log_softmax(std::span<const float> logits, std::vector<float>& out) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float l : logits) sum += std::exp(l - max);
  const float lse = max + static_cast<float>(std::log(sum));
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - lse;
}

void write_all(FILE* f, const void* data, size_t bytes, const std::string& path) {
  STRATA_CHECK(std::fwrite(data, 1, bytes, f) == bytes, "cannot write {} (disk full?)", path);
}

void read_all(FILE* f, void* data, size_t bytes, const std::string& path) {
  STRATA_CHECK(std::fread(data, 1, bytes, f) == bytes,
               "{} ends early: not a whole base-logits file (strata perplexity --save-logits)",
               path);
}

// The fraction-th value of sorted `values`, interpolated (llama-perplexity's percentile).
double percentile(const std::vector<float>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  const double p = fraction * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<size_t>(p);
  const double t = p - static_cast<double>(i);
  return (1 - t) * sorted[i] + t * sorted[std::min(i + 1, sorted.size() - 1)];
}

// Mean and its uncertainty as llama-perplexity gives them (none below 11 values).
std::pair<double, double> mean_and_uncertainty(const std::vector<float>& v) {
  if (v.empty()) return {0, 0};
  double sum = 0, sum2 = 0;
  for (const float x : v) {
    sum += x;
    sum2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n, var = sum2 / n - mean * mean;
  return {mean, var > 0 && v.size() > 10 ? std::sqrt(var / (n - 1)) : 0.0};
}

}  // namespace

BaseLogitsWriter::BaseLogitsWriter(const std::string& path, const BaseLogitsHeader& header)
    : path_(path), top_(std::min(header.top, header.n_vocab)) {
  STRATA_CHECK(top_ >= 1, "--save-top must be at least 1");
  f_ = std::fopen(path.c_str(), "wb");
  STRATA_CHECK(f_, "cannot write {}", path);
  const uint32_t n_tokens = static_cast<uint32_t>(header.tokens.size());
  const uint32_t head[] = {kMagic, kVersion, header.n_vocab, header.ctx, top_, n_tokens};
  write_all(f_, head, sizeof head, path_);
  write_all(f_, header.tokens.data(), header.tokens.size() * sizeof(int32_t), path_);
}

BaseLogitsWriter::~BaseLogitsWriter() {
  if (f_) std::fclose(f_);
}

void BaseLogitsWriter::add(std::span<const float> logits, int32_t next) {
  log_softmax(logits, log_probs_);
  order_.resize(log_probs_.size());
  std::iota(order_.begin(), order_.end(), 0);
  // Most likely first; equal ones by id, so the first is the lowest id of the largest.
  std::partial_sort(order_.begin(), order_.begin() + top_, order_.end(), [&](int32_t a, int32_t b) {
    return log_probs_[static_cast<size_t>(a)] > log_probs_[static_cast<size_t>(b)] ||
           (log_probs_[static_cast<size_t>(a)] == log_probs_[static_cast<size_t>(b)] && a < b);
  });
  write_all(f_, &log_probs_[static_cast<size_t>(next)], sizeof(float), path_);
  for (uint32_t i = 0; i < top_; ++i) {
    const int32_t id = order_[i];
    write_all(f_, &id, sizeof id, path_);
    write_all(f_, &log_probs_[static_cast<size_t>(id)], sizeof(float), path_);
  }
}

void BaseLogitsWriter::close() {
  if (!f_) return;
  const bool ok = std::fflush(f_) == 0;
  std::fclose(f_);
  f_ = nullptr;
  STRATA_CHECK(ok, "cannot write {} (disk full?)", path_);
}

KldAccumulator::KldAccumulator(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "rb");
  STRATA_CHECK(f_, "--kld {}: cannot open it", path);
  uint32_t head[6] = {};
  read_all(f_, head, sizeof head, path_);
  STRATA_CHECK(head[0] == kMagic, "{} is not a base-logits file (strata perplexity --save-logits)",
               path);
  STRATA_CHECK(head[1] == kVersion, "{}: base-logits version {}, this strata reads {}", path,
               head[1], kVersion);
  header_.n_vocab = head[2];
  header_.ctx = head[3];
  header_.top = head[4];
  STRATA_CHECK(header_.top >= 1 && header_.top <= header_.n_vocab && head[5] <= (1u << 30),
               "{}: a damaged header", path);
  header_.tokens.resize(head[5]);
  read_all(f_, header_.tokens.data(), header_.tokens.size() * sizeof(int32_t), path_);
  top_ids_.resize(header_.top);
  top_log_probs_.resize(header_.top);
}

KldAccumulator::~KldAccumulator() {
  if (f_) std::fclose(f_);
}

void KldAccumulator::add(std::span<const float> logits, int32_t next) {
  STRATA_CHECK(logits.size() == header_.n_vocab, "a vocabulary of {}, the base's is {}",
               logits.size(), header_.n_vocab);
  float base_next = 0;
  read_all(f_, &base_next, sizeof base_next, path_);
  for (uint32_t i = 0; i < header_.top; ++i) {
    read_all(f_, &top_ids_[i], sizeof(int32_t), path_);
    read_all(f_, &top_log_probs_[i], sizeof(float), path_);
    STRATA_CHECK(top_ids_[i] >= 0 && static_cast<uint32_t>(top_ids_[i]) < header_.n_vocab,
                 "{}: a damaged record", path_);
  }
  log_softmax(logits, log_q_);
  double kld = 0, p_kept = 0, q_kept = 0;
  for (uint32_t i = 0; i < header_.top; ++i) {
    const float lp = top_log_probs_[i];
    const float lq = log_q_[static_cast<size_t>(top_ids_[i])];
    p_kept += std::exp(static_cast<double>(lp));
    q_kept += std::exp(static_cast<double>(lq));
    if (lp > kSmallestLogProb) kld += std::exp(static_cast<double>(lp)) * (lp - lq);
  }
  if (header_.top < header_.n_vocab) {  // the rest of the vocabulary, one bucket on each side
    const double p_rest = std::max(0.0, 1 - p_kept), q_rest = std::max(1e-30, 1 - q_kept);
    if (p_rest > 1e-12) kld += p_rest * (std::log(p_rest) - std::log(q_rest));
  }
  kld_.push_back(static_cast<float>(kld));
  const auto top_q = std::max_element(log_q_.begin(), log_q_.end()) - log_q_.begin();
  if (top_q == top_ids_[0]) ++same_top_;
  p_diff_.push_back(
      static_cast<float>(std::exp(log_q_[static_cast<size_t>(next)]) - std::exp(base_next)));
  sum_nll_base_ -= base_next;
}

void KldAccumulator::check_finished() const {
  STRATA_CHECK(std::fgetc(f_) == EOF,
               "{} holds more scored tokens than this run scored ({}): give both runs the same "
               "--ctx and --chunks",
               path_, kld_.size());
}

KldSummary KldAccumulator::summary() const {
  KldSummary s;
  s.tokens = static_cast<int64_t>(kld_.size());
  if (kld_.empty()) return s;
  std::tie(s.mean, s.mean_uncertainty) = mean_and_uncertainty(kld_);
  std::vector<float> sorted = kld_;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median = n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
  s.p99 = percentile(sorted, 0.99);
  s.p90 = percentile(sorted, 0.90);
  s.maximum = sorted.back();
  s.same_top = static_cast<double>(same_top_) / static_cast<double>(n);
  std::tie(s.mean_p_diff, s.mean_p_diff_uncertainty) = mean_and_uncertainty(p_diff_);
  double squares = 0;
  for (const float d : p_diff_) squares += static_cast<double>(d) * d;
  s.rms_p_diff = std::sqrt(squares / static_cast<double>(n));
  s.ppl_base = std::exp(sum_nll_base_ / static_cast<double>(n));
  return s;
}

}  // namespace strata::quality
