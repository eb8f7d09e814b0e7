// The pieces of a distributed run that need no MPI job: messages, the ranks' KV stores, the
// start-up identity check. (Whole runs under mpirun: tests/distributed/run_distributed.sh.)
#include "backend/mpi/step_message.h"

#include <gtest/gtest.h>

#include "backend/mpi/rank_identity.h"
#include "backend/mpi/rank_kv.h"
#include "backend/mpi/wire.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::mpi {
namespace {

TEST(StepMessage, ACommandReadsBackAsItWasWritten) {
  StepCommand step;
  step.tokens = {5, 6, 7};
  step.sequence = {0, 1, 1};
  step.position = {9, 0, 1};
  step.groups = {0, 1, 3};
  step.has_kv = step.has_state = step.count_experts = true;
  step.sequences.resize(2);
  step.sequences[0].kv = {0x1234, GgmlType::Q8_0, 68, 16, 32, {3, 1}};
  step.sequences[0].state_key = 77;
  step.sequences[0].state_header = 9;
  step.sequences[1].kv = {0x1234, GgmlType::Q8_0, 68, 16, 16, {2}};
  step.sequences[1].state_part = {1.5f, -2.f};
  WireWriter w;
  write_step(w, step);
  WireReader r(w.bytes());
  const StepCommand back = read_step(r);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(back.tokens, step.tokens);
  EXPECT_EQ(back.sequence, step.sequence);
  EXPECT_EQ(back.position, step.position);
  EXPECT_EQ(back.groups, step.groups);
  EXPECT_TRUE(back.has_kv && back.has_state && back.count_experts);
  ASSERT_EQ(back.sequences.size(), 2u);
  EXPECT_EQ(back.sequences[0].kv.key, 0x1234u);
  EXPECT_EQ(back.sequences[0].kv.type, GgmlType::Q8_0);
  EXPECT_EQ(back.sequences[0].kv.pages, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(back.sequences[0].state_header, 9.f);
  EXPECT_TRUE(back.sequences[0].state_part.empty());
  EXPECT_EQ(back.sequences[1].state_part, (std::vector<float>{1.5f, -2.f}));
}

TEST(StepMessage, ACutMessageIsAnErrorNotAReadPastItsEnd) {
  StepCommand step;
  step.tokens = step.sequence = {1, 2};
  step.position = {0, 1};
  step.groups = {0, 2};
  WireWriter w;
  write_step(w, step);
  for (size_t cut : {size_t{0}, size_t{4}, w.bytes().size() / 2, w.bytes().size() - 1}) {
    WireReader r(std::span<const uint8_t>(w.bytes().data(), cut));
    EXPECT_THROW(read_step(r), Error) << cut;
  }
  HiddenStates h;
  h.error = "rank 2 (host b): out of memory";
  h.x = {1, 2, 3};
  WireWriter hw;
  h.write(hw);
  WireReader hr(hw.bytes());
  const HiddenStates back = HiddenStates::read(hr);
  EXPECT_EQ(back.error, h.error);
  EXPECT_EQ(back.x, h.x);
}

// The rank's store puts each slot where rank 0's page table says, keeps written slots when it
// grows, and copies slots as rank 0's pool does.
TEST(RankKvStores, SlotsFollowRankZerosPagesAndSurviveGrowth) {
  const int64_t heads = 2, head_dim = 4, row = head_dim * 2;  // F16 rows
  RankKvStores stores({false, true, true}, heads, head_dim);
  KvDescription kv{42, GgmlType::F16, row, 4, 8, {1, 0}};
  std::vector<ops::KvLayerView> views = stores.views(kv, 3);
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[0].k, nullptr);  // a layer kept by another rank
  ASSERT_NE(views[1].k, nullptr);
  EXPECT_EQ(views[1].slot(2), 6);  // position 2 lies in page 1
  EXPECT_EQ(views[1].slot(5), 1);  // position 5 in page 0
  views[1].k_row(2, 1)[0] = 0xAB;
  views[2].v_row(5, 0)[3] = 0xCD;
  // A longer page table reaching page 9: the store grows, the rows written stay.
  KvDescription longer{42, GgmlType::F16, row, 4, 12, {1, 0, 9}};
  views = stores.views(longer, 11);
  EXPECT_EQ(views[1].k_row(2, 1)[0], 0xAB);
  EXPECT_EQ(views[2].v_row(5, 0)[3], 0xCD);
  EXPECT_GE(stores.bytes(), static_cast<uint64_t>(2 * 2 * 40 * heads * row));
  // Rank 0 made page 1 (slots 4..7) private into page 9 (slots 36..39).
  stores.copy_slots(42, 4, 36, 4);
  views = stores.views(longer, 11);
  EXPECT_EQ(views[1].k[(38 * heads + 1) * row], 0xAB);  // slot 38 = slot 6's copy
  // Another cache at another address is another store.
  KvDescription other{43, GgmlType::F16, row, 0, 16, {}};
  views = stores.views(other, 2);
  EXPECT_EQ(views[1].slot(2), 2);
  EXPECT_NE(views[1].k_row(2, 1)[0], 0xAB);
}

TEST(RankIdentity, AnotherFileOrBuildIsRefusedNamingBoth) {
  const GgufFile file =
      GgufFile::open((test::test_data_dir() / "tiny-qwen3moe-Q4_K_M.gguf").string());
  const RankIdentity a = identify(file, "host-a", 2);
  RankIdentity b = identify(file, "host-b", 4);
  EXPECT_EQ(identity_mismatch(a, b, 1), "");
  WireWriter w;
  b.write(w);
  WireReader r(w.bytes());
  const RankIdentity read = RankIdentity::read(r);
  EXPECT_EQ(read.host, "host-b");
  EXPECT_EQ(read.fingerprint, a.fingerprint);

  const GgufFile other =
      GgufFile::open((test::test_data_dir() / "strata-coder-tiny-Q4_0.gguf").string());
  b = identify(other, "host-b", 4);
  const std::string file_error = identity_mismatch(a, b, 1);
  EXPECT_NE(file_error.find("rank 1 (host host-b) has another model file"), std::string::npos)
      << file_error;
  EXPECT_NE(file_error.find("rank 0 (host host-a"), std::string::npos) << file_error;
  b = a;
  b.build = "strata 0.0.9";
  EXPECT_NE(identity_mismatch(a, b, 2).find("rank 2 runs another strata build"), std::string::npos);
  b = a;
  b.protocol = kProtocolVersion + 1;
  EXPECT_NE(identity_mismatch(a, b, 2).find("protocol"), std::string::npos);
}

}  // namespace
}  // namespace strata::mpi

namespace strata::mpi {
namespace {

TEST(MicroBatches, CutOnlyBetweenSequencesAsEvenlyAsThatAllows) {
  using Rows = std::vector<int32_t>;
  using Cuts = std::vector<int64_t>;
  EXPECT_EQ(micro_batches(Rows{0, 0, 0, 0}, 3), (Cuts{0, 4}));  // one sequence: one batch
  EXPECT_EQ(micro_batches(Rows{0, 1, 2, 3}, 2), (Cuts{0, 2, 4}));
  EXPECT_EQ(micro_batches(Rows{0, 1, 2, 3}, 4), (Cuts{0, 1, 2, 3, 4}));
  EXPECT_EQ(micro_batches(Rows{0, 1}, 3), (Cuts{0, 1, 2}));  // fewer sequences than ranks
  // A long prompt chunk beside two decode rows: the cut falls where the prompt ends.
  EXPECT_EQ(micro_batches(Rows{2, 2, 2, 2, 2, 2, 0, 1}, 2), (Cuts{0, 6, 8}));
  EXPECT_EQ(micro_batches(Rows{0, 1, 2, 2, 2, 2, 2, 2}, 2), (Cuts{0, 2, 8}));
  EXPECT_EQ(micro_batches(Rows{0, 0, 1, 1, 2, 2}, 3), (Cuts{0, 2, 4, 6}));
  EXPECT_EQ(micro_batches(Rows{}, 2), (Cuts{0, 0}));
  EXPECT_EQ(micro_batches(Rows{5, 5, 7}, 1), (Cuts{0, 3}));
}

TEST(MicroBatches, AGroupIsABatchOfItsRows) {
  StepCommand step;
  step.tokens = {10, 11, 12, 13};
  step.sequence = {0, 0, 1, 1};
  step.position = {4, 5, 0, 1};
  float a = 0, b = 0;
  std::vector<float*> states{&a, &b};
  const ForwardBatch batch = group_batch(step, 2, 4, states);
  EXPECT_EQ(std::vector<int32_t>(batch.tokens.begin(), batch.tokens.end()),
            (std::vector<int32_t>{12, 13}));
  EXPECT_EQ(batch.sequences[0], 1);
  EXPECT_EQ(batch.positions[1], 1);
  EXPECT_EQ(batch.recurrent.size(), 2u);
  EXPECT_TRUE(batch.logit_rows.empty());
}

}  // namespace
}  // namespace strata::mpi
