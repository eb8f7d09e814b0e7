#include "plan/pipeline_split.h"

#include <gtest/gtest.h>

#include <vector>

#include "util/error.h"

namespace strata::plan {
namespace {

TEST(PipelineSplit, EqualCapacitiesGetEqualShares) {
  const std::vector<uint64_t> layers(48, 100);
  const auto ranges = split_layers(layers, 0, std::vector<double>{1, 1});
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].last, 24);
  EXPECT_EQ(ranges[1].first, 24);
  EXPECT_EQ(ranges[1].last, 48);
}

TEST(PipelineSplit, RankZeroCountsTheHeadAndSharesFollowCapacity) {
  const std::vector<uint64_t> layers(40, 100);
  // Rank 0 holds 400 bytes of embeddings and head: 4 layers' worth fewer layers on it.
  auto ranges = split_layers(layers, 400, std::vector<double>{1, 1});
  EXPECT_EQ(ranges[0].size(), 18);
  EXPECT_EQ(ranges[1].size(), 22);
  // A host with three times the RAM takes three quarters of the weights.
  ranges = split_layers(layers, 0, std::vector<double>{1, 3});
  EXPECT_EQ(ranges[0].size(), 10);
  EXPECT_EQ(ranges[1].size(), 30);
}

TEST(PipelineSplit, EveryRankGetsALayerAndTheRangesCoverTheModel) {
  const std::vector<uint64_t> layers{1000, 1, 1, 1, 1};
  for (int ranks = 1; ranks <= 5; ++ranks) {
    const auto ranges = split_layers(layers, 0, std::vector<double>(static_cast<size_t>(ranks), 1));
    ASSERT_EQ(static_cast<int>(ranges.size()), ranks);
    int64_t next = 0;
    for (const LayerRange& r : ranges) {
      EXPECT_EQ(r.first, next);
      EXPECT_GE(r.size(), 1);
      next = r.last;
    }
    EXPECT_EQ(next, 5);
  }
}

TEST(PipelineSplit, RefusesMoreRanksThanLayers) {
  const std::vector<uint64_t> layers(2, 100);
  try {
    split_layers(layers, 0, std::vector<double>{1, 1, 1});
    FAIL() << "3 ranks for 2 layers were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 ranks for a model of 2 layers"), std::string::npos)
        << e.what();
  }
}

TEST(PipelineSplit, ParsesTheUsersSplitAndNamesWhatIsWrong) {
  const auto ranges = parse_layer_split("3,5", 8, 2);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].last, 3);
  EXPECT_EQ(ranges[1].first, 3);
  EXPECT_EQ(ranges[1].last, 8);
  auto message = [](const std::string& text, int64_t layers, int64_t ranks) {
    try {
      parse_layer_split(text, layers, ranks);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("3,4", 8, 2).find("add up to 7, the model has 8 layers"), std::string::npos);
  EXPECT_NE(message("8", 8, 2).find("1 counts for 2 ranks"), std::string::npos);
  EXPECT_NE(message("0,8", 8, 2).find("'0' is not a positive layer count"), std::string::npos);
  EXPECT_NE(message("4,x", 8, 2).find("'x'"), std::string::npos);
  EXPECT_NE(message("4,4a", 8, 2).find("'4a'"), std::string::npos);
}

TEST(PipelineSplit, RangeBytesAddTheLayersOfTheRange) {
  const std::vector<uint64_t> layers{1, 2, 4, 8};
  EXPECT_EQ(range_bytes(layers, {1, 3}), 6u);
  EXPECT_EQ(range_bytes(layers, {0, 4}), 15u);
}

}  // namespace
}  // namespace strata::plan

#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace strata::plan {
namespace {

// Each rank reads the header and exactly the tensors it holds; rank 0 those outside the others'
// layers.
TEST(PipelineSplit, EachRankReadsTheHeaderAndItsOwnTensors) {
  const GgufFile file =
      GgufFile::open((test::test_data_dir() / "tiny-qwen35moe-mtp-Q8_0.gguf").string());
  const std::vector<LayerRange> ranges{{0, 1}, {1, 3}, {3, 4}};
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<ByteRange> read = rank_byte_ranges(file, ranges, rank);
    ASSERT_FALSE(read.empty());
    EXPECT_EQ(read[0].offset, 0u);
    EXPECT_GE(read[0].size, file.data_offset());
    auto covered = [&](uint64_t offset, uint64_t size) {
      for (const ByteRange& r : read)
        if (offset >= r.offset && offset + size <= r.offset + r.size) return true;
      return false;
    };
    int held = 0;
    for (const GgufTensorInfo& t : file.tensors()) {
      const auto offset = static_cast<uint64_t>(t.data.data() - file.bytes().data());
      const bool holds = rank_holds_tensor(t.name, ranges, rank);
      held += holds;
      if (holds) {
        EXPECT_TRUE(covered(offset, t.data.size())) << rank << " " << t.name;
      } else if (t.name.rfind("blk.", 0) == 0) {
        EXPECT_FALSE(covered(offset, t.data.size())) << rank << " " << t.name;
      }
    }
    EXPECT_GT(held, 0) << rank;
  }
  EXPECT_TRUE(rank_holds_tensor("token_embd.weight", ranges, 0));
  EXPECT_FALSE(rank_holds_tensor("token_embd.weight", ranges, 1));
  EXPECT_TRUE(rank_holds_tensor("blk.2.attn_norm.weight", ranges, 1));
  EXPECT_TRUE(rank_holds_tensor("blk.4.nextn.eh_proj.weight", ranges, 0));  // the MTP block
}

}  // namespace
}  // namespace strata::plan
