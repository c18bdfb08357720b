// Segmentation batches: f32 images and i64 label maps that still agree pixel
// for pixel after augmentation, normalisation and collation; padding of
// batches of unequal images; the same batches on any number of workers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/image.h"
#include "data/seg/colorize.h"
#include "data/seg/loader.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

constexpr uint8_t kReal = 200, kPad = 7;

int coord_label(int r, int g) {
  const int v = (7 * r + 3 * g) % 20;
  return v == 19 ? 255 : v;
}

// Blocks of 8 x 8 pixels coloured (30 by, 30 bx, 200), labelled block_label(by, bx).
int block_label(int by, int bx) {
  return (by * 8 + bx) % 19;
}

enum class Pattern { coords, blocks };

// A VOC-layout tree with PNG images: image k is sizes[k]; with Pattern::coords
// pixel (y, x) is (y + k, x, 200), labelled coord_label(y + k, x).
const std::vector<std::array<int64_t, 2>> kSizes{{30, 40}, {24, 36}, {40, 50}, {20, 30}, {30, 40}};

std::string make_tree(const tcv::testing::TempDir& tmp, Pattern pattern = Pattern::coords) {
  const std::string root = tmp.path("voc");
  fs::create_directories(root + "/JPEGImages");
  fs::create_directories(root + "/SegmentationClass");
  fs::create_directories(root + "/ImageSets/Segmentation");
  std::ofstream list(root + "/ImageSets/Segmentation/train.txt");
  for (size_t k = 0; k < kSizes.size(); ++k) {
    const auto [H, W] = kSizes[k];
    Tensor img = empty({3, H, W}, {.dtype = DType::u8});
    Tensor lab = empty({H, W}, {.dtype = DType::u8});
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const bool blocks = pattern == Pattern::blocks;
        const int by = int(y) / 8, bx = int(x) / 8;
        img.data<uint8_t>()[y * W + x] = static_cast<uint8_t>(blocks ? 30 * by : y + int64_t(k));
        img.data<uint8_t>()[H * W + y * W + x] = static_cast<uint8_t>(blocks ? 30 * bx : x);
        img.data<uint8_t>()[2 * H * W + y * W + x] = kReal;
        lab.data<uint8_t>()[y * W + x] =
            static_cast<uint8_t>(blocks ? block_label(by, bx) : coord_label(int(y + k), int(x)));
      }
    const std::string id = "img" + std::to_string(k);
    write_image(root + "/JPEGImages/" + id + ".png", img);
    write_label_png(root + "/SegmentationClass/" + id + ".png", lab);
    list << id << "\n";
  }
  return root;
}

std::shared_ptr<const SegDataset> dataset(const std::string& root,
                                          OnCorrupt on_corrupt = OnCorrupt::error,
                                          GroundTruth gt = GroundTruth::read) {
  return std::make_shared<const SegDataset>(read_voc_seg(
      {.root = root, .image_ext = ".png", .read = {.ground_truth = gt, .on_corrupt = on_corrupt}}));
}

const Normalize kNorm{.div_value = 255.0, .mean = {0.5}, .std = {0.25}};

// The u8 pixel behind a normalised value.
int pixel_of(float v) {
  return static_cast<int>(std::lround((double(v) * 0.25 + 0.5) * 255.0));
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.dtype() == DType::f32 ? a.to_vector<float>() == b.to_vector<float>()
                                  : a.to_vector<int64_t>() == b.to_vector<int64_t>());
}

std::vector<SegBatch> epoch(SegDataLoader& loader, int64_t e) {
  loader.start_epoch(e);
  std::vector<SegBatch> out;
  SegBatch b;
  while (loader.next(b)) out.push_back(b);
  return out;
}

}  // namespace

TEST(SegLoader, TrainBatchesKeepLabelsOnTheirPixels) {
  // Scaled, cropped, flipped, normalised and collated: wherever a pixel of the
  // batch shows one block's colour it carries that block's label, and padding 255.
  tcv::testing::TempDir tmp("seg_loader");
  const auto ds = dataset(make_tree(tmp, Pattern::blocks));
  const SegTransform t = seg_train_transform({.scale_ratio = {0.5, 1.5},
                                              .crop = {24, 32},
                                              .photometric = Photometric::off,
                                              .fill = {0, 0, kPad}});
  SegDataLoader loader(ds, t, {.batch_size = 2, .shuffle = true, .seed = 3, .normalize = kNorm});
  EXPECT_EQ(loader.num_batches(), 3);
  int64_t pure = 0, padded = 0, samples = 0;
  std::set<int64_t> seen;
  for (int64_t e = 0; e < 4; ++e)
    for (const SegBatch& b : epoch(loader, e)) {
      const int64_t B = b.size();
      ASSERT_EQ(b.images.dtype(), DType::f32);
      ASSERT_EQ(b.images.shape(), (Shape{B, 3, 24, 32}));
      ASSERT_EQ(b.labels.dtype(), DType::i64);
      ASSERT_EQ(b.labels.shape(), (Shape{B, 24, 32}));
      EXPECT_TRUE(b.uniform());
      const auto x = b.images.to_vector<float>();
      const auto y = b.labels.to_vector<int64_t>();
      for (int64_t i = 0; i < B; ++i) {
        seen.insert(b.indices[static_cast<size_t>(i)]);
        EXPECT_EQ(b.orig_sizes[static_cast<size_t>(i)], kSizes[size_t(b.indices[size_t(i)])]);
        EXPECT_EQ(b.sizes[static_cast<size_t>(i)], (std::array<int64_t, 2>{24, 32}));
        for (int64_t p = 0; p < 24 * 32; ++p) {
          const size_t base = static_cast<size_t>(i * 3 * 768 + p);
          const int r = pixel_of(x[base]), g = pixel_of(x[base + 768]),
                    bl = pixel_of(x[base + 2 * 768]);
          const int64_t label = y[static_cast<size_t>(i * 768 + p)];
          ASSERT_TRUE(bl == kPad || bl == kReal) << bl;
          if (bl == kPad) {
            ASSERT_EQ(label, 255);
            ++padded;
          } else if (r % 30 == 0 && g % 30 == 0) {
            ASSERT_EQ(label, block_label(r / 30, g / 30)) << "epoch " << e << " pixel " << p;
            ++pure;
          }
        }
        ++samples;
      }
    }
  EXPECT_EQ(samples, 20);
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_GT(pure, samples * 768 / 3);
  EXPECT_GT(padded, 0);
}

TEST(SegLoader, CropAndFlipBatchesAgreeExactly) {
  // Without resizing every image pixel is a source pixel: the label of each
  // pixel of the batch is that of the colour it shows.
  tcv::testing::TempDir tmp("seg_loader");
  const auto ds = dataset(make_tree(tmp));
  const SegTransform t = seg_train_transform({.scale_ratio = {1.0, 1.0},
                                              .crop = {32, 44},
                                              .photometric = Photometric::off,
                                              .fill = {0, 0, kPad}});
  SegDataLoader loader(ds, t, {.batch_size = 5, .seed = 1, .normalize = kNorm});
  for (int64_t e = 0; e < 3; ++e) {
    const auto batches = epoch(loader, e);
    ASSERT_EQ(batches.size(), 1u);
    const SegBatch& b = batches[0];
    const auto x = b.images.to_vector<float>();
    const auto y = b.labels.to_vector<int64_t>();
    const int64_t HW = 32 * 44;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t p = 0; p < HW; ++p) {
        const size_t base = static_cast<size_t>(i * 3 * HW + p);
        const int r = pixel_of(x[base]), g = pixel_of(x[base + size_t(HW)]),
                  bl = pixel_of(x[base + 2 * size_t(HW)]);
        const int64_t label = y[static_cast<size_t>(i * HW + p)];
        ASSERT_TRUE(bl == kPad || bl == kReal) << bl;
        ASSERT_EQ(label, bl == kPad ? 255 : coord_label(r, g)) << "epoch " << e << " sample " << i;
      }
  }
}

TEST(SegLoader, SameBatchesOnAnyNumberOfWorkers) {
  tcv::testing::TempDir tmp("seg_loader");
  const auto ds = dataset(make_tree(tmp));
  const SegTransform t = seg_train_transform({.crop = {24, 24}, .fill = {1, 2, 3}});
  SegDataLoader serial(ds, t, {.batch_size = 2, .seed = 7, .normalize = kNorm});
  SegDataLoader threaded(ds, t, {.batch_size = 2, .workers = 3, .seed = 7, .normalize = kNorm});
  const auto a = epoch(serial, 2), b = epoch(threaded, 2);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].indices, b[k].indices);
    EXPECT_TRUE(same(a[k].images, b[k].images));
    EXPECT_TRUE(same(a[k].labels, b[k].labels));
  }
  // Another epoch: another order and other draws.
  const auto c = epoch(serial, 3);
  EXPECT_FALSE(same(a[0].images, c[0].images));
  // Two ranks share the epoch: every sample once (padded to equal shares).
  std::multiset<int64_t> all;
  for (int64_t rank = 0; rank < 2; ++rank) {
    SegDataLoader part(
        ds, t, {.batch_size = 2, .seed = 7, .normalize = kNorm, .world_size = 2, .rank = rank});
    EXPECT_EQ(part.num_batches(), 2);
    for (const auto& batch : epoch(part, 0)) all.insert(batch.indices.begin(), batch.indices.end());
  }
  EXPECT_EQ(all.size(), 6u);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 5u);
}

TEST(SegLoader, UnequalImagesArePaddedAndSized) {
  tcv::testing::TempDir tmp("seg_loader");
  const auto ds = dataset(make_tree(tmp));
  SegDataLoader loader(ds, {}, {.batch_size = 3, .shuffle = false, .normalize = kNorm});
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 2u);
  const SegBatch& b = batches[0];  // images 0, 1, 2: 30x40, 24x36, 40x50
  ASSERT_EQ(b.images.shape(), (Shape{3, 3, 40, 50}));
  ASSERT_EQ(b.labels.shape(), (Shape{3, 40, 50}));
  EXPECT_FALSE(b.uniform());
  EXPECT_EQ(b.sizes[1], (std::array<int64_t, 2>{24, 36}));
  EXPECT_EQ(b.label_sizes[1], (std::array<int64_t, 2>{24, 36}));
  const Tensor img1 = b.images.select(0, 1), lab1 = b.labels.select(0, 1);
  for (int64_t y = 0; y < 40; ++y)
    for (int64_t x = 0; x < 50; ++x) {
      const bool inside = y < 24 && x < 36;
      const float r = img1.select(0, 0).select(0, y).select(0, x).item<float>();
      const int64_t l = lab1.select(0, y).select(0, x).item<int64_t>();
      if (inside) {
        ASSERT_EQ(pixel_of(r), y + 1);
        ASSERT_EQ(l, coord_label(int(y + 1), int(x)));
      } else {
        ASSERT_EQ(r, 0.0f);  // the mean colour once normalised
        ASSERT_EQ(l, 255);
      }
    }
  // Evaluation at a fitted size, labels kept at the original size.
  SegDataLoader fitted(ds, seg_eval_transform({.fit = {20, 15}}),
                       {.batch_size = 2, .shuffle = false, .normalize = kNorm});
  const SegBatch f = epoch(fitted, 0)[0];
  EXPECT_EQ(f.sizes[0], (std::array<int64_t, 2>{15, 20}));
  EXPECT_EQ(f.label_sizes[0], (std::array<int64_t, 2>{30, 40}));
  EXPECT_EQ(f.labels.shape(), (Shape{2, 30, 40}));
  EXPECT_EQ(f.images.shape(), (Shape{2, 3, 15, 20}));
}

TEST(SegLoader, CorruptSamplesAndImagesOnly) {
  tcv::testing::TempDir tmp("seg_loader");
  const std::string root = make_tree(tmp);
  Tensor bad = full({24, 36}, 0.0, {.dtype = DType::u8});
  bad.data<uint8_t>()[40] = 77;
  write_label_png(root + "/SegmentationClass/img1.png", bad);
  // An error on a worker reaches the consumer, naming the file and the value.
  SegDataLoader strict(dataset(root), {}, {.batch_size = 2, .shuffle = false, .workers = 2});
  strict.start_epoch(0);
  SegBatch b;
  const std::string msg = tcv::testing::error_of([&] { strict.next(b); });
  EXPECT_NE(msg.find("img1.png: label value 77 at (row 1, column 4)"), std::string::npos) << msg;
  // Skipped: left out of its batch and counted.
  SegDataLoader lenient(dataset(root, OnCorrupt::skip), {}, {.batch_size = 2, .shuffle = false});
  const auto batches = epoch(lenient, 0);
  EXPECT_EQ(batches[0].indices, (std::vector<int64_t>{0}));
  EXPECT_EQ(batches[0].images.size(0), 1);
  EXPECT_EQ(lenient.skipped(), 1);
  // No ground truth: images only.
  SegDataLoader images(dataset(root, OnCorrupt::error, GroundTruth::none), {},
                       {.batch_size = 5, .shuffle = false});
  const SegBatch all = epoch(images, 0)[0];
  EXPECT_FALSE(all.labels.defined());
  EXPECT_EQ(all.size(), 5);
  EXPECT_TRUE(all.label_sizes.empty());
}
