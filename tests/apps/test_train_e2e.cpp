// A short real training run in-process: fmnist_cnn on Fashion-MNIST for 30
// iterations, then a resume to 40, checked against an uninterrupted 40.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/dataset.h"
#include "data/idx.h"
#include "data/image.h"
#include "engine/json.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/predict.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;

namespace {

using tcv::testing::expect_bitwise_equal;
using tcv::testing::read_jsonl;
using tcv::testing::slurp;

using tcv::testing::source_dir;
using tcv::testing::write_small_fmnist;

Config short_run(int64_t max_iters) {
  Config c = Config::from_file(source_dir() + "/configs/cls/fmnist_cnn.toml");
  c.set_overrides({
      "solver.max_iters=" + std::to_string(max_iters),
      "solver.display_iter=10",
      "val.max_images=500",
      "solver.lr.is_warm=false",
  });
  // A schedule that does not depend on max_iters, stepping after the resume point.
  c.set_overrides({
      "solver.lr.lr_policy=step",
      "solver.lr.metric=iters",
      "solver.lr.step.step_size=35",
      "data.workers=1",
      "device=cpu",
  });
  return c;
}

}  // namespace

TEST(TrainE2E, ShortRunWritesArtifactsAndResumesExactly) {
  const tcv::testing::TempDir tmp("e2e");
  const fs::path root = tmp.root();
  const fs::path a = root / "a", b = root / "b";

  // ---- 30 iterations ----
  TrainSummary s1;
  {
    Trainer t(short_run(30),
              {.out_dir = a.string(), .progress = ProgressMode::quiet, .log = nullptr});
    s1 = t.run();
  }
  EXPECT_EQ(s1.iters, 30);
  EXPECT_EQ(s1.epochs, 0);
  EXPECT_GT(s1.metric("top1"), 40.0);  // chance is 10%
  EXPECT_GE(s1.metric("top5"), s1.metric("top1"));

  // metrics.jsonl: train lines at 10, 20, 30, one val line at the end.
  const auto lines = read_jsonl(a / "metrics.jsonl");
  std::vector<int64_t> train_iters;
  std::vector<double> losses;
  int vals = 0;
  for (const auto& j : lines) {
    if (json_string(j, "split") == "train") {
      train_iters.push_back(json_int(j, "iter"));
      losses.push_back(json_double(j, "loss"));
      EXPECT_EQ(json_int(j, "epoch"), 1);  // the first epoch
      EXPECT_GT(json_double(j, "images_per_sec"), 0.0);
      EXPECT_NEAR(json_double(j, "lr"), 0.05, 1e-12);
      EXPECT_GT(json_double(j, "time"), 0.0);
    } else {
      EXPECT_EQ(json_string(j, "split"), "val");
      EXPECT_EQ(json_int(j, "iter"), 30);
      EXPECT_EQ(json_int(j, "epoch"), 1);
      EXPECT_NEAR(json_double(j, "top1"), s1.metric("top1"), 1e-9);
      EXPECT_TRUE(j.contains("top5") && j.contains("loss") && j.contains("time"));
      ++vals;
    }
  }
  EXPECT_EQ(train_iters, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(vals, 1);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_LT(losses[2], losses[0]);
  EXPECT_LT(losses[2], 2.0);  // ln(10) = 2.30 at the start

  // config.toml is the resolved config and reads back.
  const Config resolved = Config::from_file((a / "config.toml").string());
  EXPECT_EQ(resolved.get_int("solver.max_iters"), 30);
  EXPECT_EQ(resolved.get_string("network.model_name"), "fmnist_cnn");

  // Checkpoints: latest and best, weights, optimizer and trainer state in one file.
  const fs::path ck = a / "checkpoints";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ck)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"best.safetensors", "latest.safetensors"}));
  const SafetensorsFile w = load_safetensors((ck / "latest.safetensors").string());
  const Json st = json_parse(w.metadata.at("trainer_state"));
  EXPECT_EQ(json_int(st, "iter"), 30);
  EXPECT_EQ(json_int(st, "epoch"), 0);
  EXPECT_EQ(json_int(st, "epoch_iter"), 30);
  EXPECT_NEAR(json_double(st, "best_top1"), s1.metric("top1"), 1e-9);
  int model_keys = 0, optim_keys = 0;
  for (const auto& [name, t] : w.tensors) {
    model_keys += name.rfind("model.", 0) == 0;
    optim_keys += name.rfind("optim.", 0) == 0;
  }
  EXPECT_GT(model_keys, 0);
  EXPECT_GT(optim_keys, 0);
  EXPECT_EQ(model_keys + optim_keys, static_cast<int>(w.tensors.size()));

  // ---- resume to 40 ----
  Config resume = short_run(40);
  resume.set_override("network.resume=\"" + (ck / "latest.safetensors").string() + "\"");
  TrainSummary s2;
  {
    Trainer t(resume, {.out_dir = a.string(), .progress = ProgressMode::quiet, .log = nullptr});
    s2 = t.run();
  }
  EXPECT_EQ(s2.start_iter, 30);
  EXPECT_EQ(s2.iters, 40);
  const auto after = read_jsonl(a / "metrics.jsonl");
  ASSERT_GT(after.size(), lines.size());
  std::vector<int64_t> new_train;
  for (size_t i = lines.size(); i < after.size(); ++i)
    if (json_string(after[i], "split") == "train") {
      new_train.push_back(json_int(after[i], "iter"));
      EXPECT_NEAR(json_double(after[i], "lr"), 0.005, 1e-12);  // stepped at 35
    }
  EXPECT_EQ(new_train, (std::vector<int64_t>{40}));

  // ---- the same 40 iterations without a break give the same weights ----
  {
    Trainer t(short_run(40),
              {.out_dir = b.string(), .progress = ProgressMode::quiet, .log = nullptr});
    t.run();
  }
  expect_bitwise_equal(ck / "latest.safetensors", b / "checkpoints" / "latest.safetensors");
}

TEST(TrainE2E, ConfigErrorsStopBeforeTraining) {
  Config c = short_run(5);
  c.set_override("network.model_name=no_such_model");
  const tcv::testing::TempDir tmp("e2e_bad");
  const fs::path out = tmp.root() / "run";
  try {
    Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fmnist_cnn"), std::string::npos) << e.what();
  }
  Config r = short_run(5);
  r.set_override("network.resume=/nonexistent/latest.safetensors");
  EXPECT_THROW(
      Trainer(r, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr}),
      Error);
  // Until the ops have CUDA kernels, asking for the GPU is a config error, not a crash mid-step.
  Config g = short_run(5);
  g.set_override("device=\"cuda\"");
  const std::string msg = tcv::testing::error_of([&] {
    Trainer t(g, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
  });
  EXPECT_NE(msg.find("device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
}

// Whole epochs on a 256-image slice of Fashion-MNIST: per-epoch evaluation,
// epoch checkpoints pruned to checkpoints.keep_last, `best` by top-1.
TEST(TrainE2E, EpochsCheckpointsAndKeepLast) {
  const tcv::testing::TempDir tmp("e2e_ep");
  const fs::path root = tmp.root();
  const fs::path data = root / "data", out = root / "run";
  write_small_fmnist(data, 256, 200);

  Config c = Config::from_file(source_dir() + "/configs/cls/fmnist_cnn.toml");
  c.set_overrides({
      "data.data_dir=\"" + data.string() + "\"",
      "solver.max_epoch=5",
      "solver.lr.warm.warm_iters=4",
      "solver.display_iter=2",
      "checkpoints.keep_last=2",
      "data.workers=2",
      "device=cpu",
  });
  TrainSummary s;
  {
    Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
    s = t.run();
  }
  EXPECT_EQ(s.epochs, 5);
  EXPECT_EQ(s.iters, 20);  // 256 / 64 = 4 per epoch

  std::vector<int64_t> val_epochs, val_iters;
  double best = -1;
  int64_t best_iter = -1;  // the first evaluation with the best top-1
  for (const auto& j : read_jsonl(out / "metrics.jsonl"))
    if (json_string(j, "split") == "val") {
      val_epochs.push_back(json_int(j, "epoch"));
      val_iters.push_back(json_int(j, "iter"));
      if (json_double(j, "top1") > best) best_iter = json_int(j, "iter");
      best = std::max(best, json_double(j, "top1"));
      EXPECT_EQ(json_int(j, "images"), 200);
    }
  EXPECT_EQ(val_epochs, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(val_iters, (std::vector<int64_t>{4, 8, 12, 16, 20}));
  EXPECT_NEAR(s.best_score, best, 1e-9);

  const fs::path ck = out / "checkpoints";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ck)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"best.safetensors", "epoch_0004.safetensors",
                                             "epoch_0005.safetensors", "latest.safetensors"}));
  const TrainerState latest = load_trainer_state((ck / "latest").string());
  EXPECT_EQ(latest.epoch, 5);
  EXPECT_EQ(latest.epoch_iter, 0);
  EXPECT_EQ(latest.iter, 20);
  EXPECT_NEAR(latest.best_score, best, 1e-9);
  EXPECT_NEAR(load_trainer_state((ck / "best").string()).best_score, best, 1e-9);
  EXPECT_EQ(load_trainer_state((ck / "best").string()).iter, best_iter);  // saved when reached
  // report.html: charts, the config, and sample validation images as PNG data URIs.
  const std::string html = slurp(out / "report.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  size_t svgs = 0, imgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  for (size_t p = html.find("<img alt=\"sample\" src=\"data:image/png;base64,iVBORw0KGgo");
       p != std::string::npos;
       p = html.find("<img alt=\"sample\" src=\"data:image/png;base64,iVBORw0KGgo", p + 1))
    ++imgs;
  EXPECT_EQ(svgs, 4u);
  EXPECT_EQ(imgs, 24u);
  EXPECT_NE(html.find("model_name = \"fmnist_cnn\""), std::string::npos);
  EXPECT_NE(html.find("keep_last = 2"), std::string::npos);
  EXPECT_NE(html.find("true: "), std::string::npos);
  // A run directory resolves to its latest checkpoint.
  EXPECT_EQ(resolve_checkpoint(out.string()), (ck / "latest").string());

  // tcv-predict's Predictor, from `best` and the run's resolved config, gets the
  // best top-1 again on the 200 test images, one image at a time.
  const Config resolved = Config::from_file((out / "config.toml").string());
  const Predictor pred(resolved, (ck / "best.safetensors").string());
  EXPECT_EQ(pred.in_channels(), 1);
  const auto test = data::ImageClassificationDataset::from_idx(
      (data / "t10k-images-idx3-ubyte").string(), (data / "t10k-labels-idx1-ubyte").string(), 10);
  int64_t correct = 0;
  const auto labels = test.labels().to_vector<int64_t>();
  for (int64_t i = 0; i < test.size(); ++i) {
    const auto top = pred.predict(test.images().select(0, i), 5);
    ASSERT_EQ(top.size(), 5u);
    double sum = 0;
    for (size_t r = 0; r < top.size(); ++r) {
      if (r) {
        EXPECT_GE(top[r - 1].prob, top[r].prob);
      }
      sum += top[r].prob;
    }
    EXPECT_LE(sum, 1.0 + 1e-5);
    correct += top[0].index == labels[static_cast<size_t>(i)];
  }
  EXPECT_NEAR(100.0 * static_cast<double>(correct) / static_cast<double>(test.size()), best, 1e-9);
  // A PNG of a test image predicts as the image itself; an RGB copy is taken to gray.
  const Tensor img0 = test.images().select(0, 0).contiguous();  // u8 (1, 28, 28)
  data::write_image((root / "img0.png").string(), img0);
  const auto from_file =
      pred.predict(data::read_image((root / "img0.png").string(), data::ImageMode::gray));
  const auto direct = pred.predict(img0);
  ASSERT_EQ(from_file.size(), direct.size());
  for (size_t r = 0; r < direct.size(); ++r) {
    EXPECT_EQ(from_file[r].index, direct[r].index);
    EXPECT_EQ(from_file[r].name, direct[r].name);
    EXPECT_DOUBLE_EQ(from_file[r].prob, direct[r].prob);
  }
  EXPECT_EQ(pred.predict(img0.expand({3, 28, 28}).contiguous())[0].index, direct[0].index);
}

// 2N steps equal N steps, an interruption, a resume from `latest` and N more
// steps, to the bit: parameters, BatchNorm-free fmnist_cnn, Adam moments, with
// cosine + warm-up (which depends on the whole run's length), gradient
// clipping, parameter groups, and an interruption mid-epoch whose resume
// crosses an epoch boundary (sampler position and epoch reshuffle).
TEST(TrainE2E, ResumeIsBitIdenticalAcrossAnEpochBoundary) {
  const tcv::testing::TempDir tmp("e2e_bit");
  const fs::path root = tmp.root();
  const fs::path data = root / "data";
  write_small_fmnist(data, 320, 100);  // 5 batches of 64 per epoch

  auto config = [&](const std::string& optim) {
    Config c = Config::from_file(source_dir() + "/configs/cls/fmnist_cnn.toml");
    c.set_overrides({
        "data.data_dir=\"" + data.string() + "\"",
        "solver.max_iters=14",  // 2N, N = 7: stop in epoch 2, resume into epoch 3
        "solver.display_iter=1",
        "solver.lr.lr_policy=cosine",
        "solver.lr.metric=iters",
        "solver.lr.is_warm=true",
        "solver.lr.warm.warm_iters=3",
        "solver.optim.optim_method=" + optim,
        "solver.lr.base_lr=" + std::string(optim == "sgd" ? "0.05" : "0.002"),
        "solver.optim.nodecay_bn_bias=true",
        "solver.optim.adam.weight_decay=1e-3",
        "solver.clip_grad_norm=2.0",
        "data.workers=2",
        "device=cpu",
    });
    return c;
  };
  for (const std::string optim : {"adam", "sgd"}) {
    const fs::path a = root / (optim + "_a"), b = root / (optim + "_b");
    {
      Trainer t(config(optim), {.out_dir = a.string(),
                                .progress = ProgressMode::quiet,
                                .log = nullptr,
                                .stop_at_iter = 7});
      const TrainSummary s = t.run();
      EXPECT_EQ(s.iters, 7);
      EXPECT_EQ(s.epochs, 1);
    }
    const TrainerState mid = load_trainer_state((a / "checkpoints" / "latest").string());
    EXPECT_EQ(mid.iter, 7);
    EXPECT_EQ(mid.epoch, 1);
    EXPECT_EQ(mid.epoch_iter, 2);
    {
      Config r = config(optim);
      r.set_override("network.resume=\"" + a.string() + "\"");
      Trainer t(r, {.out_dir = a.string(), .progress = ProgressMode::quiet, .log = nullptr});
      const TrainSummary s = t.run();
      EXPECT_EQ(s.start_iter, 7);
      EXPECT_EQ(s.iters, 14);
      EXPECT_EQ(s.epochs, 2);
    }
    {
      Trainer t(config(optim),
                {.out_dir = b.string(), .progress = ProgressMode::quiet, .log = nullptr});
      EXPECT_EQ(t.run().iters, 14);
    }
    SCOPED_TRACE(optim);
    expect_bitwise_equal(a / "checkpoints" / "latest.safetensors",
                         b / "checkpoints" / "latest.safetensors");
    // The learning rates logged after the resume are those of the unbroken run.
    std::vector<double> lr_a, lr_b;
    for (const auto& j : read_jsonl(a / "metrics.jsonl"))
      if (json_string(j, "split") == "train") lr_a.push_back(json_double(j, "lr"));
    for (const auto& j : read_jsonl(b / "metrics.jsonl"))
      if (json_string(j, "split") == "train") lr_b.push_back(json_double(j, "lr"));
    EXPECT_EQ(lr_a, lr_b);
    ASSERT_EQ(lr_b.size(), 14u);
    EXPECT_LT(lr_b[0], lr_b[2]);   // warm-up
    EXPECT_GT(lr_b[3], lr_b[13]);  // cosine decay
  }
}
