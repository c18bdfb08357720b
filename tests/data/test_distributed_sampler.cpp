#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "kernels/base.h"

using namespace tcv;
using namespace tcv::data;

namespace {

std::vector<DistributedSampler> ranks(int64_t n, int64_t world, uint64_t seed, bool drop_last,
                                      int64_t epoch) {
  std::vector<DistributedSampler> v;
  for (int64_t r = 0; r < world; ++r) {
    v.emplace_back(DistributedSamplerOptions{.size = n,
                                             .world_size = world,
                                             .rank = r,
                                             .seed = seed,
                                             .shuffle = true,
                                             .drop_last = drop_last});
    v.back().set_epoch(epoch);
  }
  return v;
}

}  // namespace

TEST(DistributedSampler, ShardsAreDisjointAndCoverWithPadding) {
  // n = 10, world = 4: 3 per rank, 12 in all, 2 padding entries repeating the start.
  const auto s = ranks(10, 4, 5, false, 2);
  const std::vector<int64_t> perm = EpochSampler(10, 5, true).indices(2);
  std::map<int64_t, int> count;
  for (const auto& r : s) {
    EXPECT_EQ(r.num_samples(), 3);
    EXPECT_EQ(r.total_size(), 12);
    EXPECT_EQ(r.padding(), 2);
    const auto idx = r.indices();
    ASSERT_EQ(idx.size(), 3u);
    for (int64_t i : idx) ++count[i];
  }
  // Every sample appears; exactly the first two of the permutation appear twice.
  ASSERT_EQ(count.size(), 10u);
  for (int64_t k = 0; k < 10; ++k) EXPECT_EQ(count[perm[k]], k < 2 ? 2 : 1) << "position " << k;
  // The global order is the permutation plus its first two entries.
  std::vector<int64_t> expect = perm;
  expect.push_back(perm[0]);
  expect.push_back(perm[1]);
  EXPECT_EQ(s[0].global_indices(), expect);
  // Rank r takes positions r, r + 4, r + 8.
  EXPECT_EQ(s[1].indices(), (std::vector<int64_t>{expect[1], expect[5], expect[9]}));
  EXPECT_EQ(s[3].indices(), (std::vector<int64_t>{expect[3], expect[7], expect[11]}));
}

TEST(DistributedSampler, PaddingRepeatsWhenDatasetSmallerThanWorld) {
  // n = 2, world = 5: the permutation is repeated to 5 entries (as PyTorch does).
  const auto s = ranks(2, 5, 0, false, 0);
  const auto perm = EpochSampler(2, 0, true).indices(0);
  EXPECT_EQ(s[0].padding(), 3);
  for (int64_t r = 0; r < 5; ++r) EXPECT_EQ(s[r].indices(), (std::vector<int64_t>{perm[r % 2]}));
}

TEST(DistributedSampler, DropLastTruncatesDisjointShards) {
  const auto s = ranks(10, 4, 5, true, 0);
  const auto perm = EpochSampler(10, 5, true).indices(0);
  std::vector<int64_t> all;
  for (const auto& r : s) {
    EXPECT_EQ(r.num_samples(), 2);
    EXPECT_EQ(r.padding(), 0);
    const auto idx = r.indices();
    all.insert(all.end(), idx.begin(), idx.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> first8(perm.begin(), perm.begin() + 8);
  std::sort(first8.begin(), first8.end());
  EXPECT_EQ(all, first8);  // disjoint: no repeats; the last 2 of the permutation dropped
}

TEST(DistributedSampler, IdenticalStepCountsPerRank) {
  for (int64_t n : {1, 7, 100, 101, 103}) {
    for (int64_t world : {1, 2, 3, 8}) {
      for (bool drop : {false, true}) {
        const auto s = ranks(n, world, 1, drop, 0);
        for (const auto& r : s) {
          EXPECT_EQ(static_cast<int64_t>(r.indices().size()), s[0].num_samples());
          EXPECT_EQ(r.num_batches(4), s[0].num_batches(4));
          EXPECT_EQ(r.num_batches(4, true), s[0].num_batches(4, true));
        }
        EXPECT_EQ(s[0].num_samples(), drop ? n / world : (n + world - 1) / world);
      }
    }
  }
  EXPECT_EQ(ranks(103, 3, 1, false, 0)[0].num_batches(5), 7);        // 35 samples
  EXPECT_EQ(ranks(103, 3, 1, false, 0)[0].num_batches(5, true), 7);  // 35 = 7 * 5
  EXPECT_EQ(ranks(103, 3, 1, true, 0)[0].num_batches(5), 7);         // 34 samples
  EXPECT_EQ(ranks(103, 3, 1, true, 0)[0].num_batches(5, true), 6);
}

TEST(DistributedSampler, WorldSizeOneIsThePlainPermutation) {
  for (int64_t epoch : {0, 1, 5}) {
    const auto s = ranks(97, 1, 42, false, epoch);
    EXPECT_EQ(s[0].indices(), EpochSampler(97, 42, true).indices(epoch));
    EXPECT_EQ(s[0].padding(), 0);
  }
  DistributedSampler seq({.size = 5, .world_size = 1, .rank = 0, .seed = 3, .shuffle = false});
  EXPECT_EQ(seq.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DistributedSampler, SamePermutationForEveryWorldSizeAndEpochsDiffer) {
  const auto one = ranks(60, 1, 9, false, 3)[0].global_indices();
  for (int64_t world : {2, 3, 4, 6})  // 60 divides by each: no padding
    EXPECT_EQ(ranks(60, world, 9, false, 3)[1].global_indices(), one);
  EXPECT_NE(ranks(60, 2, 9, false, 4)[0].indices(), ranks(60, 2, 9, false, 3)[0].indices());
  EXPECT_NE(ranks(60, 2, 8, false, 3)[0].indices(), ranks(60, 2, 9, false, 3)[0].indices());
  auto s = ranks(60, 2, 9, false, 0)[0];
  EXPECT_EQ(s.epoch(), 0);
  s.set_epoch(7);
  EXPECT_EQ(s.epoch(), 7);
  EXPECT_EQ(s.indices(), ranks(60, 2, 9, false, 7)[0].indices());
}

TEST(DistributedSampler, UnionOfIthBatchesIsIthGlobalBatch) {
  // 103 samples, 3 ranks, b = 4 per rank: global batch 12; 35 per rank, so 9 batches,
  // the last with 3 per rank = global positions [96, 105) (two of them padding).
  const int64_t n = 103, world = 3, b = 4;
  const auto s = ranks(n, world, 11, false, 1);
  const auto g = s[0].global_indices();
  const auto perm = EpochSampler(n, 11, true).indices(1);
  const int64_t batches = s[0].num_batches(b);
  ASSERT_EQ(batches, 9);
  for (int64_t i = 0; i < batches; ++i) {
    std::vector<int64_t> got;
    for (const auto& r : s) {
      const auto idx = r.indices();
      for (int64_t j = i * b; j < std::min((i + 1) * b, r.num_samples()); ++j) {
        got.push_back(idx[j]);
        EXPECT_EQ(idx[j], g[j * world + r.options().rank]);  // rank r's j-th = G[j world + r]
      }
    }
    const int64_t lo = i * b * world, hi = std::min((i + 1) * b * world, s[0].total_size());
    std::vector<int64_t> want(g.begin() + lo, g.begin() + hi);
    // Before the padded tail, the global batch is the single-process batch itself.
    if (hi <= n) {
      EXPECT_EQ(want, std::vector<int64_t>(perm.begin() + lo, perm.begin() + hi));
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "batch " << i;
  }
}

TEST(DistributedSampler, ResumeFromIteration) {
  const auto s = ranks(50, 2, 4, false, 3);
  for (const auto& r : s) {
    const auto full = r.indices();  // 25 per rank, batches of 4: 7 batches
    for (int64_t it : {0, 1, 6, 7}) {
      const auto rest = r.indices_from(it, 4);
      const int64_t skip = std::min<int64_t>(it * 4, 25);
      EXPECT_EQ(rest, std::vector<int64_t>(full.begin() + skip, full.end())) << "iteration " << it;
    }
    // A fresh sampler (as after a restart) resumes with the same samples.
    DistributedSampler fresh(r.options());
    fresh.set_epoch(3);
    EXPECT_EQ(fresh.indices_from(2, 4), r.indices_from(2, 4));
  }
  try {
    s[0].indices_from(8, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resume at iteration 8: an epoch has 7 batches"),
              std::string::npos)
        << e.what();
  }
}

TEST(DistributedSampler, RejectsBadOptions) {
  EXPECT_THROW(DistributedSampler({.size = 10, .world_size = 2, .rank = 2}), Error);
  EXPECT_THROW(DistributedSampler({.size = 10, .world_size = 0, .rank = 0}), Error);
  EXPECT_THROW(DistributedSampler({.size = -1, .world_size = 1, .rank = 0}), Error);
  DistributedSampler empty({.size = 0, .world_size = 3, .rank = 1});
  EXPECT_EQ(empty.num_samples(), 0);
  EXPECT_TRUE(empty.indices().empty());
}
