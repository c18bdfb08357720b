// The loader every task shares (data/loader.h), on a toy data set whose
// batches record which samples they hold: the epoch's order and its reshuffle,
// shards across ranks, drop_last and the partial last batch, resuming
// mid-epoch, the same batches on any number of workers, per-sample random
// streams, skipped samples, pinning, and errors that come out of next() with
// the data set's or the transform's message and the sample's file.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/loader.h"
#include "support/gradcheck.h"

using namespace tcv;
using namespace tcv::data;

namespace {

struct ToySample {
  Tensor image;  // undefined when skipped
  int64_t index = -1;
  double draw = -1;  // what the transform drew, -1 without one
};

// n samples; `corrupt` ones are skipped, loading `broken` fails.
struct ToyDataset {
  int64_t n = 0;
  std::set<int64_t> corrupt;
  int64_t broken = -1;
  std::vector<std::string> files;
  mutable std::atomic<int64_t> skips{0};

  explicit ToyDataset(int64_t size, std::set<int64_t> bad = {}, int64_t fails = -1)
      : n(size), corrupt(std::move(bad)), broken(fails) {
    for (int64_t i = 0; i < n; ++i) files.push_back("toy/" + std::to_string(i) + ".jpg");
  }
  int64_t size() const { return n; }
  int64_t skipped() const { return skips; }
  std::string name() const { return "toy"; }
  const std::string& source(int64_t i) const { return files[static_cast<size_t>(i)]; }
  ToySample load(int64_t i) const {
    TCV_CHECK(i != broken, files[static_cast<size_t>(i)], ": cannot decode");
    ToySample s;
    s.index = i;
    if (corrupt.count(i))
      ++skips;
    else
      s.image = full({1}, static_cast<double>(i));
    return s;
  }
};

struct ToyBatch {
  std::vector<int64_t> indices;
  std::vector<double> draws;
  bool pinned = false;
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
  void pin_memory() { pinned = true; }
};

constexpr uint64_t kToyKey = 0x5DEECE66Dull;

// The batch of the samples as they come.
ToyBatch collate_toy(SampleSource<ToySample>& samples) {
  ToyBatch b;
  for (ToySample s; samples.next(s);) {
    b.indices.push_back(s.index);
    b.draws.push_back(s.draw);
  }
  return b;
}

class ToyLoader : public SampleLoader<ToyDataset, ToyBatch> {
 public:
  ToyLoader(std::shared_ptr<const ToyDataset> dataset, Transform transform, LoaderOptions opts)
      : SampleLoader(std::move(dataset), std::move(transform), std::move(opts),
                     {"ToyLoader", kToyKey, &collate_toy}) {}
};

void draw_one(ToySample& s, Rng& rng) {
  s.draw = rng.uniform();
}

std::vector<ToyBatch> epoch_of(ToyLoader& l, int64_t epoch, int64_t skip = 0) {
  l.start_epoch(epoch, skip);
  std::vector<ToyBatch> out;
  ToyBatch b;
  while (l.next(b)) out.push_back(b);
  return out;
}

std::vector<int64_t> indices_of(const std::vector<ToyBatch>& batches) {
  std::vector<int64_t> v;
  for (const ToyBatch& b : batches) v.insert(v.end(), b.indices.begin(), b.indices.end());
  return v;
}

}  // namespace

TEST(SampleLoader, InOrderWithoutShuffleAndThePartialLastBatch) {
  auto ds = std::make_shared<const ToyDataset>(10);
  ToyLoader l(ds, {}, {.batch_size = 4, .shuffle = false});
  EXPECT_EQ(l.num_batches(), 3);
  const auto batches = epoch_of(l, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].indices, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[1].indices, (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(batches[2].indices, (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(batches[0].draws, (std::vector<double>(4, -1.0)));  // no transform
  EXPECT_FALSE(batches[0].pinned);

  ToyLoader dropped(ds, {}, {.batch_size = 4, .shuffle = false, .drop_last = true});
  EXPECT_EQ(dropped.num_batches(), 2);
  EXPECT_EQ(indices_of(epoch_of(dropped, 0)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(SampleLoader, ShuffledEpochsFollowTheSamplerAndReshuffle) {
  auto ds = std::make_shared<const ToyDataset>(23);
  ToyLoader l(ds, {}, {.batch_size = 5, .seed = 9});
  const auto e0 = indices_of(epoch_of(l, 0)), e1 = indices_of(epoch_of(l, 1));
  EXPECT_EQ(e0, EpochSampler(23, 9, true).indices(0));
  EXPECT_EQ(e1, EpochSampler(23, 9, true).indices(1));
  EXPECT_NE(e0, e1);
  EXPECT_EQ(indices_of(epoch_of(l, 0)), e0);  // an epoch's order depends on (seed, epoch) only
  std::vector<int64_t> sorted = e1;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 23; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  // Resuming at batch 2 gives the rest of the same epoch.
  const auto rest = indices_of(epoch_of(l, 1, 2));
  EXPECT_EQ(rest, std::vector<int64_t>(e1.begin() + 10, e1.end()));
}

TEST(SampleLoader, RanksShareAnEpochAsTheDistributedSamplerSays) {
  auto ds = std::make_shared<const ToyDataset>(10);
  std::multiset<int64_t> seen;
  for (int64_t rank = 0; rank < 3; ++rank) {
    ToyLoader l(ds, {}, {.batch_size = 3, .seed = 4, .world_size = 3, .rank = rank});
    EXPECT_EQ(l.num_batches(), 2);  // ceil(10 / 3) = 4 samples each, padded
    const auto mine = indices_of(epoch_of(l, 2));
    DistributedSampler s({10, 3, rank, 4, true});
    s.set_epoch(2);
    EXPECT_EQ(mine, s.indices()) << "rank " << rank;
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(seen.size(), 12u);  // two samples twice, to pad the last rank
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), 1u) << i;
}

TEST(SampleLoader, SampleStreamsAndWorkersDoNotChangeTheBatches) {
  auto ds = std::make_shared<const ToyDataset>(17);
  auto run = [&](int workers, int prefetch) {
    ToyLoader l(ds, draw_one,
                {.batch_size = 4, .workers = workers, .seed = 6, .prefetch = prefetch});
    return epoch_of(l, 3);
  };
  const auto a = run(0, 2), b = run(3, 1), c = run(2, 4);
  ASSERT_EQ(a.size(), 5u);
  for (const auto* other : {&b, &c}) {
    ASSERT_EQ(other->size(), a.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ((*other)[k].indices, a[k].indices);
      EXPECT_EQ((*other)[k].draws, a[k].draws);
    }
  }
  // Sample j of epoch e draws from Rng(seed ^ key, e * size + j).
  const SampleStreams streams(6, kToyKey, 17);
  for (const ToyBatch& batch : a)
    for (size_t i = 0; i < batch.indices.size(); ++i) {
      Rng want(6 ^ kToyKey, 3 * 17 + static_cast<uint64_t>(batch.indices[i]));
      Rng got = streams(3, batch.indices[i]);
      const double w = want.uniform();
      EXPECT_EQ(got.uniform(), w);
      EXPECT_EQ(batch.draws[i], w);
    }
}

TEST(SampleLoader, SkippedSamplesAreLeftOutAndBatchesPinned) {
  auto ds = std::make_shared<const ToyDataset>(8, std::set<int64_t>{1, 6});
  ToyLoader l(ds, draw_one, {.batch_size = 4, .shuffle = false, .pin_memory = true});
  const auto batches = epoch_of(l, 0);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].indices, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(batches[1].indices, (std::vector<int64_t>{4, 5, 7}));
  EXPECT_TRUE(batches[0].pinned && batches[1].pinned);
  EXPECT_EQ(l.skipped(), 2);
  // collate() is what a worker makes, before pinning.
  const int64_t idx[] = {6, 7};
  const ToyBatch one = l.collate(idx, 2, 0);
  EXPECT_EQ(one.indices, (std::vector<int64_t>{7}));
  EXPECT_FALSE(one.pinned);
}

TEST(SampleLoader, ErrorsComeOutOfNextWithTheSamplesFile) {
  for (int workers : {0, 2}) {
    // The data set's own error, as it said it.
    auto broken = std::make_shared<const ToyDataset>(9, std::set<int64_t>{}, 5);
    ToyLoader l(broken, {}, {.batch_size = 2, .shuffle = false, .workers = workers});
    l.start_epoch(0);
    ToyBatch b;
    int64_t good = 0;
    std::string msg;
    try {
      while (l.next(b)) good += b.size();
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("toy/5.jpg: cannot decode"), std::string::npos) << msg;
    EXPECT_LE(good, 4) << "workers " << workers;
    // A transform's error, named with the sample's file.
    auto ds = std::make_shared<const ToyDataset>(4);
    ToyLoader t(
        ds, [](ToySample& s, Rng&) { TCV_CHECK(s.index != 2, "[toy_warp] singular at ", s.index); },
        {.batch_size = 4, .shuffle = false, .workers = workers});
    t.start_epoch(0);
    const std::string what = tcv::testing::error_of([&] { t.next(b); });
    EXPECT_NE(what.find("toy/2.jpg: [toy_warp] singular at 2"), std::string::npos) << what;
  }
}

TEST(SampleLoader, BadOptionsNameTheLoader) {
  auto ds = std::make_shared<const ToyDataset>(4);
  EXPECT_NE(tcv::testing::error_of([&] {
              ToyLoader l(ds, {}, {.batch_size = 0});
            }).find("[ToyLoader] batch_size must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              ToyLoader l(ds, {}, {.workers = -1});
            }).find("[ToyLoader] workers must be >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([&] {
              ToyLoader l(ds, {}, {.prefetch = 0});
            }).find("[ToyLoader] prefetch must be >= 1, got 0"),
            std::string::npos);
}

// The classification path: a BatchLoader around a whole-batch hook.
namespace {

struct HookBatch {
  std::vector<int64_t> v;
  void pin_memory() { v.push_back(-1); }
};

}  // namespace

TEST(BatchLoader, AroundAnyHook) {
  BatchLoader<HookBatch> l(7, {.batch_size = 3, .shuffle = false, .workers = 2, .pin_memory = true},
                           "HookLoader", [](const int64_t* indices, int64_t n, int64_t epoch) {
                             HookBatch b{{indices, indices + n}};
                             b.v.push_back(100 * epoch);
                             return b;
                           });
  EXPECT_EQ(l.num_batches(), 3);
  EXPECT_EQ(l.size(), 7);
  l.start_epoch(2);
  std::vector<std::vector<int64_t>> got;
  for (HookBatch b; l.next(b);) got.push_back(b.v);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (std::vector<int64_t>{0, 1, 2, 200, -1}));
  EXPECT_EQ(got[2], (std::vector<int64_t>{6, 200, -1}));
  const int64_t idx[] = {4};
  EXPECT_EQ(l.collate(idx, 1, 5).v, (std::vector<int64_t>{4, 500}));  // unpinned
}

TEST(BatchLoader, PixelAffineOfNormalize) {
  const auto a = pixel_affine({.div_value = 255.0, .mean = {0.5}, .std = {0.25}}, 2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_FLOAT_EQ(a[1].first, static_cast<float>(1.0 / (255.0 * 0.25)));
  EXPECT_FLOAT_EQ(a[1].second, -2.0f);
  EXPECT_NE(tcv::testing::error_of([] {
              pixel_affine({.mean = {1, 2}}, 3);
            }).find("normalize.mean has 2 values for 3 channels (give 1 or 3)"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([] {
              pixel_affine({.std = {1, 0}}, 2);
            }).find("normalize.std of channel 1 is zero"),
            std::string::npos);
}
