#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "data/folder.h"
#include "data/image.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

using tcv::testing::error_of;
using tcv::testing::TempDir;

// A solid RGB image whose red value is `value`, of size (h, w).
void write_solid(const std::string& path, int value, int64_t h = 6, int64_t w = 8) {
  fs::create_directories(fs::path(path).parent_path());
  Tensor img = zeros({3, h, w}, {.dtype = DType::u8});
  img.select(0, 0).fill_(value);
  img.select(0, 1).fill_(17);
  write_image(path, img);
}

// Classes "Cat", "bird", "dog" (byte order: upper case first), files out of order,
// a nested directory, an upper-case extension and a non-image file.
void make_tree(const TempDir& d) {
  write_solid(d.path("dog/b.png"), 21);
  write_solid(d.path("dog/a.png"), 20);
  write_solid(d.path("dog/sub/c.png"), 22);
  write_solid(d.path("Cat/z.PNG"), 1);
  write_solid(d.path("bird/m.bmp"), 10);
  write_solid(d.path("bird/k.jpg"), 200);
  std::ofstream(d.path("bird/notes.txt")) << "not an image";
  std::ofstream(d.path("toplevel.png")) << "files at the root are not samples";
}

}  // namespace

TEST(ImageFolder, ClassesAndSamplesLikeTorchvision) {
  TempDir d;
  make_tree(d);
  const ImageFolder ds(d.path());
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"Cat", "bird", "dog"}));
  EXPECT_EQ(ds.class_to_idx().at("dog"), 2);
  EXPECT_EQ(ds.num_classes(), 3);
  ASSERT_EQ(ds.size(), 6);
  const std::vector<std::pair<std::string, int64_t>> want{
      {d.path("Cat/z.PNG"), 0}, {d.path("bird/k.jpg"), 1}, {d.path("bird/m.bmp"), 1},
      {d.path("dog/a.png"), 2}, {d.path("dog/b.png"), 2},  {d.path("dog/sub/c.png"), 2}};
  EXPECT_EQ(ds.samples(), want);
  Rng rng(0, 0);
  const Sample s = ds.get(4, rng);
  EXPECT_EQ(s.label, 2);
  ASSERT_EQ(s.image.shape(), (Shape{3, 6, 8}));
  EXPECT_EQ(s.image.to_vector<uint8_t>()[0], 21);
  EXPECT_EQ(s.image.to_vector<uint8_t>()[48], 17);  // green plane

  ImageFileOptions only_png;
  only_png.extensions = {".png"};
  EXPECT_NE(error_of([&] { ImageFolder(d.path(), {}, only_png); }).find("bird"),
            std::string::npos);  // bird has no .png
  EXPECT_NE(error_of([&] { ImageFolder(d.path("nope")); }).find(d.path("nope")), std::string::npos);
}

TEST(ImageFolder, TransformAndLoaderIndependentOfWorkers) {
  TempDir d;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 5; ++i)
      write_solid(
          d.path(std::string(1, static_cast<char>('a' + c)) + "/" + std::to_string(i) + ".png"),
          c * 50 + i * 3, 10 + i, 12 + 2 * c);
  auto ds = std::make_shared<ImageFolder>(
      d.path(), Compose({RandomResizedCrop{5}, RandomHorizontalFlip{}, ToFloat{}}));
  auto run = [&](int workers) {
    DataLoader loader(ds, {.batch_size = 4,
                           .shuffle = true,
                           .drop_last = false,
                           .workers = workers,
                           .seed = 5,
                           .normalize = {},
                           .prefetch = 1});
    EXPECT_EQ(loader.num_batches(), 4);
    loader.start_epoch(2);
    std::vector<float> xs;
    std::vector<int64_t> ys;
    Batch b;
    while (loader.next(b)) {
      EXPECT_EQ(b.x.shape()[1], 3);
      EXPECT_EQ(b.x.shape()[2], 5);
      const auto xv = b.x.to_vector<float>();
      const auto yv = b.y.to_vector<int64_t>();
      xs.insert(xs.end(), xv.begin(), xv.end());
      ys.insert(ys.end(), yv.begin(), yv.end());
    }
    return std::make_pair(xs, ys);
  };
  const auto one = run(1), four = run(4);
  EXPECT_EQ(one, four);
  EXPECT_EQ(one.second.size(), 15u);
  for (float v : one.first) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
}

TEST(ImageFolder, CorruptImagesErrorOrSkip) {
  TempDir d;
  write_solid(d.path("a/0.png"), 5);
  write_solid(d.path("a/1.png"), 6);
  std::ofstream(d.path("a/2.png")) << "garbage";
  write_solid(d.path("b/0.png"), 7);
  {
    const ImageFolder strict(d.path());
    Rng rng(0, 0);
    const std::string msg = error_of([&] { strict.get(2, rng); });
    EXPECT_NE(msg.find(d.path("a/2.png")), std::string::npos) << msg;
  }
  ImageFileOptions skip;
  skip.on_corrupt = OnCorrupt::skip;
  auto ds = std::make_shared<ImageFolder>(d.path(), Transform{}, skip);
  DataLoader loader(ds, {.batch_size = 4,
                         .shuffle = false,
                         .drop_last = false,
                         .workers = 2,
                         .seed = 0,
                         .normalize = {1.0, {0.0}, {1.0}},
                         .prefetch = 2});
  loader.start_epoch(0);
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.x.shape(), (Shape{3, 3, 6, 8}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(b.x.to_vector<float>()[2 * 3 * 48], 7.0f);  // red of b/0.png, unscaled
  EXPECT_FALSE(loader.next(b));
  EXPECT_EQ(loader.skipped(), 1);
  EXPECT_NE(ds->first_skipped().find("2.png"), std::string::npos);
}

TEST(ListFile, ParsesPathsAndLabels) {
  TempDir d;
  write_solid(d.path("imgs/x.png"), 40);
  write_solid(d.path("imgs/with space.png"), 41);
  const std::string list = d.path("train.txt");
  std::ofstream(list) << "# path label\nimgs/x.png 3\n\n  imgs/with space.png\t1  \n";
  const ListFileDataset ds(list);
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.num_classes(), 4);
  EXPECT_EQ(ds.samples()[1], (std::pair<std::string, int64_t>{d.path("imgs/with space.png"), 1}));
  Rng rng(0, 0);
  const Sample s = ds.get(1, rng);
  EXPECT_EQ(s.label, 1);
  EXPECT_EQ(s.image.to_vector<uint8_t>()[0], 41);
  // Another root.
  const ListFileDataset other(list, d.path("imgs/.."), 10);
  EXPECT_EQ(other.num_classes(), 10);
}

TEST(ListFile, ErrorsNameFileAndLine) {
  TempDir d;
  const std::string list = d.path("bad.txt");
  std::ofstream(list) << "a.png 1\nb.png\n";
  std::string msg = error_of([&] { ListFileDataset ds(list); });
  EXPECT_NE(msg.find(list + ":2"), std::string::npos) << msg;
  std::ofstream(list) << "a.png 1\nb.png 1\nc.png two\n";
  msg = error_of([&] { ListFileDataset ds(list); });
  EXPECT_NE(msg.find(list + ":3"), std::string::npos) << msg;
  std::ofstream(list) << "a.png 7\n";
  msg = error_of([&] { ListFileDataset ds(list, "", 5); });
  EXPECT_NE(msg.find(list + ":1"), std::string::npos) << msg;
  msg = error_of([&] { ListFileDataset ds(d.path("missing.txt")); });
  EXPECT_NE(msg.find("missing.txt"), std::string::npos) << msg;
  // A listed file that does not exist: named when the sample is read.
  std::ofstream(list) << "gone.png 0\n";
  const ListFileDataset ds(list);
  Rng rng(0, 0);
  msg = error_of([&] { ds.get(0, rng); });
  EXPECT_NE(msg.find(d.path("gone.png")), std::string::npos) << msg;
}

TEST(ListFile, HugeLabelIsAnErrorNotAnOverflow) {
  // Found reading the parser while writing fuzz_list_file: the class count is
  // the largest label + 1, which overflowed int64 for label 2^63 - 1.
  TempDir d;
  const std::string list = d.path("huge.txt");
  std::ofstream(list) << "a.png 0\nb.png 9223372036854775807\n";
  const std::string msg = error_of([&] { ListFileDataset ds(list); });
  EXPECT_NE(msg.find(list + ":2: label 9223372036854775807 is too large (at most 2147483647)"),
            std::string::npos)
      << msg;
  std::ofstream(list) << "a.png 2147483647\n";
  EXPECT_EQ(ListFileDataset::parse(list, "").at(0).second, 2147483647);
}
