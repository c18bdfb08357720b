#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/dataset.h"

using namespace tcv;
using namespace tcv::data;

namespace {

// n images of 2 channels, 2x2, where every pixel of image i channel c is (i * 2 + c) % 256.
std::shared_ptr<ImageClassificationDataset> toy(int64_t n, int64_t classes = 10) {
  std::vector<uint8_t> px;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) px.push_back(static_cast<uint8_t>((i * 2 + c) % 256));
    y.push_back(i % classes);
  }
  return std::make_shared<ImageClassificationDataset>(from_vector(px, {n, 2, 2, 2}),
                                                      from_vector(y, {n}), classes, "toy");
}

}  // namespace

TEST(EpochSampler, DeterministicPerEpochAndDifferentAcrossEpochs) {
  EpochSampler a(1000, 7, true), b(1000, 7, true), other_seed(1000, 8, true);
  const auto e0 = a.indices(0), e1 = a.indices(1);
  EXPECT_EQ(e0, b.indices(0));  // same (seed, epoch), same order
  EXPECT_EQ(e1, b.indices(1));
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, other_seed.indices(0));
  // Order of calls does not matter.
  EXPECT_EQ(a.indices(0), e0);
  for (const auto& p : {e0, e1}) {
    auto s = p;
    std::sort(s.begin(), s.end());
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(s[i], i);
  }
  const auto seq = EpochSampler(5, 7, false).indices(3);
  EXPECT_EQ(seq, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DataLoader, BatchesCoverTheDatasetOnce) {
  for (int workers : {0, 3}) {
    auto ds = toy(103);
    DataLoader loader(ds, {.batch_size = 10,
                           .shuffle = true,
                           .drop_last = false,
                           .workers = workers,
                           .seed = 1,
                           .normalize = {1.0, {0.0}, {1.0}}});
    EXPECT_EQ(loader.num_batches(), 11);
    for (int64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      std::multiset<int64_t> seen;
      Batch b;
      int64_t batches = 0;
      std::vector<int64_t> first_ids;
      while (loader.next(b)) {
        ++batches;
        EXPECT_EQ(b.x.dtype(), DType::f32);
        EXPECT_EQ(b.y.dtype(), DType::i64);
        const int64_t n = b.x.size(0);
        EXPECT_EQ(n, batches == 11 ? 3 : 10);
        EXPECT_EQ(b.x.shape(), (Shape{n, 2, 2, 2}));
        const auto x = b.x.to_vector<float>();
        const auto y = b.y.to_vector<int64_t>();
        for (int64_t i = 0; i < n; ++i) {
          // Pixel value (channel 0) identifies the sample: id*2 mod 256; labels follow it.
          const int64_t v = static_cast<int64_t>(x[i * 8]);
          const int64_t id = v / 2;  // no wrap below 128 samples
          seen.insert(id);
          if (batches == 1) first_ids.push_back(id);
          EXPECT_EQ(y[i], id % 10);
          EXPECT_EQ(x[i * 8 + 4], static_cast<float>((id * 2 + 1) % 256));  // channel 1
        }
      }
      EXPECT_EQ(batches, 11);
      EXPECT_EQ(seen.size(), 103u);
      EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 103u);
      // The first batch is the sampler's first ten indices.
      const auto order = EpochSampler(103, 1, true).indices(epoch);
      EXPECT_EQ(first_ids, std::vector<int64_t>(order.begin(), order.begin() + 10));
      EXPECT_FALSE(loader.next(b));
    }
  }
}

TEST(DataLoader, DropLastAndSkip) {
  auto ds = toy(25);
  DataLoader loader(ds, {.batch_size = 10,
                         .shuffle = false,
                         .drop_last = true,
                         .workers = 2,
                         .seed = 0,
                         .normalize = {}});
  EXPECT_EQ(loader.num_batches(), 2);
  loader.start_epoch(0, 1);  // resume after the first batch
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.y.to_vector<int64_t>()[0], 10 % 10);
  EXPECT_NEAR(b.x.to_vector<float>()[0], 20 / 255.0, 1e-6);  // sample 10, channel 0
  EXPECT_FALSE(loader.next(b));
}

TEST(Dataset, NormalisesPerChannel) {
  auto ds = toy(4);
  const Normalize norm{255.0, {0.5, 0.25}, {0.5, 2.0}};
  const int64_t idx[2] = {3, 1};
  const Batch b = ds->get_batch(idx, 2, norm);
  const auto x = b.x.to_vector<float>();
  // sample 3: channel 0 pixel 6, channel 1 pixel 7.
  EXPECT_NEAR(x[0], (6 / 255.0 - 0.5) / 0.5, 1e-6);
  EXPECT_NEAR(x[4], (7 / 255.0 - 0.25) / 2.0, 1e-6);
  EXPECT_NEAR(x[8], (2 / 255.0 - 0.5) / 0.5, 1e-6);
  EXPECT_EQ(b.y.to_vector<int64_t>(), (std::vector<int64_t>{3, 1}));
  const Normalize bad{255.0, {0.1, 0.2, 0.3}, {1.0}};
  EXPECT_THROW(ds->get_batch(idx, 2, bad), Error);
}

TEST(Dataset, RejectsBadLabels) {
  std::vector<uint8_t> px(2 * 4, 0);
  EXPECT_THROW(ImageClassificationDataset(from_vector(px, {2, 2, 2}),
                                          from_vector(std::vector<int64_t>{0, 10}), 10),
               Error);
  EXPECT_THROW(ImageClassificationDataset(from_vector(px, {2, 2, 2}),
                                          from_vector(std::vector<int64_t>{0}), 10),
               Error);
}

TEST(Dataset, LoadsFashionMnistTestSplit) {
  const auto files = find_idx_files("/usr/share/datasets/fashion-mnist");
  const auto ds = ImageClassificationDataset::from_idx(files.test_images, files.test_labels, 10);
  EXPECT_EQ(ds.size(), 10000);
  EXPECT_EQ(ds.channels(), 1);
  EXPECT_EQ(ds.height(), 28);
  EXPECT_EQ(ds.width(), 28);
  EXPECT_EQ(ds.labels().to_vector<int64_t>()[0], 9);
  EXPECT_EQ(ds.head(100).size(), 100);
  EXPECT_THROW(find_idx_files("/nonexistent-dir"), Error);
}
