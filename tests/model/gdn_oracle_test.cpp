// The Gated DeltaNet hybrid oracle models (arch qwen35moe: three GDN layers, then one gated
// full-attention layer; MoE with a sigmoid-gated shared expert), teacher-forced through strata,
// against the logits of an independent GGUF engine (../shared/oracle/gdn). Prompts of 24, 65
// and 200 tokens: the reference prefills the recurrent layers in chunks of 64, so 65 and 200
// cross chunk boundaries; strata's sequential recurrence must agree across them.
//
// Thresholds, in the style of oracle_logits_test.cpp (same comparison, f16 KV cache):
// - First row: one token, the state starts at zero, so the recurrence reduces to a few products
//   (o = (q.k) beta v); it exercises every matmul, activation quantization, conv, L2 norm,
//   gated norm, router and the shared expert. The reference rounds some intermediates
//   differently (it scales q before the state product, sums the convolution and dot products
//   in another order), 1e-7-level differences that activation quantization of the next
//   projection can amplify: held to 1e-5 (measured: see the printed lines; ~1e-7 and below).
// - All rows: on top, the reference's chunked prefill (WY form) sums the delta rule in another
//   order than the sequential recurrence here, and attention rounds probabilities to f16;
//   activation quantization amplifies these 1e-7 differences. Measured over the rows that did
//   not flip an expert: Q8_0 1e-4..3e-4, Q4_K_M 4e-4..6e-4 (the qwen3moe files: 1e-4..5e-4):
//   held to 1e-3. At most 2 rows over 1e-2 (a router near-tie flipping an expert: the Q4_K_M
//   prompt, shared by p65 and p200, has one such row at 0.11, which alone adds 1.5e-3 to the
//   NMSE of the 72 rows of p65), so the NMSE over all rows is held to 3e-3 (2e-3 for the
//   qwen3moe files, whose flips are smaller). Argmax agreement on every clear row but one.
#include <gtest/gtest.h>

#include <filesystem>

#include "oracle_compare.h"
#include "support/test_support.h"

namespace strata::test {
namespace {

class GdnOracleLogits : public testing::TestWithParam<GdnCase> {};

TEST_P(GdnOracleLogits, MatchesReferenceEngine) {
  const GdnCase& c = GetParam();
  const auto dir = oracle_dir() / "gdn";
  const auto reference = LogitsFile::read((dir / "logits" / c.logits).string());
  const auto ours = teacher_forced_logits((dir / "models" / c.model).string(), reference, "f16", 2);
  const LogitsComparison r = compare_logits(reference, ours);
  std::printf(
      "%-40s rows %3d  nmse %.2e (unflipped %.2e)  first row %.2e  worst row %.2e  "
      "max abs %.4f  argmax %d/%d\n",
      c.logits.c_str(), r.rows, r.nmse, r.nmse_unflipped, r.first_row_nmse, r.worst_row_nmse,
      r.max_abs_error, r.argmax_agree, r.clear_rows);
  EXPECT_LT(r.first_row_nmse, 1e-5);
  EXPECT_LT(r.nmse_unflipped, 1e-3);
  const bool drift = cpu_kernels_drift();  // AVX2 kernels (see test_support.h)
  EXPECT_LT(r.nmse, drift ? 4e-3 : 3e-3);
  EXPECT_LE(r.rows_over_1e2, drift ? 6 : 2);
  EXPECT_GE(r.argmax_agree, r.clear_rows - (drift ? 3 : 1)) << "argmax disagrees on clear rows";
}

INSTANTIATE_TEST_SUITE_P(Qwen35Moe, GdnOracleLogits, testing::ValuesIn(gdn_cases()),
                         [](const testing::TestParamInfo<GdnCase>& info) {
                           std::string n =
                               info.param.logits.substr(0, info.param.logits.find(".f16"));
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace strata::test
