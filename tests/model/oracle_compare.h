#pragma once
// Teacher-forced comparison of strata's logits with an oracle ORCL file.

#include <ostream>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/logits_file.h"

namespace strata::test {

struct LogitsComparison {
  double nmse = 0;            // over all rows: sum (a - b)^2 / sum b^2
  double first_row_nmse = 0;  // the first token: attention is trivial, everything else is not
  double worst_row_nmse = 0;
  int rows_over_1e2 = 0;      // rows with NMSE > 1e-2 (a router near-tie flipped an expert)
  double nmse_unflipped = 0;  // over the rows with NMSE <= 1e-2 only
  double max_abs_error = 0;
  int rows = 0;
  int clear_rows = 0;    // rows whose reference top-2 margin is clear
  int argmax_agree = 0;  // of the clear rows, how many pick the same token
};

LogitsComparison compare_logits(const LogitsFile& reference, const std::vector<float>& ours);

// Runs `model_path` teacher-forced on the reference's tokens exactly as the reference did
// (one batched prefill of the prompt, then one-token decode steps) and returns all rows.
std::vector<float> teacher_forced_logits(const std::string& model_path, const LogitsFile& reference,
                                         const std::string& kv_type, int threads);
// The same with a model already loaded (e.g. on a GPU).
std::vector<float> teacher_forced_logits(Model& model, const LogitsFile& reference,
                                         const std::string& kv_type, int threads);

// The Gated DeltaNet oracle files (../shared/oracle/gdn): each model with each prompt length.
struct GdnCase {
  std::string model;   // gdn/models/<model>
  std::string logits;  // gdn/logits/<file>
};
std::vector<GdnCase> gdn_cases();
// Short names in test listings (the default prints the struct's bytes).
void PrintTo(const GdnCase& c, std::ostream* os);

// The architecture oracle files (../shared/oracle/archs): every logits file and its model.
struct ArchCase {
  std::string model;   // archs/models/<model>
  std::string logits;  // archs/logits/<file>
};
std::vector<ArchCase> arch_cases();
void PrintTo(const ArchCase& c, std::ostream* os);
// A test name from the logits file name: "tiny-gpt-oss-Q8_0.p24.f16kv.orcl" ->
// tiny_gpt_oss_Q8_0_p24.
std::string arch_case_name(const ArchCase& c);

}  // namespace strata::test
