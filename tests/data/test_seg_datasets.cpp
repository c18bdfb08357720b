// Segmentation data sets read from small trees written here: Cityscapes (label
// ids to train ids), Pascal VOC (palette masks, SBD's augmented lists, DeepLab's
// two-column lists), ADE20K (reduce_zero_label) and a generated scene set; every
// kind of bad input is an error naming the file (or a skipped, counted image).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/det/scenes.h"
#include "data/det/voc.h"
#include "data/image.h"
#include "data/label_png.h"
#include "data/seg/colorize.h"
#include "data/seg/dataset.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;
using tcv::testing::error_of;

namespace {

using tcv::testing::put_file;

// u8 (H, W) from row-major values.
Tensor label_map(int64_t H, int64_t W, const std::vector<int>& values) {
  Tensor t = empty({H, W}, {.dtype = DType::u8});
  for (int64_t k = 0; k < H * W; ++k) t.data<uint8_t>()[k] = static_cast<uint8_t>(values[k]);
  return t;
}

// An image whose pixel (y, x) is (10 y + x, 3 * seed, 100).
Tensor image(int64_t H, int64_t W, int seed) {
  Tensor t = empty({3, H, W}, {.dtype = DType::u8});
  uint8_t* p = t.data<uint8_t>();
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      p[y * W + x] = static_cast<uint8_t>(10 * y + x);
      p[H * W + y * W + x] = static_cast<uint8_t>(3 * seed);
      p[2 * H * W + y * W + x] = 100;
    }
  return t;
}

void write_gray_png(const std::string& path, const Tensor& labels) {
  fs::create_directories(fs::path(path).parent_path());
  write_image(path, labels);
}

void write_palette_png(const std::string& path, const Tensor& labels) {
  fs::create_directories(fs::path(path).parent_path());
  write_label_png(path, labels);
}

void write_img(const std::string& path, const Tensor& img) {
  fs::create_directories(fs::path(path).parent_path());
  write_image(path, img);
}

std::vector<int> iota_values(int n, int first = 0) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) v[static_cast<size_t>(k)] = first + k;
  return v;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// ---- Cityscapes ------------------------------------------------------------------------

namespace {

// Two cities; the label map of aachen_000000_000019 holds every label id and 255.
void make_cityscapes(const std::string& root) {
  const std::vector<std::pair<std::string, std::string>> files{{"bochum", "bochum_000000_000313"},
                                                               {"aachen", "aachen_000001_000019"},
                                                               {"aachen", "aachen_000000_000019"}};
  int seed = 0;
  for (const auto& [city, stem] : files) {
    write_img(root + "/leftImg8bit/train/" + city + "/" + stem + "_leftImg8bit.png",
              image(5, 7, seed++));
    std::vector<int> v = iota_values(34);
    v.push_back(255);
    write_gray_png(root + "/gtFine/train/" + city + "/" + stem + "_gtFine_labelIds.png",
                   label_map(5, 7, v));
  }
  // Files beside the images that are not images of the data set.
  put_file(root + "/leftImg8bit/train/aachen/readme.txt", "x");
  write_gray_png(root + "/gtFine/train/aachen/aachen_000000_000019_gtFine_instanceIds.png",
                 label_map(5, 7, std::vector<int>(35, 0)));
}

}  // namespace

TEST(SegCityscapes, LabelIdsBecomeTrainIds) {
  tcv::testing::TempDir tmp("cityscapes");
  make_cityscapes(tmp.path());
  const SegDataset ds = read_cityscapes({.root = tmp.path()});
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.num_classes(), 19);
  EXPECT_EQ(ds.class_names()[0], "road");
  EXPECT_EQ(ds.class_names()[18], "bicycle");
  // Cities, then files, in name order.
  EXPECT_EQ(ds.record(0).id, "aachen_000000_000019");
  EXPECT_EQ(ds.record(1).id, "aachen_000001_000019");
  EXPECT_EQ(ds.record(2).id, "bochum_000000_000313");
  const SegSample s = ds.load(0);
  EXPECT_EQ(s.image.shape(), (Shape{3, 5, 7}));
  EXPECT_EQ(s.image.to_vector<uint8_t>(), image(5, 7, 2).to_vector<uint8_t>());  // written third
  EXPECT_EQ(s.orig_height, 5);
  EXPECT_EQ(s.orig_width, 7);
  // The official table: id -> train id (255 for the ids not trained on).
  const std::vector<int> expected{255, 255, 255, 255, 255, 255, 255, 0,  1,  255, 255, 2,
                                  3,   4,   255, 255, 255, 5,   255, 6,  7,  8,   9,   10,
                                  11,  12,  13,  14,  15,  255, 255, 16, 17, 18,  255};
  EXPECT_EQ(s.label.to_vector<uint8_t>(), std::vector<uint8_t>(expected.begin(), expected.end()));
}

TEST(SegCityscapes, LabelIdsKeptAndSubmissionIds) {
  tcv::testing::TempDir tmp("cityscapes");
  make_cityscapes(tmp.path());
  const SegDataset ds =
      read_cityscapes({.root = tmp.path(), .labels = CityscapesLabels::label_ids});
  EXPECT_EQ(ds.num_classes(), 34);
  EXPECT_EQ(ds.class_names()[26], "car");
  std::vector<int> ids = iota_values(34);
  ids.push_back(255);
  EXPECT_EQ(ds.load(1).label.to_vector<uint8_t>(), std::vector<uint8_t>(ids.begin(), ids.end()));
  // Train ids back to label ids: every train id to its id, 255 to 0 (unlabeled).
  std::vector<int> train = iota_values(19);
  train.push_back(255);
  const Tensor back = cityscapes_train_to_label_ids(label_map(4, 5, train));
  EXPECT_EQ(back.to_vector<uint8_t>(),
            (std::vector<uint8_t>{7,  8,  11, 12, 13, 17, 19, 20, 21, 22,
                                  23, 24, 25, 26, 27, 28, 31, 32, 33, 0}));
  // And through the train-id map again: where they came from (0, unlabeled, is ignored).
  EXPECT_EQ(map_labels(back, cityscapes_train_id_map(), "x").to_vector<uint8_t>(),
            label_map(4, 5, train).to_vector<uint8_t>());
  // The submission file: an 8-bit grey PNG of label ids.
  write_cityscapes_label_ids(tmp.path("pred_labelIds.png"), label_map(4, 5, train));
  const LabelPng png = read_label_png(tmp.path("pred_labelIds.png"));
  EXPECT_EQ(png.kind, LabelPngKind::gray);
  EXPECT_EQ(png.labels.to_vector<uint8_t>(), back.to_vector<uint8_t>());
  EXPECT_TRUE(contains(error_of([&] { cityscapes_train_to_label_ids(label_map(1, 1, {19})); }),
                       "value 19"));
}

TEST(SegCityscapes, Errors) {
  tcv::testing::TempDir tmp("cityscapes");
  make_cityscapes(tmp.path());
  // A label id that is not one of the 34 (nor 255): the file and the value.
  std::vector<int> v(35, 7);
  v[9] = 34;
  const std::string bad = tmp.path("gtFine/train/bochum/bochum_000000_000313_gtFine_labelIds.png");
  write_gray_png(bad, label_map(5, 7, v));
  const SegDataset ds = read_cityscapes({.root = tmp.path()});
  std::string msg = error_of([&] { ds.load(2); });
  EXPECT_TRUE(contains(msg, bad)) << msg;
  EXPECT_TRUE(contains(msg, "label value 34 at (row 1, column 2)")) << msg;
  EXPECT_TRUE(contains(msg, "may hold are 0-33, 255")) << msg;
  // The same sample skipped and counted.
  const SegDataset skipping =
      read_cityscapes({.root = tmp.path(), .read = {.on_corrupt = OnCorrupt::skip}});
  EXPECT_FALSE(skipping.load(2).image.defined());
  EXPECT_EQ(skipping.skipped(), 1);
  EXPECT_TRUE(contains(skipping.first_skipped(), "label value 34"));
  // A label map of another size than its image.
  write_gray_png(bad, label_map(4, 7, std::vector<int>(28, 7)));
  msg = error_of([&] { ds.load(2); });
  EXPECT_TRUE(contains(msg, bad) && contains(msg, "7x4") && contains(msg, "7x5")) << msg;
  // A missing label file: named when the list is read, or skipped.
  fs::remove(bad);
  msg = error_of([&] { read_cityscapes({.root = tmp.path()}); });
  EXPECT_TRUE(contains(msg, bad + ": label file not found")) << msg;
  const SegDataset two =
      read_cityscapes({.root = tmp.path(), .read = {.on_corrupt = OnCorrupt::skip}});
  EXPECT_EQ(two.size(), 2);
  EXPECT_EQ(two.skipped(), 1);
  // Images only (a test split): no labels read.
  const SegDataset images =
      read_cityscapes({.root = tmp.path(), .read = {.ground_truth = GroundTruth::none}});
  EXPECT_EQ(images.size(), 3);
  EXPECT_FALSE(images.has_labels());
  EXPECT_FALSE(images.load(2).label.defined());
  // A split that is not there.
  msg = error_of([&] { read_cityscapes({.root = tmp.path(), .split = "val"}); });
  EXPECT_TRUE(contains(msg, "leftImg8bit/val: no such directory")) << msg;
}

// ---- Pascal VOC ----------------------------------------------------------------------------

namespace {

// ids a, b, c: palette masks in SegmentationClass (values 0..20 and 255);
// d, e: grey masks in SegmentationClassAug.
void make_voc(const std::string& root) {
  int seed = 0;
  for (const std::string id : {"a", "b", "c", "d", "e"}) {
    write_img(root + "/JPEGImages/" + id + ".jpg", image(4, 6, seed));
    std::vector<int> v = iota_values(21);
    v.push_back(255);
    v.push_back(255);
    v.push_back(static_cast<int>(seed));
    const Tensor l = label_map(4, 6, v);
    if (seed < 3)
      write_palette_png(root + "/SegmentationClass/" + id + ".png", l);
    else
      write_gray_png(root + "/SegmentationClassAug/" + id + ".png", l);
    ++seed;
  }
  put_file(root + "/ImageSets/Segmentation/train.txt", "a\nb\n\n");
  put_file(root + "/ImageSets/Segmentation/val.txt", "c\n");
  put_file(root + "/ImageSets/Segmentation/aug.txt", "d\ne\n");
  put_file(root + "/ImageSets/SegmentationAug/train_aug.txt",
           "/JPEGImages/e.jpg /SegmentationClassAug/e.png\nJPEGImages/b.jpg "
           "SegmentationClass/b.png\n");
}

}  // namespace

TEST(SegVoc, SplitsAugListsAndPaletteMasks) {
  tcv::testing::TempDir tmp("voc_seg");
  make_voc(tmp.path());
  const SegDataset train = read_voc_seg({.root = tmp.path()});
  ASSERT_EQ(train.size(), 2);
  EXPECT_EQ(train.num_classes(), 21);
  EXPECT_EQ(train.class_names()[0], "background");
  EXPECT_EQ(train.class_names()[15], "person");
  EXPECT_EQ(train.record(1).id, "b");
  const SegSample s = train.load(1);
  EXPECT_EQ(s.image.shape(), (Shape{3, 4, 6}));  // JPEG: the size, not the pixels
  std::vector<int> v = iota_values(21);
  v.insert(v.end(), {255, 255, 1});
  EXPECT_EQ(s.label.to_vector<uint8_t>(), std::vector<uint8_t>(v.begin(), v.end()));

  // SBD's masks (grey PNGs) in SegmentationClassAug, and the two concatenated as
  // mmsegmentation's voc12aug trains.
  const SegDataset aug = read_voc_seg({.root = tmp.path(), .split = "aug"});
  ASSERT_EQ(aug.size(), 2);
  EXPECT_EQ(aug.record(0).label_path, tmp.path("SegmentationClassAug/d.png"));
  EXPECT_EQ(aug.load(0).label.to_vector<uint8_t>()[23], 3);
  const SegDataset train_aug = read_voc_seg({.root = tmp.path(), .split = "train_aug"});
  ASSERT_EQ(train_aug.size(), 4);
  EXPECT_EQ(train_aug.record(0).id, "a");
  EXPECT_EQ(train_aug.record(3).id, "e");
  // DeepLab's two-column list (paths relative to the root, with or without '/').
  const SegDataset deeplab = read_voc_seg(
      {.root = tmp.path(), .lists = {{.list = "ImageSets/SegmentationAug/train_aug.txt"}}});
  ASSERT_EQ(deeplab.size(), 2);
  EXPECT_EQ(deeplab.record(0).id, "e");
  EXPECT_EQ(deeplab.record(0).label_path, tmp.path("SegmentationClassAug/e.png"));
  EXPECT_EQ(deeplab.load(1).label.to_vector<uint8_t>()[23], 1);
  // Class names from classes.txt (as generated scenes have): background first.
  put_file(tmp.path("classes.txt"), "cat\ndog\n");
  const SegDataset named = read_voc_seg({.root = tmp.path(), .split = "val"});
  EXPECT_EQ(named.class_names(), (std::vector<std::string>{"background", "cat", "dog"}));
  // ... whose masks now hold values that are not classes.
  const std::string msg = error_of([&] { named.load(0); });
  EXPECT_TRUE(contains(msg, tmp.path("SegmentationClass/c.png"))) << msg;
  EXPECT_TRUE(contains(msg, "label value 3 at (row 0, column 3)")) << msg;
}

TEST(SegVoc, Errors) {
  tcv::testing::TempDir tmp("voc_seg");
  make_voc(tmp.path());
  // A value above the classes in a palette mask.
  std::vector<int> v(24, 0);
  v[13] = 21;
  write_palette_png(tmp.path("SegmentationClass/c.png"), label_map(4, 6, v));
  std::string msg = error_of([&] { read_voc_seg({.root = tmp.path(), .split = "val"}).load(0); });
  EXPECT_TRUE(
      contains(msg, tmp.path("SegmentationClass/c.png") + ": label value 21 at (row 2, column 1)"))
      << msg;
  // A label that is not a PNG.
  put_file(tmp.path("SegmentationClass/c.png"), "not a png");
  msg = error_of([&] { read_voc_seg({.root = tmp.path(), .split = "val"}).load(0); });
  EXPECT_TRUE(contains(msg, tmp.path("SegmentationClass/c.png") + ": not a PNG")) << msg;
  // A corrupt image.
  put_file(tmp.path("JPEGImages/a.jpg"), "\xFF\xD8 truncated");
  msg = error_of([&] { read_voc_seg({.root = tmp.path()}).load(0); });
  EXPECT_TRUE(contains(msg, tmp.path("JPEGImages/a.jpg"))) << msg;
  // Lines: three fields; a listed image without a file.
  put_file(tmp.path("ImageSets/Segmentation/bad.txt"), "a\nb c d\n");
  msg = error_of([&] { read_voc_seg({.root = tmp.path(), .split = "bad"}); });
  EXPECT_TRUE(contains(msg, "bad.txt:2: expected an image id")) << msg;
  put_file(tmp.path("ImageSets/Segmentation/gone.txt"), "b\nzz\na\n");
  msg = error_of([&] { read_voc_seg({.root = tmp.path(), .split = "gone"}); });
  EXPECT_TRUE(contains(msg, tmp.path("JPEGImages/zz.jpg") + ": image file not found (listed in"))
      << msg;
  EXPECT_TRUE(contains(msg, "gone.txt:2")) << msg;
  const SegDataset skip =
      read_voc_seg({.root = tmp.path(), .split = "gone", .read = {.on_corrupt = OnCorrupt::skip}});
  EXPECT_EQ(skip.size(), 2);
  EXPECT_EQ(skip.skipped(), 1);
  msg = error_of([&] { read_voc_seg({.root = tmp.path(), .split = "test"}); });
  EXPECT_TRUE(contains(msg, "test.txt: no such image list")) << msg;
  // A mask of another size than its image.
  write_palette_png(tmp.path("SegmentationClass/b.png"), label_map(2, 3, std::vector<int>(6, 0)));
  msg = error_of([&] { read_voc_seg({.root = tmp.path()}).load(1); });
  EXPECT_TRUE(contains(msg, "3x2 (width x height) but its image")) << msg;
}

// ---- ADE20K ----------------------------------------------------------------------------------

TEST(SegAde20k, ReduceZeroLabel) {
  tcv::testing::TempDir tmp("ade");
  const std::string root = tmp.path("ADEChallengeData2016");
  for (const std::string id : {"ADE_train_00000002", "ADE_train_00000001"}) {
    write_img(root + "/images/training/" + id + ".jpg", image(2, 3, 1));
    write_gray_png(root + "/annotations/training/" + id + ".png",
                   label_map(2, 3, {0, 1, 2, 149, 150, 255}));
  }
  const SegDataset ds = read_ade20k({.root = root, .split = "train"});
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.num_classes(), 150);
  EXPECT_EQ(ds.class_names()[0], "wall");
  EXPECT_EQ(ds.class_names()[149], "flag");
  EXPECT_EQ(ds.record(0).id, "ADE_train_00000001");
  EXPECT_EQ(ds.load(0).label.to_vector<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 1, 148, 149, 255}));
  const SegDataset all =
      read_ade20k({.root = root, .split = "training", .reduce_zero_label = ReduceZeroLabel::off});
  EXPECT_EQ(all.num_classes(), 151);
  EXPECT_EQ(all.class_names()[1], "wall");
  EXPECT_EQ(all.load(0).label.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 2, 149, 150, 255}));
  write_gray_png(root + "/annotations/training/ADE_train_00000002.png",
                 label_map(2, 3, {0, 1, 2, 151, 150, 255}));
  const std::string msg = error_of([&] { ds.load(1); });
  EXPECT_TRUE(contains(msg, "ADE_train_00000002.png: label value 151 at (row 1, column 0)")) << msg;
  EXPECT_TRUE(contains(msg, "may hold are 0-150, 255")) << msg;
  EXPECT_TRUE(contains(error_of([&] { read_ade20k({.root = root, .split = "validation"}); }),
                       "images/validation: no such directory"));
}

// ---- generated scenes --------------------------------------------------------------------------

TEST(SegScenes, TheGeneratedVocTreeReadsAsSegmentationData) {
  tcv::testing::TempDir tmp("seg_scenes");
  SceneSetOptions o;
  o.scene = {.width = 96, .height = 80, .min_objects = 2, .max_objects = 4, .min_scale = 0.3};
  o.train = 3;
  o.val = 2;
  o.seed = 5;
  const std::string root = tmp.path("scenes");
  write_scene_set(o, root);
  const SegDataset train = read_voc_seg({.root = root, .split = "train"});
  const SegDataset val = read_voc_seg({.root = root, .split = "val"});
  ASSERT_EQ(train.size(), 3);
  ASSERT_EQ(val.size(), 2);
  EXPECT_EQ(train.num_classes(), 11);
  EXPECT_EQ(train.class_names()[0], "background");
  EXPECT_EQ(train.class_names()[1], fashion_mnist_classes()[0]);
  // Every object pixel lies inside a box of its class in the VOC annotation.
  const DetDataset boxes = read_voc({.roots = {root}, .split = "train"});
  ASSERT_EQ(boxes.size(), 3);
  for (int64_t i = 0; i < train.size(); ++i) {
    const SegSample s = train.load(i);
    EXPECT_EQ(s.image.shape(), (Shape{3, 80, 96}));
    ASSERT_EQ(fs::path(boxes.record(i).image_path).stem().string(), train.record(i).id);
    const DetTarget& t = boxes.record(i).target;
    const auto l = s.label.to_vector<uint8_t>();
    int64_t object_pixels = 0, void_pixels = 0;
    for (int64_t y = 0; y < 80; ++y)
      for (int64_t x = 0; x < 96; ++x) {
        const int v = l[static_cast<size_t>(y * 96 + x)];
        ASSERT_TRUE(v <= 10 || v == 255) << v;
        void_pixels += v == 255;
        if (v == 0 || v == 255) continue;
        ++object_pixels;
        bool inside = false;
        for (int64_t k = 0; k < t.size(); ++k) {
          const Box& b = t.boxes[static_cast<size_t>(k)];
          inside |= t.labels[static_cast<size_t>(k)] == v && b[0] <= x && x < b[2] && b[1] <= y &&
                    y < b[3];
        }
        ASSERT_TRUE(inside) << "image " << i << " pixel (" << y << ", " << x << ") class " << v;
      }
    EXPECT_GT(object_pixels, 0);
    EXPECT_GT(void_pixels, 0);  // the outlines VOC marks 255
  }
}
