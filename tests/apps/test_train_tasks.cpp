// Detection, segmentation and pose end to end on tiny generated scenes: a few
// iterations of tcv-train (val rows with the task's metrics, `best` by the
// task's metric, report pictures), a resume that ends bit for bit where an
// uninterrupted run does, tcv-predict's pictures and JSON, and an evaluation
// of the same weights by two processes under tcv-run equal to one process's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "apps/process.h"
#include "data/det/voc.h"
#include "data/image.h"
#include "data/label_png.h"
#include "data/seg/colorize.h"
#include "data/seg/dataset.h"
#include "engine/json.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "support/png_builder.h"
#include "support/run_files.h"
#include "support/scenes_configs.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;

namespace {

using tcv::testing::contains;
using tcv::testing::expect_bitwise_equal;
using tcv::testing::kScenesDet;
using tcv::testing::kScenesPose;
using tcv::testing::kScenesSeg;
using tcv::testing::read_jsonl;
using tcv::testing::split_rows;

TrainSummary run_training(const Config& c, const fs::path& out) {
  Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
  return t.run();
}

// A config of `task` on tiny scenes in `scenes` (made on first use).
Config tiny(const std::string& toml, const fs::path& scenes, int64_t iters) {
  Config c = Config::from_string(toml, "tiny.toml");
  c.set_override("data.data_dir=\"" + scenes.string() + "\"");
  c.set_override("solver.max_iters=" + std::to_string(iters));
  return c;
}

// Makes the tiny scenes of `toml` in `scenes` (a trainer builds its data on
// construction) and returns their folder.
fs::path make_scenes(const std::string& toml, const fs::path& scenes, const fs::path& out) {
  Trainer t(tiny(toml, scenes, 1), {.out_dir = out.string(), .progress = ProgressMode::quiet});
  return scenes;
}

// The test phase's row for `results` (a file or folder) under config `c`.
Value evaluate_results(const Config& c, const std::string& results, const fs::path& out) {
  return Trainer(c, {.phase = Phase::test,
                     .results = results,
                     .out_dir = out.string(),
                     .progress = ProgressMode::quiet})
      .run()
      .val;
}

// Runs 2 iterations, resumes to 3 and checks the resumed weights against 3
// uninterrupted iterations; returns the run directory of the 3 iterations.
fs::path train_and_resume(const std::string& toml, const fs::path& root) {
  const fs::path scenes = root / "scenes", a = root / "a", b = root / "b";
  const TrainSummary s2 = run_training(tiny(toml, scenes, 2), a);
  EXPECT_EQ(s2.iters, 2);
  Config r = tiny(toml, scenes, 3);
  r.set_override("network.resume=\"" + (a / "checkpoints/latest.safetensors").string() + "\"");
  const TrainSummary s3 = run_training(r, a);
  EXPECT_EQ(s3.start_iter, 2);
  EXPECT_EQ(s3.iters, 3);
  run_training(tiny(toml, scenes, 3), b);
  expect_bitwise_equal(a / "checkpoints/latest.safetensors", b / "checkpoints/latest.safetensors");
  // Each iteration logged once, a val row at each.
  std::vector<int64_t> iters;
  for (const auto& j : split_rows(a, "val")) iters.push_back(j.at("iter").get<int64_t>());
  EXPECT_EQ(iters, (std::vector<int64_t>{1, 2, 3}));
  return a;
}

// The run's val rows, each with the numbers `numbers`, 4 images scored, and
// `fractions` (a subset of numbers) in [0, 1].
std::vector<Json> checked_val_rows(const fs::path& run, std::initializer_list<const char*> numbers,
                                   std::initializer_list<const char*> fractions) {
  auto rows = split_rows(run, "val");
  for (const auto& j : rows) {
    for (const char* k : numbers)
      EXPECT_TRUE(j.contains(k) && j.at(k).is_number()) << k << " in " << j.dump();
    EXPECT_EQ(j.value("images", int64_t{-1}), 4);
    for (const char* k : fractions) {
      const double v = j.contains(k) && j.at(k).is_number() ? j.at(k).get<double>() : -1.0;
      EXPECT_TRUE(v >= 0 && v <= 1) << k << " " << v;
    }
  }
  return rows;
}

#ifdef TCV_PREDICT
// tcv-predict with the run's config, `checkpoint` and `args`, its output in
// the temp dir's `log`.
tcv::testing::RunResult run_predict(const tcv::testing::TempDir& tmp, const fs::path& run,
                                    const fs::path& checkpoint, std::vector<std::string> args,
                                    const std::string& log = "predict.log") {
  std::vector<std::string> argv = {TCV_PREDICT, "--checkpoint", checkpoint.string(), "--config",
                                   (run / "config.toml").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return tcv::testing::run_process(argv, tmp.path(log));
}
#endif

// The run's report.html holds every one of `phrases`.
void expect_report_with(const fs::path& run, std::initializer_list<const char*> phrases) {
  const std::string html = tcv::testing::read_text((run / "report.html").string());
  for (const char* p : phrases) EXPECT_TRUE(contains(html, p)) << p << " (" << html.size() << " B)";
}

// The first val row of `run` resumed (its iterations done: evaluation only)
// with the test-phase `overrides`, in the temp dir's "ms".
Json resumed_val_row(const std::string& toml, const fs::path& root, const fs::path& run,
                     std::initializer_list<const char*> overrides) {
  Config c = tiny(toml, root / "scenes", 3);
  c.set_override("network.resume=\"" + run.string() + "\"");
  for (const char* o : overrides) c.set_override(o);
  run_training(c, root / "ms");
  return split_rows(root / "ms", "val").at(0);
}

// `best` is the first evaluation with the highest `metric`.
void expect_best_by(const fs::path& run, const std::string& metric) {
  double best = -1;
  int64_t best_iter = -1;
  for (const auto& j : split_rows(run, "val"))
    if (j.at(metric).get<double>() > best) {
      best = j.at(metric).get<double>();
      best_iter = j.at("iter").get<int64_t>();
    }
  const TrainerState s = load_trainer_state((run / "checkpoints/best").string());
  EXPECT_EQ(s.best_metric, metric);
  EXPECT_EQ(s.iter, best_iter);
  EXPECT_DOUBLE_EQ(s.best_score, best);
  const TrainerState latest = load_trainer_state((run / "checkpoints/latest").string());
  EXPECT_DOUBLE_EQ(latest.best_score, best);
}

std::vector<Json> test_rows(const fs::path& run) {
  std::vector<Json> v;
  for (auto& j : read_jsonl(run / "metrics.jsonl"))
    if (j.at("split").get<std::string>() == "test") v.push_back(j);
  return v;
}

// The test phase on the latest weights of `run` (trained to `iter`), with one
// process and with two under tcv-run; returns both test rows. The one-process
// row equals the training's own val row for those weights, key for key.
std::pair<Json, Json> evaluate_1_and_2(const std::string& toml, const fs::path& root,
                                       const fs::path& run, int64_t iter) {
  const std::string resume =
      "network.resume=\"" + (run / "checkpoints/latest.safetensors").string() + "\"";
  Config one = tiny(toml, root / "scenes", iter);
  one.set_override(resume);
  Trainer(one, {.phase = Phase::test,
                .out_dir = (root / "eval1").string(),
                .progress = ProgressMode::quiet,
                .log = nullptr})
      .run();
  const auto ones = test_rows(root / "eval1");
  EXPECT_EQ(ones.size(), 1u);
  Json trained;
  for (const Json& j : split_rows(run, "val"))
    if (j.at("iter").get<int64_t>() == iter) trained = j;
  EXPECT_FALSE(trained.is_null());
  Json tested = ones.at(0);
  EXPECT_EQ(tested.at("checkpoint").get<std::string>(),
            (run / "checkpoints/latest.safetensors").string());
  for (const char* k : {"split", "time", "checkpoint"}) {
    tested.erase(k);
    trained.erase(k);
  }
  EXPECT_EQ(tested, trained);
  // The predictions the test phase wrote, read back as results, score what
  // the model scored (detection's mAP, pose's AP, segmentation's mIoU).
  for (const auto& [file, metric] :
       {std::pair{"detections.json", "map"}, {"keypoints.json", "ap"}, {"predictions", "miou"}}) {
    const fs::path written = root / "eval1" / file;
    const std::string f = file;
    const bool expected = f == "detections.json"  ? toml == kScenesDet
                          : f == "keypoints.json" ? toml == kScenesPose
                                                  : toml == kScenesSeg;
    EXPECT_EQ(fs::exists(written), expected) << written;
    if (!expected || !fs::exists(written)) continue;
    const Json again = to_json(
        Trainer(tiny(toml, root / "scenes", iter), {.phase = Phase::test,
                                                    .results = written.string(),
                                                    .out_dir = (root / "eval_results").string(),
                                                    .progress = ProgressMode::quiet})
            .run()
            .val);
    EXPECT_NEAR(again.at(metric).get<double>(), ones.at(0).at(metric).get<double>(), 1e-12) << file;
    EXPECT_EQ(again.at("images"), ones.at(0).at("images"));
  }
  Json two;
#if defined(TCV_RUN) && defined(TCV_TRAIN)
  const fs::path cfg = root / "eval.toml";
  std::ofstream(cfg) << toml;
  const auto r =
      tcv::testing::run_process({TCV_RUN,
                                 "--nproc-per-node",
                                 "2",
                                 "--",
                                 TCV_TRAIN,
                                 "--config",
                                 cfg.string(),
                                 "--phase",
                                 "test",
                                 "--out",
                                 (root / "eval2").string(),
                                 "--set",
                                 "data.data_dir=\"" + (root / "scenes").string() + "\"",
                                 "--set",
                                 "solver.max_iters=" + std::to_string(iter),
                                 "--set",
                                 resume,
                                 "--set",
                                 "network.distributed=true",
                                 "--set",
                                 "network.timeout=60"},
                                (root / "eval2.log").string(), std::chrono::seconds(300));
  EXPECT_EQ(r.status, 0) << r.output;
  const auto rows = test_rows(root / "eval2");
  EXPECT_EQ(rows.size(), 1u) << r.output;
  if (!rows.empty()) two = rows.front();
#endif
  return {ones.at(0), two};
}

}  // namespace

TEST(TrainTasks, DetectionTrainsResumesPredictsAndEvaluatesOnTwoRanks) {
  tcv::testing::TempDir tmp("det_task");
  const fs::path run = train_and_resume(kScenesDet, tmp.root());

  // Val rows: the configured mAP, AP50, per-class AP, the loss and the images.
  const auto rows = checked_val_rows(run, {"map", "ap50", "map_voc07", "map_voc", "loss"}, {"map"});
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& j : rows) {
    EXPECT_DOUBLE_EQ(j.at("map").get<double>(), j.at("map_voc07").get<double>());  // val.metric
    ASSERT_TRUE(j.at("class_ap").is_object());
    EXPECT_EQ(j.at("class_ap").size(), 10u);
  }
  expect_best_by(run, "map");
  const TrainerState latest = load_trainer_state((run / "checkpoints/latest").string());
  EXPECT_EQ(latest.task, "det");
  EXPECT_EQ(latest.best_metric, "map");
  expect_report_with(
      run, {"validation mAP", "Validation detections", "<figcaption>detections</figcaption>"});

#ifdef TCV_PREDICT
  // tcv-predict draws each image's boxes and prints them.
  const fs::path images = tmp.root() / "scenes" / "JPEGImages";
  const auto p =
      run_predict(tmp, run, run / "checkpoints/best.safetensors",
                  {"--json", "--out", (tmp.root() / "pred").string(), "--score-threshold", "0",
                   (images / "000009.jpg").string(), (images / "000010.jpg").string()});
  ASSERT_EQ(p.status, 0) << p.output;
  const Json j = json_parse(p.output.substr(p.output.find("{\n")));
  ASSERT_EQ(j.at("predictions").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Json& e = j.at("predictions")[i];
    EXPECT_TRUE(e.at("detections").is_array());
    EXPECT_TRUE(fs::exists(e.at("picture").get<std::string>())) << e.dump();
    for (const auto& d : e.at("detections")) {
      EXPECT_EQ(d.at("box").size(), 4u);
      EXPECT_GE(d.at("label").get<int64_t>(), 1);
      EXPECT_LE(d.at("label").get<int64_t>(), 10);
    }
  }
  EXPECT_TRUE(fs::exists(tmp.root() / "pred" / "000009_det.png"));
#endif

  // Detections of both ranks gathered: the same numbers as one process.
  const auto [one, two] = evaluate_1_and_2(kScenesDet, tmp.root(), run, 3);
  EXPECT_EQ(one.at("images").get<int64_t>(), 4);
  if (!two.is_null()) {
    EXPECT_EQ(two.at("images").get<int64_t>(), 4);
    for (const char* k : {"map", "ap50", "map_voc"})
      EXPECT_NEAR(two.at(k).get<double>(), one.at(k).get<double>(), 1e-9) << k;
    EXPECT_EQ(two.at("class_ap"), one.at("class_ap"));
  }
}

// Issue 25, item 3, end to end: an 18000 x 18000 PNG of a few hundred bytes
// among the val images (its XML saying so) made training allocate 10.9 GB and
// fail with "[CpuAllocator] out of memory", naming no file. It stops training
// now from the image's header, naming the file, its size and data.max_pixels,
// or with data.skip_corrupt it is skipped and counted.
TEST(TrainTasks, DecompressionBombsStopTrainingNamingFileSizeAndKey) {
  tcv::testing::TempDir tmp("det_bomb");
  const fs::path scenes = make_scenes(kScenesDet, tmp.root() / "scenes", tmp.root() / "setup");
  const fs::path image = scenes / "JPEGImages" / "000009.jpg",
                 xml = scenes / "Annotations" / "000009.xml";
  ASSERT_TRUE(fs::exists(image) && fs::exists(xml));
  data::VocAnnotation a = data::parse_voc_annotation(tcv::testing::read_text(xml.string()), "xml");
  a.width = a.height = 18000;
  data::write_file(xml.string(), data::format_voc_annotation(a));
  data::write_file(image.string(), tcv::testing::png_claiming(
                                       data::encode_image(zeros({3, 2, 2}, {.dtype = DType::u8}),
                                                          data::ImageFormat::png),
                                       18000, 18000));
  const std::string msg = tcv::testing::error_of(
      [&] { run_training(tiny(kScenesDet, scenes, 1), tmp.root() / "run"); });
  EXPECT_TRUE(contains(msg, image.string() + ": image is 18000x18000 (width x height, 324000000 "
                                             "pixels), more than data.max_pixels = 178956970"))
      << msg;
  Config skip = tiny(kScenesDet, scenes, 1);
  skip.set_override("data.skip_corrupt=true");
  const TrainSummary s = run_training(skip, tmp.root() / "run_skip");
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.val.at("images").as_int(), 3);
}

// Issue 25, item 8: an empty val set was accepted silently (mIoU 0 and a
// `best` saved), and an empty training set was blamed on train.batch_size.
// Both are refused now, naming the data set.
TEST(TrainTasks, EmptySplitsAreRefusedNamingTheDataSet) {
  tcv::testing::TempDir tmp("seg_empty");
  const fs::path scenes = make_scenes(kScenesSeg, tmp.root() / "scenes", tmp.root() / "setup");
  const fs::path lists = scenes / "ImageSets" / "Segmentation";
  const std::string val = tcv::testing::read_text((lists / "val.txt").string());
  const std::string train = tcv::testing::read_text((lists / "train.txt").string());
  data::write_file((lists / "val.txt").string(), "");
  std::string msg = tcv::testing::error_of(
      [&] { run_training(tiny(kScenesSeg, scenes, 1), tmp.root() / "run"); });
  EXPECT_TRUE(contains(msg, "data.dataset = \"scenes\": the validation set ") &&
              contains(msg, scenes.string()) &&
              contains(msg, " has no images (8 train / 0 val images"))
      << msg;
  EXPECT_FALSE(fs::exists(tmp.root() / "run" / "checkpoints" / "best.safetensors"));
  data::write_file((lists / "val.txt").string(), val);
  data::write_file((lists / "train.txt").string(), "");
  msg = tcv::testing::error_of(
      [&] { run_training(tiny(kScenesSeg, scenes, 1), tmp.root() / "run"); });
  EXPECT_TRUE(contains(msg, "data.dataset = \"scenes\": the training set ") &&
              contains(msg, " has no images (0 train / 4 val images") &&
              !contains(msg, "train.batch_size"))
      << msg;
  data::write_file((lists / "train.txt").string(), train);
}

TEST(TrainTasks, SegmentationTrainsResumesPredictsAndEvaluatesOnTwoRanks) {
  tcv::testing::TempDir tmp("seg_task");
  const fs::path run = train_and_resume(kScenesSeg, tmp.root());

  const auto rows = checked_val_rows(run, {"miou", "pixel_acc", "mean_acc", "loss"}, {"miou"});
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& j : rows) {
    ASSERT_TRUE(j.at("class_iou").is_object());
    EXPECT_EQ(j.at("class_iou").size(), 11u);
    EXPECT_TRUE(j.at("class_iou").contains("background"));
  }
  expect_best_by(run, "miou");
  expect_report_with(run, {"validation mIoU", "<figcaption>ground truth</figcaption>"});

#ifdef TCV_PREDICT
  // tcv-predict writes an overlay and the label PNG (class indices) per image.
  const fs::path images = tmp.root() / "scenes" / "JPEGImages";
  const auto p = run_predict(
      tmp, run, run, {"--out", (tmp.root() / "pred").string(), (images / "000009.jpg").string()});
  ASSERT_EQ(p.status, 0) << p.output;
  EXPECT_TRUE(contains(p.output, "000009.jpg: 64x64")) << p.output;
  EXPECT_TRUE(fs::exists(tmp.root() / "pred" / "000009_overlay.png"));
  const auto label = data::read_label_png((tmp.root() / "pred" / "000009_label.png").string());
  EXPECT_EQ(label.labels.size(0), 64);
  for (int64_t v : label.labels.to(DType::i64).to_vector<int64_t>()) EXPECT_LT(v, 11);
  // Cityscapes label ids only for Cityscapes configs.
  const auto bad = run_predict(tmp, run, run, {"--label-ids", (images / "000009.jpg").string()},
                               "predict_bad.log");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--label-ids")) << bad.output;
#endif

  // Sliding windows over two scales and the flip: a number between 0 and 1.
  const double ms_miou = resumed_val_row(kScenesSeg, tmp.root(), run,
                                         {"test.mode=\"mscrop_test\"", "test.crop_size=[48, 48]",
                                          "test.scale_search=[0.75, 1.0]"})
                             .at("miou")
                             .get<double>();
  EXPECT_TRUE(ms_miou >= 0 && ms_miou <= 1) << ms_miou;

  // The confusion matrices of both ranks summed, each image counted once (4
  // images on 2 ranks in batches of 3: no padding; 3 per rank would pad).
  const auto [one, two] = evaluate_1_and_2(kScenesSeg, tmp.root(), run, 3);
  if (!two.is_null()) {
    EXPECT_EQ(two.at("images").get<int64_t>(), 4);
    for (const char* k : {"miou", "pixel_acc", "mean_acc"})
      EXPECT_NEAR(two.at(k).get<double>(), one.at(k).get<double>(), 1e-12) << k;
  }
}

TEST(TrainTasks, PoseTrainsResumesPredictsAndEvaluatesOnTwoRanks) {
  tcv::testing::TempDir tmp("pose_task");
  const fs::path run = train_and_resume(kScenesPose, tmp.root());

  // Val rows: COCO's keypoint AP and AR, the loss, images and people found.
  const auto rows = checked_val_rows(run, {"ap", "ap50", "ap75", "ar", "ar50", "ar75", "loss"},
                                     {"ap", "ap50", "ar"});
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& j : rows) {
    for (const char* k : {"ap_medium", "ap_large", "ar_medium", "ar_large"})
      EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_GE(j.at("people").get<int64_t>(), 0);
    EXPECT_GE(j.at("ap50").get<double>(), j.at("ap75").get<double>());
    EXPECT_GT(j.at("loss").get<double>(), 0);
  }
  expect_best_by(run, "ap");
  EXPECT_EQ(load_trainer_state((run / "checkpoints/latest").string()).task, "pose");
  expect_report_with(run, {"validation keypoint AP", "Validation skeletons",
                           "<figcaption>ground truth</figcaption>"});

#ifdef TCV_PREDICT
  // tcv-predict draws the skeletons and lists the people in COCO's results format.
  const fs::path images = tmp.root() / "scenes" / "images";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(images)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 2u);
  const auto p = run_predict(
      tmp, run, run / "checkpoints/best.safetensors",
      {"--json", "--out", (tmp.root() / "pred").string(), files[0].string(), files[1].string()});
  ASSERT_EQ(p.status, 0) << p.output;
  const Json j = json_parse(p.output.substr(p.output.find("{\n")));
  ASSERT_EQ(j.at("predictions").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Json& e = j.at("predictions")[i];
    EXPECT_EQ(e.at("height").get<int64_t>(), 128);
    EXPECT_EQ(e.at("width").get<int64_t>(), 128);
    ASSERT_TRUE(e.at("people").is_array());
    const std::string stem = files[i].stem().string();
    EXPECT_EQ(e.at("picture").get<std::string>(),
              (tmp.root() / "pred" / (stem + "_pose.png")).string());
    EXPECT_TRUE(fs::exists(e.at("picture").get<std::string>()));
    for (const auto& person : e.at("people")) {
      EXPECT_EQ(person.at("image_id").get<int64_t>(), std::stoll(stem));
      EXPECT_EQ(person.at("category_id").get<int64_t>(), 1);
      const Json& kp = person.at("keypoints");
      ASSERT_EQ(kp.size(), 51u);
      int64_t found = 0;
      for (size_t k = 0; k < 17; ++k) {
        const double v = kp[3 * k + 2].get<double>();
        EXPECT_TRUE(v == 0 || v == 1) << v;
        if (v == 0) continue;
        ++found;
        EXPECT_TRUE(kp[3 * k].get<double>() >= -0.5 && kp[3 * k].get<double>() < 128);
        EXPECT_TRUE(kp[3 * k + 1].get<double>() >= -0.5 && kp[3 * k + 1].get<double>() < 128);
      }
      // The neck is found but is not one of COCO's keypoints.
      EXPECT_LE(found, person.at("num_keypoints").get<int64_t>());
      EXPECT_GE(person.at("num_keypoints").get<int64_t>(), 1);
      EXPECT_TRUE(person.at("score").is_number());
    }
  }
  // The picture is the image with skeletons drawn over it, at its size.
  const Tensor pic =
      data::read_image((tmp.root() / "pred" / (files[0].stem().string() + "_pose.png")).string(),
                       data::ImageMode::rgb);
  EXPECT_EQ(pic.shape(), (Shape{3, 128, 128}));
  // Text output names the people.
  const auto t = run_predict(tmp, run, run, {files[0].string()}, "predict_text.log");
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_TRUE(contains(t.output, files[0].string() + ": ")) << t.output;
  EXPECT_TRUE(contains(t.output, "(ss_test)")) << t.output;
#endif

  // Multi-scale inference: a number between 0 and 1.
  const Json msrow = resumed_val_row(kScenesPose, tmp.root(), run,
                                     {"test.mode=\"ms_test\"", "test.scale_search=[0.75, 1.0]"});
  EXPECT_TRUE(msrow.at("ap").get<double>() >= 0 && msrow.at("ap").get<double>() <= 1);
  EXPECT_EQ(msrow.at("images").get<int64_t>(), 4);

  // The people of both ranks combined: the same numbers as one process.
  const auto [one, two] = evaluate_1_and_2(kScenesPose, tmp.root(), run, 3);
  EXPECT_EQ(one.at("images").get<int64_t>(), 4);
  if (!two.is_null()) {
    EXPECT_EQ(two.at("images").get<int64_t>(), 4);
    EXPECT_EQ(two.at("people").get<int64_t>(), one.at("people").get<int64_t>());
    for (const char* k : {"ap", "ap50", "ap75", "ar", "ar50", "ar75"})
      EXPECT_NEAR(two.at(k).get<double>(), one.at(k).get<double>(), 1e-12) << k;
    // Mean of the per-image losses: f32 sums of different batches.
    EXPECT_NEAR(two.at("loss").get<double>(), one.at("loss").get<double>(),
                1e-5 * one.at("loss").get<double>());
  }
}

TEST(TrainTasks, AKeyOfAnotherTaskNamesItsTask) {
  Config c = Config::from_string(kScenesSeg, "seg.toml");
  c.set_override("anchor.iou_threshold=0.4");
  const std::string msg = tcv::testing::error_of([&] { c.validate(); });
  EXPECT_TRUE(contains(msg,
                       "anchor.iou_threshold: the key belongs to task det; this config has task = "
                       "\"seg\""))
      << msg;
  Config d = Config::from_string(kScenesDet, "det.toml");
  d.set_override("test.mode=\"ms_test\"");
  EXPECT_TRUE(
      contains(tcv::testing::error_of([&] { d.validate(); }), "belongs to tasks seg and pose"));
  d = Config::from_string(kScenesDet, "det.toml");
  d.set_override("loss.label_smoothing=0.1");
  EXPECT_TRUE(contains(tcv::testing::error_of([&] { d.validate(); }), "belongs to task cls"));
  // A classifier in a detection config names the detection models.
  tcv::testing::TempDir tmp("task_keys");
  d = tiny(kScenesDet, tmp.root() / "scenes", 1);
  d.set_override("network.model_name=\"resnet18\"");
  const std::string m = tcv::testing::error_of(
      [&] { Trainer t(d, {.out_dir = tmp.path("run"), .progress = ProgressMode::quiet}); });
  EXPECT_TRUE(contains(m, "not a detection model") && contains(m, "ssd300_lite")) << m;
}

// The test phase evaluates a named checkpoint of the config's model and task:
// none, "auto", or another model's checkpoint is refused before any image is
// evaluated, naming network.resume; an empty training split does not matter.
TEST(TrainTasks, TestPhaseNeedsACheckpointOfTheConfigsModel) {
  tcv::testing::TempDir tmp("test_phase");
  const fs::path scenes = tmp.root() / "scenes";
  const TrainOptions test{
      .phase = Phase::test, .out_dir = tmp.path("t"), .progress = ProgressMode::quiet};
  std::string msg = tcv::testing::error_of([&] { Trainer(tiny(kScenesDet, scenes, 1), test); });
  EXPECT_TRUE(contains(msg, "network.resume: the test phase evaluates a checkpoint; name it"))
      << msg;
  Config c = tiny(kScenesDet, scenes, 1);
  c.set_override("network.resume=\"auto\"");
  msg = tcv::testing::error_of([&] { Trainer(c, test); });
  EXPECT_TRUE(contains(msg, "network.resume: the test phase evaluates a checkpoint")) << msg;

  run_training(tiny(kScenesDet, scenes, 1), tmp.root() / "det");
  c = tiny(kScenesDet, scenes, 1);
  c.set_override("network.model_name=\"ssd300\"");
  c.set_override("network.resume=\"" + tmp.path("det") + "\"");
  msg = tcv::testing::error_of([&] { Trainer(c, test); });
  EXPECT_TRUE(contains(msg, "network.resume: checkpoint ") &&
              contains(msg, "holds a \"ssd300_lite\", but network.model_name is \"ssd300\""))
      << msg;

  const fs::path list = scenes / "ImageSets" / "Main" / "train.txt";
  const std::string train = tcv::testing::read_text(list.string());
  data::write_file(list.string(), "");
  c = tiny(kScenesDet, scenes, 1);
  c.set_override("network.resume=\"" + tmp.path("det") + "\"");
  const TrainSummary s = Trainer(c, test).run();
  EXPECT_EQ(s.val.at("images").as_int(), 4);
  EXPECT_EQ(s.iters, 1);
  EXPECT_EQ(test_rows(tmp.root() / "t").size(), 1u);
  EXPECT_FALSE(fs::exists(tmp.root() / "t" / "checkpoints"));
  data::write_file(list.string(), train);
}

// --results: a COCO results file evaluated against the val split with no
// model. The val ground truth as detections scores 1 (VOC07 and COCO); one
// image's detections left out scores less; an image the val split does not
// have is named with the file.
TEST(TrainTasks, ResultsFileIsEvaluatedAgainstTheValSplit) {
  tcv::testing::TempDir tmp("det_results");
  const fs::path scenes = make_scenes(kScenesDet, tmp.root() / "scenes", tmp.root() / "setup");
  const data::DetDataset val = data::read_voc({.roots = {scenes.string()}, .split = "val"});
  ASSERT_EQ(val.size(), 4);
  auto write_results = [&](int64_t skip_image, int64_t extra_image) {
    Json res = Json::array();
    for (const data::DetRecord& r : val.records()) {
      if (r.image_id == skip_image) continue;
      for (int64_t k = 0; k < r.target.size(); ++k) {
        const data::Box& b = r.target.boxes[static_cast<size_t>(k)];
        res.push_back({{"image_id", r.image_id},
                       {"category_id", r.target.labels[static_cast<size_t>(k)]},
                       {"bbox", {b[0], b[1], b[2] - b[0], b[3] - b[1]}},
                       {"score", 1.0}});
      }
    }
    if (extra_image >= 0)
      res.push_back(
          {{"image_id", extra_image}, {"category_id", 1}, {"bbox", {0, 0, 5, 5}}, {"score", 0.5}});
    const std::string path = tmp.path("results.json");
    data::write_file(path, json_dump(res));
    return path;
  };
  auto evaluate = [&](const std::string& metric, const std::string& file) {
    Config c = tiny(kScenesDet, scenes, 1);
    c.set_override("val.metric=\"" + metric + "\"");
    return evaluate_results(c, file, tmp.root() / "t");
  };
  const std::string all = write_results(-1, -1);
  for (const char* metric : {"voc07", "coco"}) {
    const Value row = evaluate(metric, all);
    EXPECT_DOUBLE_EQ(row.at("map").as_double(), 1.0) << metric << " " << row.dump();
    EXPECT_EQ(row.at("images").as_int(), 4);
    EXPECT_FALSE(row.contains("loss"));
  }
  const std::vector<Json> rows = test_rows(tmp.root() / "t");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("results").get<std::string>(), all);
  EXPECT_FALSE(rows[0].contains("iter"));

  const Value less = evaluate("voc07", write_results(val.records()[0].image_id, -1));
  EXPECT_LT(less.at("map").as_double(), 1.0);
  EXPECT_GT(less.at("map").as_double(), 0.0);

  const std::string msg =
      tcv::testing::error_of([&] { evaluate("voc07", write_results(-1, 999)); });
  EXPECT_TRUE(contains(msg, tmp.path("results.json") + ": detection ") &&
              contains(msg, ": image id 999 is not among the ground truth's 4 images"))
      << msg;
}

// --results for pose: a COCO keypoint results file against the val split. The
// val annotations' own people, as results, score AP 1; an entry of another
// category is named.
TEST(TrainTasks, KeypointResultsFileIsEvaluatedAgainstTheValSplit) {
  tcv::testing::TempDir tmp("pose_results");
  const fs::path scenes = make_scenes(kScenesPose, tmp.root() / "scenes", tmp.root() / "setup");
  const Json gt = json_parse(
      tcv::testing::read_text((scenes / "annotations" / "person_keypoints_val.json").string()));
  Json res = Json::array();
  for (const Json& a : gt.at("annotations"))
    if (a.at("iscrowd").get<int64_t>() == 0 && a.at("num_keypoints").get<int64_t>() > 0)
      res.push_back({{"image_id", a.at("image_id")},
                     {"category_id", 1},
                     {"keypoints", a.at("keypoints")},
                     {"score", 1.0}});
  ASSERT_GT(res.size(), 0u);
  const std::string file = tmp.path("results.json");
  data::write_file(file, json_dump(res));
  auto evaluate = [&] {
    return evaluate_results(tiny(kScenesPose, scenes, 1), file, tmp.root() / "t");
  };
  const Value row = evaluate();
  EXPECT_DOUBLE_EQ(row.at("ap").as_double(), 1.0) << row.dump();
  EXPECT_EQ(row.at("people").as_int(), static_cast<int64_t>(res.size()));
  EXPECT_FALSE(row.contains("loss"));
  res[0]["category_id"] = 2;
  data::write_file(file, json_dump(res));
  const std::string msg = tcv::testing::error_of([&] { evaluate(); });
  EXPECT_TRUE(contains(msg, file + ": detection 0: category id 2 is not the person category (1)"))
      << msg;
}

// --results for segmentation: a folder of label PNGs scored against the val
// split (cityscapesscripts' way). The val ground truth, its void band given
// the background, scores mIoU 1 (void pixels count nowhere); one image's
// prediction shifted a class scores less; a missing file is named.
TEST(TrainTasks, LabelPngFolderIsEvaluatedAgainstTheValSplit) {
  tcv::testing::TempDir tmp("seg_results");
  const fs::path scenes = make_scenes(kScenesSeg, tmp.root() / "scenes", tmp.root() / "setup");
  const data::SegDataset val = data::read_voc_seg({.root = scenes.string(), .split = "val"});
  ASSERT_EQ(val.size(), 4);
  const fs::path dir = tmp.root() / "pred";
  fs::create_directories(dir);
  for (const data::SegRecord& r : val.records()) {
    Tensor l = data::read_label_png(r.label_path).labels.clone();
    uint8_t* p = l.data<uint8_t>();
    for (int64_t k = 0; k < l.numel(); ++k)
      if (p[k] == 255) p[k] = 0;
    data::write_label_png((dir / (r.id + ".png")).string(), l);
  }
  auto evaluate = [&] {
    return evaluate_results(tiny(kScenesSeg, scenes, 1), dir.string(), tmp.root() / "t");
  };
  const Value row = evaluate();
  EXPECT_DOUBLE_EQ(row.at("miou").as_double(), 1.0) << row.dump();
  EXPECT_EQ(row.at("images").as_int(), 4);
  EXPECT_FALSE(row.contains("loss"));
  // Image 0's objects all predicted as background: less than 1.
  const data::SegRecord& first = val.records()[0];
  Tensor bg = zeros(data::read_label_png(first.label_path).labels.shape(), {.dtype = DType::u8});
  data::write_label_png((dir / (first.id + ".png")).string(), bg);
  EXPECT_LT(evaluate().at("miou").as_double(), 1.0);
  fs::remove(dir / (first.id + ".png"));
  const std::string msg = tcv::testing::error_of([&] { evaluate(); });
  EXPECT_TRUE(contains(msg, dir.string() + ": no prediction for ") &&
              contains(msg, first.id + ".png"))
      << msg;
}
