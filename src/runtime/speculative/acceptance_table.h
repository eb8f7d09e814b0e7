#pragma once
// How often drafts were kept, by how strongly each was backed (its evidence bucket), over every
// generation a scheduler ran: the prior a new generation's cost model starts from. Prompt-lookup
// drafts that copy after a long match (an edit re-emitting its file) are kept for 15 tokens and
// more nearly every time, while those after a two-token match are kept for a few tokens at best:
// a generation that starts knows this instead of learning it again from a guess of 1/2.
//
// Counts fade (each draft weighs kFade of what the one before it did), so the table follows
// what the server is asked now. Used on the scheduler thread only.

#include <array>
#include <cstddef>
#include <cstdint>

namespace strata {

class AcceptanceTable {
 public:
  // Bucket 0: drafts with no evidence measure; 1..7: prompt-lookup matches of <= 2, 3, 4-5,
  // 6-9, 10-19, 20-39 and 40 or more tokens.
  static constexpr int kBuckets = 8;
  static constexpr double kFade = 0.99;
  static int bucket_of(int64_t evidence);

  struct Counts {
    double kept = 0, rejections = 0;  // drafted tokens kept; drafts cut short
  };
  // A draft of bucket `bucket` had `kept` tokens kept and was (or was not) cut short.
  void record(int bucket, int64_t kept, bool rejected);
  const Counts& counts(int bucket) const { return counts_[static_cast<size_t>(bucket)]; }

 private:
  std::array<Counts, kBuckets> counts_{};
};

// One table per kind of drafter (their evidence means different things; a match in the prompt
// and one in another request's answer are kept at different rates).
struct AcceptanceTables {
  AcceptanceTable ngram, resume, history, mtp, draft_model;
};

}  // namespace strata
