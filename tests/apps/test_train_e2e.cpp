// A short real training run in-process: fmnist_cnn on Fashion-MNIST for 30
// iterations, then a resume to 40, checked against an uninterrupted 40.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/idx.h"
#include "engine/json.h"
#include "engine/serialize.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;

namespace {

std::string source_dir() {
  const char* src = std::getenv("TCV_SOURCE_DIR");
  return src ? src : fs::path(__FILE__).parent_path().parent_path().parent_path().string();
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<Json> read_jsonl(const fs::path& p) {
  std::vector<Json> out;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line)) out.push_back(Json::parse(line));
  return out;
}

Config short_run(int64_t max_iters) {
  Config c = Config::from_file(source_dir() + "/configs/cls/fmnist_cnn.toml");
  c.set_override("solver.max_iters=" + std::to_string(max_iters));
  c.set_override("solver.display_iter=10");
  c.set_override("val.max_images=500");
  c.set_override("solver.lr.is_warm=false");
  // A schedule that does not depend on max_iters, stepping after the resume point.
  c.set_override("solver.lr.lr_policy=step");
  c.set_override("solver.lr.metric=iters");
  c.set_override("solver.lr.step.step_size=35");
  c.set_override("data.workers=1");
  c.set_override("device=cpu");
  return c;
}

// Writes the first n samples of an IDX tensor (u8) as a raw IDX file.
void write_idx_head(const Tensor& t, int64_t n, const fs::path& p) {
  std::string out("\0\0\x08", 3);
  out += static_cast<char>(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    const auto v = static_cast<uint32_t>(d == 0 ? n : t.size(d));
    for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((v >> s) & 0xff);
  }
  const int64_t per = t.numel() / t.size(0);
  out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(n * per));
  std::ofstream(p, std::ios::binary) << out;
}

}  // namespace

TEST(TrainE2E, ShortRunWritesArtifactsAndResumesExactly) {
  const fs::path root = fs::temp_directory_path() / ("tcv_e2e_" + std::to_string(::getpid()));
  fs::remove_all(root);
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
  EXPECT_GT(s1.top1, 40.0);  // chance is 10%
  EXPECT_GE(s1.top5, s1.top1);

  // metrics.jsonl: train lines at 10, 20, 30, one val line at the end.
  const auto lines = read_jsonl(a / "metrics.jsonl");
  std::vector<int64_t> train_iters;
  std::vector<double> losses;
  int vals = 0;
  for (const auto& j : lines) {
    if (j.at("split").as_string() == "train") {
      train_iters.push_back(j.at("iter").as_int());
      losses.push_back(j.at("loss").as_double());
      EXPECT_EQ(j.at("epoch").as_int(), 1);  // the first epoch
      EXPECT_GT(j.at("images_per_sec").as_double(), 0.0);
      EXPECT_NEAR(j.at("lr").as_double(), 0.05, 1e-12);
      EXPECT_GT(j.at("time").as_double(), 0.0);
    } else {
      EXPECT_EQ(j.at("split").as_string(), "val");
      EXPECT_EQ(j.at("iter").as_int(), 30);
      EXPECT_EQ(j.at("epoch").as_int(), 1);
      EXPECT_NEAR(j.at("top1").as_double(), s1.top1, 1e-9);
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

  // Checkpoints: latest and best, weights and optimizer state in one file.
  const fs::path ck = a / "checkpoints";
  for (const char* f : {"latest.json", "latest.safetensors", "best.json", "best.safetensors"})
    EXPECT_TRUE(fs::exists(ck / f)) << f;
  const Json st = Json::parse(slurp(ck / "latest.json"));
  EXPECT_EQ(st.at("iter").as_int(), 30);
  EXPECT_EQ(st.at("epoch").as_int(), 0);
  EXPECT_EQ(st.at("epoch_iter").as_int(), 30);
  EXPECT_NEAR(st.at("best_top1").as_double(), s1.top1, 1e-9);
  const SafetensorsFile w = load_safetensors((ck / "latest.safetensors").string());
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
  resume.set_override("network.resume=\"" + (ck / "latest.json").string() + "\"");
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
    if (after[i].at("split").as_string() == "train") {
      new_train.push_back(after[i].at("iter").as_int());
      EXPECT_NEAR(after[i].at("lr").as_double(), 0.005, 1e-12);  // stepped at 35
    }
  EXPECT_EQ(new_train, (std::vector<int64_t>{40}));

  // ---- the same 40 iterations without a break give the same weights ----
  {
    Trainer t(short_run(40),
              {.out_dir = b.string(), .progress = ProgressMode::quiet, .log = nullptr});
    t.run();
  }
  const auto wa = load_safetensors((ck / "latest.safetensors").string()).tensors;
  const auto wb = load_safetensors((b / "checkpoints" / "latest.safetensors").string()).tensors;
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wa[i].first, wb[i].first);
    if (!is_floating(wa[i].second.dtype())) continue;
    const auto x = wa[i].second.to_vector<double>(), y = wb[i].second.to_vector<double>();
    ASSERT_EQ(x.size(), y.size());
    double worst = 0;
    for (size_t k = 0; k < x.size(); ++k)
      worst = std::max(worst, std::abs(x[k] - y[k]) / (1e-3 + std::abs(y[k])));
    EXPECT_LT(worst, 1e-3) << wa[i].first;
  }
  fs::remove_all(root);
}

TEST(TrainE2E, ConfigErrorsStopBeforeTraining) {
  Config c = short_run(5);
  c.set_override("network.model_name=no_such_model");
  const fs::path out = fs::temp_directory_path() / ("tcv_e2e_bad_" + std::to_string(::getpid()));
  try {
    Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fmnist_cnn"), std::string::npos) << e.what();
  }
  Config r = short_run(5);
  r.set_override("network.resume=/nonexistent/latest.json");
  EXPECT_THROW(
      Trainer(r, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr}),
      Error);
  fs::remove_all(out);
}

// Whole epochs on a 256-image slice of Fashion-MNIST: per-epoch evaluation,
// epoch checkpoints pruned to checkpoints.keep_last, `best` by top-1.
TEST(TrainE2E, EpochsCheckpointsAndKeepLast) {
  const fs::path root = fs::temp_directory_path() / ("tcv_e2e_ep_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path data = root / "data", out = root / "run";
  fs::create_directories(data);
  const std::string src = "/usr/share/datasets/fashion-mnist/";
  write_idx_head(data::read_idx(src + "train-images-idx3-ubyte.gz"), 256,
                 data / "train-images-idx3-ubyte");
  write_idx_head(data::read_idx(src + "train-labels-idx1-ubyte.gz"), 256,
                 data / "train-labels-idx1-ubyte");
  write_idx_head(data::read_idx(src + "t10k-images-idx3-ubyte.gz"), 200,
                 data / "t10k-images-idx3-ubyte");
  write_idx_head(data::read_idx(src + "t10k-labels-idx1-ubyte.gz"), 200,
                 data / "t10k-labels-idx1-ubyte");

  Config c = Config::from_file(source_dir() + "/configs/cls/fmnist_cnn.toml");
  c.set_override("data.data_dir=\"" + data.string() + "\"");
  c.set_override("solver.max_epoch=5");
  c.set_override("solver.lr.warm.warm_iters=4");
  c.set_override("solver.display_iter=2");
  c.set_override("checkpoints.keep_last=2");
  c.set_override("data.workers=2");
  c.set_override("device=cpu");
  TrainSummary s;
  {
    Trainer t(c, {.out_dir = out.string(), .progress = ProgressMode::quiet, .log = nullptr});
    s = t.run();
  }
  EXPECT_EQ(s.epochs, 5);
  EXPECT_EQ(s.iters, 20);  // 256 / 64 = 4 per epoch

  std::vector<int64_t> val_epochs, val_iters;
  double best = -1;
  for (const auto& j : read_jsonl(out / "metrics.jsonl"))
    if (j.at("split").as_string() == "val") {
      val_epochs.push_back(j.at("epoch").as_int());
      val_iters.push_back(j.at("iter").as_int());
      best = std::max(best, j.at("top1").as_double());
      EXPECT_EQ(j.at("images").as_int(), 200);
    }
  EXPECT_EQ(val_epochs, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(val_iters, (std::vector<int64_t>{4, 8, 12, 16, 20}));
  EXPECT_NEAR(s.best_top1, best, 1e-9);

  const fs::path ck = out / "checkpoints";
  for (const char* gone : {"epoch_0001", "epoch_0002", "epoch_0003"}) {
    EXPECT_FALSE(fs::exists(ck / (std::string(gone) + ".json"))) << gone;
    EXPECT_FALSE(fs::exists(ck / (std::string(gone) + ".safetensors"))) << gone;
  }
  for (const char* kept : {"epoch_0004", "epoch_0005", "latest", "best"}) {
    EXPECT_TRUE(fs::exists(ck / (std::string(kept) + ".json"))) << kept;
    EXPECT_TRUE(fs::exists(ck / (std::string(kept) + ".safetensors"))) << kept;
  }
  const TrainerState latest = load_trainer_state((ck / "latest").string());
  EXPECT_EQ(latest.epoch, 5);
  EXPECT_EQ(latest.epoch_iter, 0);
  EXPECT_EQ(latest.iter, 20);
  EXPECT_NEAR(latest.best_top1, best, 1e-9);
  EXPECT_NEAR(load_trainer_state((ck / "best").string()).best_top1, best, 1e-9);
  // A run directory resolves to its latest checkpoint.
  EXPECT_EQ(resolve_checkpoint(out.string()), (ck / "latest").string());
  fs::remove_all(root);
}
