// tcv-train on image datasets other than IDX: a generated ImageFolder (classes of
// distinct colours), a list file, tiny CIFAR-10 binary files, mixup with label
// smoothing, and corrupt images skipped and counted or reported by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/image.h"
#include "data/transforms.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/config.h"
#include "train/data_setup.h"
#include "train/predict.h"
#include "train/tasks/cls.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;

namespace {

using tcv::testing::contains;
using tcv::testing::read_jsonl;
using tcv::testing::slurp;

using tcv::testing::error_of;
using tcv::testing::TempDir;

// Class k's colour: red, green, blue.
constexpr uint8_t kColors[3][3] = {{220, 30, 30}, {30, 220, 30}, {30, 30, 220}};
const char* const kClasses[3] = {"a_red", "b_green", "c_blue"};

// A u8 (3, h, w) image of class k's colour with a little deterministic texture.
Tensor color_image(int k, int64_t h, int64_t w, int seed) {
  Tensor t = empty({3, h, w}, {.dtype = DType::u8});
  auto* p = t.data<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < h * w; ++i)
      p[c * h * w + i] = static_cast<uint8_t>(kColors[k][c] + (i * 7 + seed * 13 + c) % 21 - 10);
  return t;
}

// root/<class>/img_N.png: n images of 16 x 16 per class.
void write_folder(const fs::path& root, int n, int seed0) {
  for (int k = 0; k < 3; ++k) {
    fs::create_directories(root / kClasses[k]);
    for (int i = 0; i < n; ++i)
      data::write_image((root / kClasses[k] / ("img_" + std::to_string(i) + ".png")).string(),
                        color_image(k, 16, 16, seed0 + i));
  }
}

// A small fmnist_cnn run on 3-channel images resized to 28 x 28.
Config base_config() {
  Config c;
  c.set_overrides({
      "device=cpu",
      "network.model_name=fmnist_cnn",
      "data.num_classes=3",
      "data.input_size=[28, 28]",
      "data.channels=3",
      "data.normalize.mean=[0.5, 0.5, 0.5]",
      "data.normalize.std=[0.25]",
      "data.workers=2",
      "train.batch_size=8",
      "val.batch_size=5",
      "solver.lr.base_lr=0.05",
      "solver.display_iter=3",
      "solver.save_epoch=0",
  });
  return c;
}

Config folder_config(const fs::path& train, const fs::path& val) {
  Config c = base_config();
  c.set_overrides({
      "data.dataset=image_folder",
      "data.train_dir=\"" + train.string() + "\"",
      "data.val_dir=\"" + val.string() + "\"",
  });
  return c;
}

TrainSummary run_training(const Config& c, const fs::path& out) {
  Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
  return t.run();
}

}  // namespace

TEST(TrainDatasets, ResizesFilterWhenShrinking) {
  // A one-pixel checkerboard shrunk 3.2x: filtered (as torchvision on PIL images)
  // it is an even grey; two bilinear taps per output leave dark and light moire.
  Tensor board = empty({3, 64, 96}, {.dtype = DType::u8});
  auto* p = board.data<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 96; ++x) p[(c * 64 + y) * 96 + x] = (x + y) % 2 ? 255 : 0;
  Config c = base_config();
  c.set_overrides({
      "data.input_size=[12, 12]",
      "val.aug.resize_shorter=20",
      "val.aug.center_crop=true",
      "train.aug.resize_shorter=20",
      "data.dataset=cifar10",  // 3 channels (the transforms read no file)
      "data.data_dir=unused",
  });

  data::Rng rng(1, 0);
  const ClsConfig cls = parse_cls_config(c);
  for (const auto& [name, t] :
       {std::pair{"eval", eval_transform(c, cls)}, std::pair{"train", train_transform(c, cls)}}) {
    const Tensor out = t(board, rng);
    ASSERT_EQ(out.shape(), (Shape{3, 12, 12})) << name;
    for (uint8_t v : out.to_vector<uint8_t>()) {
      EXPECT_GE(v, 120) << name;
      EXPECT_LE(v, 135) << name;
    }
  }
  // Without filtering the same shrink keeps values near the extremes.
  const auto aliased = data::resize_shorter(board, 20).to_vector<uint8_t>();
  EXPECT_LE(*std::min_element(aliased.begin(), aliased.end()), 60);
  EXPECT_GE(*std::max_element(aliased.begin(), aliased.end()), 195);
}

TEST(TrainDatasets, ImageFolderLearnsColoursWithAugmentation) {
  TempDir tmp("folder");
  write_folder(tmp.root() / "train", 8, 0);
  write_folder(tmp.root() / "val", 4, 100);
  Config c = folder_config(tmp.root() / "train", tmp.root() / "val");
  c.set_overrides({
      "solver.max_epoch=4",  // 24 images / 8 = 3 iters per epoch
      "train.aug.random_resized_crop.enable=true",
      "train.aug.random_resized_crop.scale=[0.5, 1.0]",
      "train.aug.hflip=0.5",
      "train.aug.color_jitter=[0.1, 0.1, 0.0, 0.0]",
      "val.aug.resize_shorter=20",
      "val.aug.center_crop=true",
  });
  const fs::path out = tmp.root() / "run";
  const TrainSummary s = run_training(c, out);
  EXPECT_EQ(s.iters, 12);
  EXPECT_EQ(s.epochs, 4);
  EXPECT_EQ(s.skipped, 0);
  EXPECT_GE(s.metric("top1"), 90.0);  // chance is 33%
  EXPECT_NEAR(s.best_score, 100.0, 10.0 + 1e-9);

  std::vector<int64_t> train_iters, val_iters;
  std::vector<double> losses;
  for (const auto& j : read_jsonl(out / "metrics.jsonl")) {
    if (json_string(j, "split") == "train") {
      train_iters.push_back(json_int(j, "iter"));
      losses.push_back(json_double(j, "loss"));
    } else {
      val_iters.push_back(json_int(j, "iter"));
      EXPECT_EQ(json_int(j, "images"), 12);
      EXPECT_FALSE(j.contains("skipped"));
    }
  }
  EXPECT_EQ(train_iters, (std::vector<int64_t>{3, 6, 9, 12}));
  EXPECT_EQ(val_iters, (std::vector<int64_t>{3, 6, 9, 12}));
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses[3], losses[0]);

  // report.html shows the 12 val images (de-normalised batches) with the folder names.
  const std::string html = slurp(out / "report.html");
  size_t imgs = 0;
  for (size_t p = html.find("<img alt=\"sample\""); p != std::string::npos;
       p = html.find("<img alt=\"sample\"", p + 1))
    ++imgs;
  EXPECT_EQ(imgs, 12u);
  EXPECT_TRUE(contains(html, "c_blue")) << "class names from the folder";

  // tcv-predict: input size and channels come from the config; any image size works.
  const Predictor pred(Config::from_file((out / "config.toml").string()), out.string());
  EXPECT_EQ(pred.in_channels(), 3);
  EXPECT_EQ(pred.input_height(), 28);
  EXPECT_EQ(pred.input_width(), 28);
  EXPECT_EQ(pred.class_names(), (std::vector<std::string>{"a_red", "b_green", "c_blue"}));
  for (int k = 0; k < 3; ++k) {
    const auto top = pred.predict(color_image(k, 30, 40, 7), 5);
    ASSERT_EQ(top.size(), 3u);  // clipped to the number of classes
    EXPECT_EQ(top[0].name, kClasses[k]);
  }
}

TEST(TrainDatasets, ListFileAndMixupWithLabelSmoothing) {
  TempDir tmp("list");
  write_folder(tmp.root() / "img", 8, 0);
  std::ofstream tr(tmp.root() / "train.txt"), va(tmp.root() / "val.txt");
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 8; ++i)
      (i < 6 ? tr : va) << kClasses[k] << "/img_" << i << ".png " << k << "\n";
  tr.close();
  va.close();
  Config c = base_config();
  c.set_overrides({
      "data.dataset=list",
      "data.train_list=\"" + (tmp.root() / "train.txt").string() + "\"",
      "data.val_list=\"" + (tmp.root() / "val.txt").string() + "\"",
      "data.image_root=\"" + (tmp.root() / "img").string() + "\"",
      "train.batch_size=6",  // 18 images, 3 iters per epoch
      "solver.max_epoch=5",
      "train.mixup_alpha=0.4",
      "loss.label_smoothing=0.1",
  });
  const TrainSummary s = run_training(c, tmp.root() / "run");
  EXPECT_EQ(s.iters, 15);
  EXPECT_GT(s.metric("top1"), 50.0);  // chance is 33%, mixup slows it down a little
  for (const auto& j : read_jsonl(tmp.root() / "run" / "metrics.jsonl"))
    if (json_string(j, "split") == "train") {
      EXPECT_TRUE(std::isfinite(json_double(j, "loss")));
      EXPECT_GT(json_double(j, "loss"), 0.0);
    } else {
      EXPECT_EQ(json_int(j, "images"), 6);
    }

  // A label beyond data.num_classes names the key, the list file and its line.
  std::ofstream bad(tmp.root() / "bad.txt");
  bad << "a_red/img_0.png 0\n\na_red/img_1.png 7\n";
  bad.close();
  c.set_override("data.train_list=\"" + (tmp.root() / "bad.txt").string() + "\"");
  const std::string msg = error_of([&] { run_training(c, tmp.root() / "run2"); });
  EXPECT_TRUE(contains(msg, "data.train_list")) << msg;
  EXPECT_TRUE(contains(msg, "bad.txt:3")) << msg;
}

TEST(TrainDatasets, SoftTargetCrossEntropyMatchesCrossEntropy) {
  const Tensor logits = from_vector<float>({1.0f, -0.5f, 2.0f, 0.3f, 0.3f, -1.0f}, {2, 3});
  const Tensor labels = from_vector<int64_t>({2, 0}, {2});
  for (double smoothing : {0.0, 0.1}) {
    const double soft =
        soft_target_cross_entropy(logits, data::one_hot(labels, 3, smoothing)).item();
    const double hard = ops::cross_entropy(logits, labels, {.label_smoothing = smoothing}).item();
    EXPECT_NEAR(soft, hard, 1e-6) << smoothing;
  }
  // Closed form for one row: -(0.5 log p0 + 0.5 log p1) with logits (0, 0): log 2.
  const Tensor zero = from_vector<float>({0.0f, 0.0f}, {1, 2});
  const Tensor half = from_vector<float>({0.5f, 0.5f}, {1, 2});
  EXPECT_NEAR(soft_target_cross_entropy(zero, half).item(), std::log(2.0), 1e-6);
}

TEST(TrainDatasets, Cifar10Binary) {
  TempDir tmp("cifar");
  // 5 train files of 6 records and a test file of 9: labels 0..2, colour by label.
  auto write = [&](const std::string& name, int n, int seed0) {
    std::ofstream f(tmp.root() / name, std::ios::binary);
    for (int i = 0; i < n; ++i) {
      const int k = i % 3;
      const Tensor img = color_image(k, 32, 32, seed0 + i);
      f.put(static_cast<char>(k));
      f.write(static_cast<const char*>(img.data_ptr()), 3 * 32 * 32);
    }
  };
  for (int b = 1; b <= 5; ++b) write("data_batch_" + std::to_string(b) + ".bin", 6, b * 10);
  write("test_batch.bin", 9, 99);

  // Resized to 28 x 28 for fmnist_cnn, with CIFAR's random crop (padding 4) and flips.
  Config c = base_config();
  c.set_overrides({
      "data.dataset=cifar10",
      "data.data_dir=\"" + tmp.root().string() + "\"",
      "data.num_classes=10",
      "train.batch_size=10",  // 30 images, 3 iters per epoch
      "solver.max_epoch=4",
      "train.aug.random_crop.enable=true",
      "train.aug.random_crop.padding=4",
      "train.aug.hflip=0.5",
  });
  const TrainSummary s = run_training(c, tmp.root() / "run");
  EXPECT_EQ(s.iters, 12);
  EXPECT_GT(s.metric("top1"), 60.0);  // 3 colours; chance is 33% at best
  int vals = 0;
  for (const auto& j : read_jsonl(tmp.root() / "run" / "metrics.jsonl"))
    if (json_string(j, "split") == "val") {
      EXPECT_EQ(json_int(j, "images"), 9);
      ++vals;
    }
  EXPECT_EQ(vals, 4);
  const std::string html = slurp(tmp.root() / "run" / "report.html");
  EXPECT_TRUE(contains(html, "airplane")) << "CIFAR-10 class names";

  // At its own 32 x 32 without augmentation: the in-memory path, with resnet18_cifar.
  Config r = c;
  r.set_overrides({
      "network.model_name=resnet18_cifar",
      "data.input_size=[32, 32]",
      "train.aug.random_crop.enable=false",
      "train.aug.hflip=0.0",
      "train.batch_size=4",
      "solver.max_iters=2",
      "val.max_images=4",
  });
  const TrainSummary rs = run_training(r, tmp.root() / "run_resnet");
  EXPECT_EQ(rs.iters, 2);
  // 4 val images: top-1 is a whole number of them, in percent.
  const double top1 = rs.metric("top1");
  EXPECT_TRUE(top1 >= 0.0 && top1 <= 100.0 && std::fmod(top1, 25.0) == 0.0) << top1;
  EXPECT_EQ(json_int(read_jsonl(tmp.root() / "run_resnet" / "metrics.jsonl").back(), "images"), 4);

  // Errors name the key: the wrong class count, a missing directory.
  Config n = c;
  n.set_override("data.num_classes=3");
  EXPECT_TRUE(contains(error_of([&] { run_training(n, tmp.root() / "x"); }),
                       "data.num_classes: cifar10 has 10 classes, got 3"));
  Config m = c;
  m.set_override("data.data_dir=\"" + (tmp.root() / "nowhere").string() + "\"");
  const std::string missing = error_of([&] { run_training(m, tmp.root() / "x"); });
  EXPECT_TRUE(contains(missing, "--set: data.data_dir")) << missing;
  EXPECT_TRUE(contains(missing, "data_batch_1.bin")) << missing;
}

TEST(TrainDatasets, CorruptImagesAreSkippedAndCountedOrNamed) {
  TempDir tmp("corrupt");
  write_folder(tmp.root() / "train", 8, 0);
  write_folder(tmp.root() / "val", 2, 100);
  const fs::path bad = tmp.root() / "train" / "b_green" / "zz_corrupt.png";
  std::ofstream(bad, std::ios::binary) << "\x89PNG\r\n\x1a\n this is not a PNG";

  Config c = folder_config(tmp.root() / "train", tmp.root() / "val");
  c.set_overrides({
      "train.batch_size=5",  // 25 files, every one read in the epoch
      "solver.max_epoch=1",
      "data.skip_corrupt=true",
  });
  const TrainSummary s = run_training(c, tmp.root() / "run");
  EXPECT_EQ(s.iters, 5);
  EXPECT_EQ(s.skipped, 1);
  const auto lines = read_jsonl(tmp.root() / "run" / "metrics.jsonl");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(json_string(lines.back(), "split"), "val");
  EXPECT_EQ(json_int(lines.back(), "skipped"), 1);
  EXPECT_EQ(json_int(lines.back(), "images"), 6);

  // The log line names the count and the file.
  std::ostringstream log;
  {
    Trainer t(c, {.out_dir = (tmp.root() / "run_log").string(),
                  .progress = ProgressMode::lines,
                  .log = &log});
    t.run();
  }
  EXPECT_TRUE(contains(log.str(), "skipped 1 corrupt images")) << log.str();
  EXPECT_TRUE(contains(log.str(), "zz_corrupt.png")) << log.str();

  c.set_override("data.skip_corrupt=false");
  const std::string msg = error_of([&] { run_training(c, tmp.root() / "run2"); });
  EXPECT_TRUE(contains(msg, bad.string())) << msg;
}
