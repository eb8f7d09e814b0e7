#include "oracle_compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::test {

LogitsComparison compare_logits(const LogitsFile& reference, const std::vector<float>& ours) {
  LogitsComparison c;
  const int64_t v = reference.n_vocab;
  STRATA_CHECK(static_cast<int64_t>(ours.size()) == reference.rows() * v,
               "{} logits, expected {} rows of {}", ours.size(), reference.rows(), v);
  double err = 0, ref = 0, err_unflipped = 0, ref_unflipped = 0;
  for (int64_t r = 0; r < reference.rows(); ++r) {
    const float* a = ours.data() + r * v;
    const float* b = reference.row(r);
    double row_err = 0, row_ref = 0;
    for (int64_t i = 0; i < v; ++i) {
      const double d = double(a[i]) - b[i];
      row_err += d * d;
      row_ref += double(b[i]) * b[i];
      c.max_abs_error = std::max(c.max_abs_error, std::fabs(d));
    }
    err += row_err;
    ref += row_ref;
    const double row_nmse = row_err / row_ref;
    if (r == 0) c.first_row_nmse = row_nmse;
    c.worst_row_nmse = std::max(c.worst_row_nmse, row_nmse);
    if (row_nmse > 1e-2) {
      c.rows_over_1e2++;
    } else {
      err_unflipped += row_err;
      ref_unflipped += row_ref;
    }
    // Argmax agreement only where the reference's best token is clearly ahead of the second.
    std::vector<int64_t> order(static_cast<size_t>(v));
    for (int64_t i = 0; i < v; ++i) order[static_cast<size_t>(i)] = i;
    std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                      [&](int64_t x, int64_t y) { return b[x] > b[y]; });
    const double rms = std::sqrt(row_ref / static_cast<double>(v));
    if (b[order[0]] - b[order[1]] > 0.05 * rms) {
      c.clear_rows++;
      if (std::max_element(a, a + v) - a == order[0]) c.argmax_agree++;
    }
    c.rows++;
  }
  c.nmse = err / ref;
  c.nmse_unflipped = ref_unflipped > 0 ? err_unflipped / ref_unflipped : 0.0;
  return c;
}

std::vector<float> teacher_forced_logits(const std::string& model_path, const LogitsFile& reference,
                                         const std::string& kv_type, int threads) {
  auto model = Model::load(model_path);
  return teacher_forced_logits(*model, reference, kv_type, threads);
}

std::vector<float> teacher_forced_logits(Model& model, const LogitsFile& reference,
                                         const std::string& kv_type, int threads) {
  ThreadPool pool(threads);
  const int64_t total = static_cast<int64_t>(reference.prompt.size() + reference.gen.size());
  Session session(model, total, KvCache::parse_type(kv_type), pool);
  std::vector<float> out, logits;
  session.eval(reference.prompt, true, logits);
  out = logits;
  for (size_t i = 0; i + 1 < reference.gen.size(); ++i) {
    const int32_t token = reference.gen[i];
    session.eval(std::span<const int32_t>(&token, 1), false, logits);
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

std::vector<GdnCase> gdn_cases() {
  std::vector<GdnCase> out;
  for (const char* type : {"Q8_0", "Q4_K_M"}) {
    for (int prompt : {24, 65, 200}) {
      const std::string model = std::string("tiny-qwen35moe-") + type;
      out.push_back({model + ".gguf", model + ".p" + std::to_string(prompt) + ".f16kv.orcl"});
    }
  }
  return out;
}

void PrintTo(const GdnCase& c, std::ostream* os) {
  *os << c.logits;
}

std::vector<ArchCase> arch_cases() {
  std::vector<ArchCase> out;
  const auto dir = oracle_dir() / "archs" / "logits";
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    out.push_back({name.substr(0, name.find(".p")) + ".gguf", name});
  }
  std::sort(out.begin(), out.end(),
            [](const ArchCase& a, const ArchCase& b) { return a.logits < b.logits; });
  return out;
}

void PrintTo(const ArchCase& c, std::ostream* os) {
  *os << c.logits;
}

std::string arch_case_name(const ArchCase& c) {
  std::string n = c.logits.substr(0, c.logits.find(".f16"));
  for (char& ch : n) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

}  // namespace strata::test
