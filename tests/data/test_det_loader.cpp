// Detection batches: layout (images stacked, per-image object tensors in
// normalised coordinates), the same batches on any number of workers, shards
// of a distributed sampler, corrupt images left out and counted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "data/det/loader.h"
#include "data/det/transforms.h"
#include "data/det/voc.h"
#include "data/image.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

// A VOC root with n images of sizes (40 + 4i) x (30 + 2i), image i filled with
// grey level 10 i and holding i % 3 objects of class "cat" (difficult when the
// object index is 1) at xmin = 2 + k.
std::string make_tree(const tcv::testing::TempDir& tmp, int n) {
  const std::string root = tmp.path("VOC");
  fs::create_directories(root + "/Annotations");
  fs::create_directories(root + "/JPEGImages");
  fs::create_directories(root + "/ImageSets/Main");
  std::ofstream list(root + "/ImageSets/Main/val.txt");
  for (int i = 0; i < n; ++i) {
    const std::string id = "im" + std::to_string(i);
    VocAnnotation a;
    a.width = 40 + 4 * i;
    a.height = 30 + 2 * i;
    for (int k = 0; k < i % 3; ++k) {
      VocObject o;
      o.name = "cat";
      o.difficult = k == 1;
      o.xmin = 2 + k;
      o.ymin = 3;
      o.xmax = 20;
      o.ymax = 25;
      a.objects.push_back(o);
    }
    std::ofstream(root + "/Annotations/" + id + ".xml") << format_voc_annotation(a);
    write_image(root + "/JPEGImages/" + id + ".png",
                full({3, a.height, a.width}, 10.0 * i, {.dtype = DType::u8}));
    fs::rename(root + "/JPEGImages/" + id + ".png", root + "/JPEGImages/" + id + ".jpg");
    list << id << "\n";
  }
  return root;
}

}  // namespace

TEST(DetLoader, BatchLayoutAndNormalisedBoxes) {
  tcv::testing::TempDir tmp("detload");
  const std::string root = make_tree(tmp, 7);
  auto ds = std::make_shared<const DetDataset>(read_voc({.roots = {root}, .split = "val"}));
  DetDataLoader loader(ds, det_eval_transform(32),
                       {.batch_size = 3,
                        .shuffle = false,
                        .normalize = {.div_value = 1.0, .mean = {5.0, 0.0, 0.0}, .std = {2.0}}});
  EXPECT_EQ(loader.num_batches(), 3);
  loader.start_epoch(0);
  DetBatch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.images.shape(), (Shape{3, 3, 32, 32}));
  EXPECT_EQ(b.size(), 3);
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(b.image_ids, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(b.sizes[2], (std::array<int64_t, 2>{34, 48}));
  // Image 2 is grey 20: channel 0 (20 - 5) / 2, channels 1 and 2 20 / 2.
  const float* x = b.images.data<float>();
  EXPECT_EQ(x[2 * 3 * 1024], 7.5f);
  EXPECT_EQ(x[2 * 3 * 1024 + 1024], 10.0f);
  ASSERT_EQ(b.boxes[0].shape(), (Shape{0, 4}));
  ASSERT_EQ(b.boxes[2].shape(), (Shape{2, 4}));
  // Image 2 (48x34): its second box [2, 2, 20, 25] in pixels, as fractions.
  const auto bx = b.boxes[2].to_vector<float>();
  EXPECT_FLOAT_EQ(bx[4], 2.0f / 48);
  EXPECT_FLOAT_EQ(bx[5], 2.0f / 34);
  EXPECT_FLOAT_EQ(bx[6], 20.0f / 48);
  EXPECT_FLOAT_EQ(bx[7], 25.0f / 34);
  EXPECT_EQ(b.labels[2].to_vector<int64_t>(), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(b.labels[2].dtype(), DType::i64);
  EXPECT_EQ(b.difficult[2].to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(b.iscrowd[2].to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0}));
  int64_t images = 3;
  while (loader.next(b)) images += b.size();
  EXPECT_EQ(images, 7);
}

TEST(DetLoader, WorkersGiveTheSameBatchesAndShardsCoverTheSet) {
  tcv::testing::TempDir tmp("detload2");
  const std::string root = make_tree(tmp, 11);
  auto ds = std::make_shared<const DetDataset>(read_voc({.roots = {root}, .split = "val"}));
  const DetTransform aug = ssd_train_transform({.size = 24, .keep_difficult = true});
  auto run = [&](int workers, int64_t world, int64_t rank) {
    DetDataLoader l(ds, aug,
                    {.batch_size = 4,
                     .shuffle = true,
                     .workers = workers,
                     .seed = 3,
                     .world_size = world,
                     .rank = rank});
    std::vector<DetBatch> out;
    l.start_epoch(2);
    DetBatch b;
    while (l.next(b)) out.push_back(b);
    return out;
  };
  const auto a = run(0, 1, 0), c = run(3, 1, 0);
  ASSERT_EQ(a.size(), c.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].indices, c[i].indices);
    EXPECT_EQ(a[i].images.to_vector<float>(), c[i].images.to_vector<float>());
    for (int64_t k = 0; k < a[i].size(); ++k)
      EXPECT_EQ(a[i].boxes[k].to_vector<float>(), c[i].boxes[k].to_vector<float>());
  }
  std::multiset<int64_t> seen;
  for (int64_t r = 0; r < 2; ++r)
    for (const DetBatch& b : run(1, 2, r)) seen.insert(b.indices.begin(), b.indices.end());
  for (int64_t i = 0; i < 11; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  EXPECT_EQ(seen.size(), 12u);  // padded to an even share
}

TEST(DetLoader, CorruptImagesAreLeftOutOrFail) {
  tcv::testing::TempDir tmp("detload3");
  const std::string root = make_tree(tmp, 5);
  std::ofstream(root + "/JPEGImages/im3.jpg") << "not an image";
  auto skip = std::make_shared<const DetDataset>(
      read_voc({.roots = {root}, .split = "val", .on_corrupt = OnCorrupt::skip}));
  DetDataLoader l(skip, det_eval_transform(16), {.batch_size = 5, .shuffle = false});
  l.start_epoch(0);
  DetBatch b;
  ASSERT_TRUE(l.next(b));
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 2, 4}));
  EXPECT_EQ(b.images.size(0), 4);
  EXPECT_EQ(l.skipped(), 1);
  auto strict = std::make_shared<const DetDataset>(read_voc({.roots = {root}, .split = "val"}));
  DetDataLoader s(strict, det_eval_transform(16),
                  {.batch_size = 5, .shuffle = false, .workers = 2});
  s.start_epoch(0);
  EXPECT_NE(tcv::testing::error_of([&] { s.next(b); }).find("im3.jpg"), std::string::npos);
  // Images of different sizes cannot share a batch.
  DetDataLoader raw(strict, {}, {.batch_size = 2, .shuffle = false});
  raw.start_epoch(0);
  EXPECT_NE(tcv::testing::error_of([&] { raw.next(b); }).find("resize every image to one size"),
            std::string::npos);
}
