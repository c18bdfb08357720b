// Checkpoints: one safetensors file holding model, optimizer and trainer state;
// what loading refuses (inf/NaN, truncation, other shapes, a bad trainer
// state), what saving refuses, stale temp files, and the finiteness checks.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/json.h"
#include "engine/serialize.h"
#include "models/registry.h"
#include "support/gradcheck.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace tcv::train {
namespace {

namespace fs = std::filesystem;
using tcv::testing::error_of;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct CheckpointTest : ::testing::Test {
  void SetUp() override {
    models::register_builtin_models();
    model = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
    optim = make_optimizer(Config(), model->named_parameters());
    // One step, so the optimizer has state (momentum buffers) to save.
    for (auto& [name, p] : model->named_parameters()) p.set_grad(ones(p.shape()));
    optim->step();
    state.model_name = "fmnist_cnn";
    state.epoch = 1;
    state.epoch_iter = 2;
    state.iter = 7;
    state.lr = 0.05;
    state.rng_seed = 18446744073709551615ull;  // u64 values beyond i64 survive
    state.rng_offset = 12345678901234567890ull;
    state.best_score = 81.25;  // best_metric "top1": written as best_top1
    state.last_score = 80.5;
    state.elapsed_s = 12.5;
    state.nonfinite_skipped = 2;
  }
  std::string stem(const std::string& name = "ckpt") const { return dir.path(name); }
  // The checkpoint's tensors and metadata, rewritten with `edit` applied.
  void rewrite(const std::string& name, const std::function<void(SafetensorsFile&)>& edit) const {
    SafetensorsFile f = load_safetensors(stem(name) + ".safetensors");
    edit(f);
    save_safetensors(stem(name) + ".safetensors", f.tensors, f.metadata);
  }
  std::shared_ptr<nn::Module> fresh_model() const {
    return models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
  }
  tcv::testing::TempDir dir{"ckpt"};
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<Optimizer> optim;
  TrainerState state;
};

TEST_F(CheckpointTest, OneFileHoldsWeightsOptimizerAndTrainerState) {
  save_checkpoint(stem(), *model, optim.get(), state);
  // One file, nothing beside it.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir.root()))
    files.push_back(e.path().filename().string());
  EXPECT_EQ(files, (std::vector<std::string>{"ckpt.safetensors"}));
  // The trainer state is JSON text in the header's metadata, readable by any
  // safetensors reader.
  const SafetensorsFile f = load_safetensors(stem() + ".safetensors");
  EXPECT_EQ(f.metadata.at("format"), "tcv");
  EXPECT_EQ(f.metadata.at("model"), "fmnist_cnn");
  const Json j = json_parse(f.metadata.at("trainer_state"));
  EXPECT_EQ(json_int(j, "iter"), 7);
  EXPECT_EQ(json_string(j, "rng_offset"), "12345678901234567890");

  const TrainerState s = load_trainer_state(stem());
  EXPECT_EQ(s.model_name, "fmnist_cnn");
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.epoch_iter, 2);
  EXPECT_EQ(s.iter, 7);
  EXPECT_EQ(s.lr, 0.05);
  EXPECT_EQ(s.rng_seed, 18446744073709551615ull);
  EXPECT_EQ(s.rng_offset, 12345678901234567890ull);
  EXPECT_EQ(s.best_score, 81.25);
  EXPECT_EQ(s.last_score, 80.5);
  EXPECT_EQ(s.elapsed_s, 12.5);
  EXPECT_EQ(s.nonfinite_skipped, 2);

  auto m = fresh_model();
  auto o = make_optimizer(Config(), m->named_parameters());
  EXPECT_EQ(load_checkpoint(stem(), *m, o.get()).iter, 7);
  EXPECT_EQ(o->step_count(), 1);
  const auto a = model->state_dict(), b = m->state_dict();
  for (size_t i = 0; i < a.size(); ++i) testing::expect_close(b[i].second, a[i].second, 0, 0);
  // Paths that name it: the file, the stem, a directory with `latest`.
  EXPECT_EQ(resolve_checkpoint(stem() + ".safetensors"), stem());
  EXPECT_EQ(resolve_checkpoint(stem()), stem());
  fs::create_directories(dir.root() / "run" / "checkpoints");
  save_checkpoint(dir.path("run/checkpoints/latest"), *model, optim.get(), state);
  EXPECT_EQ(resolve_checkpoint(dir.path("run")), dir.path("run/checkpoints/latest"));
  EXPECT_EQ(resolve_checkpoint(dir.path("run/checkpoints")), dir.path("run/checkpoints/latest"));
  EXPECT_TRUE(contains(error_of([&] { resolve_checkpoint(dir.path("nothing")); }), "nothing"));
}

// Checkpoints of earlier versions: trainer state in "<stem>.json" beside the weights.
TEST_F(CheckpointTest, CheckpointsOfEarlierVersionsStillLoad) {
  NamedTensors tensors;
  for (const auto& [k, t] : model->state_dict()) tensors.emplace_back("model." + k, t);
  for (const auto& [k, t] : optim->state_dict()) tensors.emplace_back("optim." + k, t);
  save_safetensors(stem("old") + ".safetensors", tensors,
                   {{"format", "tcv"}, {"model", "fmnist_cnn"}});
  write_file_atomic(stem("old") + ".json",
                    R"({"weights": "old.safetensors", "model_name": "fmnist_cnn", "epoch": 0,
                        "epoch_iter": 3, "iter": 3, "lr": 0.1, "rng_seed": "0",
                        "rng_offset": "96", "best_top1": -1.0, "last_top1": -1.0,
                        "elapsed_s": 1.5})");
  EXPECT_EQ(resolve_checkpoint(stem("old") + ".json"), stem("old"));
  auto m = fresh_model();
  const TrainerState s = load_checkpoint(stem("old"), *m, nullptr);
  EXPECT_EQ(s.iter, 3);
  EXPECT_EQ(s.rng_offset, 96u);
  EXPECT_EQ(s.nonfinite_skipped, 0);
  // Saving over it leaves one file in the new layout.
  save_checkpoint(stem("old"), *model, optim.get(), state);
  EXPECT_FALSE(fs::exists(stem("old") + ".json"));
  EXPECT_EQ(load_trainer_state(stem("old")).iter, 7);
  // Weights alone are not a checkpoint.
  save_safetensors(stem("bare") + ".safetensors", model->state_dict());
  const std::string msg = error_of([&] { load_trainer_state(stem("bare")); });
  EXPECT_TRUE(contains(msg, "bare.safetensors") && contains(msg, "no trainer state") &&
              contains(msg, "network.pretrained"))
      << msg;
}

TEST_F(CheckpointTest, LoadRefusesInfAndNaNNamingTheTensor) {
  save_checkpoint(stem(), *model, optim.get(), state);
  rewrite("ckpt", [](SafetensorsFile& f) {
    for (auto& [k, t] : f.tensors)
      if (k == "model.3.weight") t.data<float>()[17] = kNaN;
  });
  auto m = fresh_model();
  std::string msg = error_of([&] { load_checkpoint(stem(), *m, nullptr); });
  EXPECT_TRUE(contains(msg, "ckpt.safetensors") && contains(msg, "\"model.3.weight\"") &&
              contains(msg, "inf or NaN"))
      << msg;
  save_checkpoint(stem(), *model, optim.get(), state);
  rewrite("ckpt", [](SafetensorsFile& f) {
    for (auto& [k, t] : f.tensors)
      if (k == "optim.momentum_buffer.9.bias") t.data<float>()[0] = -kInf;
  });
  auto o = make_optimizer(Config(), m->named_parameters());
  msg = error_of([&] { load_checkpoint(stem(), *m, o.get()); });
  EXPECT_TRUE(contains(msg, "\"optim.momentum_buffer.9.bias\"") && contains(msg, "inf or NaN"))
      << msg;
}

TEST_F(CheckpointTest, SaveRefusesInfAndNaNAndKeepsTheCheckpointThere) {
  save_checkpoint(stem(), *model, optim.get(), state);
  const std::string before = slurp(stem() + ".safetensors");
  {
    NoGradGuard no_grad;
    model->named_parameters()[2].second.data<float>()[5] = kInf;  // 3.weight
  }
  TrainerState later = state;
  later.iter = 8;
  const std::string msg = error_of([&] { save_checkpoint(stem(), *model, optim.get(), later); });
  EXPECT_TRUE(contains(msg, "not saved") && contains(msg, "\"model.3.weight\"") &&
              contains(msg, "iteration 8"))
      << msg;
  EXPECT_EQ(slurp(stem() + ".safetensors"), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.root()), fs::directory_iterator()), 1);
}

TEST_F(CheckpointTest, LoadRefusesTruncatedAndMismatchedCheckpoints) {
  save_checkpoint(stem(), *model, optim.get(), state);
  const std::string bytes = slurp(stem() + ".safetensors");
  auto m = fresh_model();
  auto o = make_optimizer(Config(), m->named_parameters());
  // Truncated anywhere: in the header, in the data.
  for (size_t keep : {size_t{5}, size_t{200}, bytes.size() / 2, bytes.size() - 1}) {
    write_file_atomic(stem("cut") + ".safetensors", bytes.substr(0, keep));
    const std::string msg = error_of([&] { load_checkpoint(stem("cut"), *m, o.get()); });
    EXPECT_TRUE(contains(msg, "cut.safetensors") &&
                (contains(msg, "truncated") || contains(msg, "run past") ||
                 contains(msg, "does not fit") || contains(msg, "header")))
        << keep << ": " << msg;
  }
  // Another model.
  auto resnet = models::create_model("fmnist_resnet", {.num_classes = 10, .in_channels = 1});
  std::string msg = error_of([&] { load_checkpoint(stem(), *resnet, nullptr); });
  EXPECT_TRUE(contains(msg, "do not fit the model") && contains(msg, "ckpt.safetensors")) << msg;
  // Other shapes (another number of classes).
  auto seven = models::create_model("fmnist_cnn", {.num_classes = 7, .in_channels = 1});
  msg = error_of([&] { load_checkpoint(stem(), *seven, nullptr); });
  EXPECT_TRUE(contains(msg, "9.weight") && contains(msg, "(10, 128)")) << msg;
  // A tensor missing.
  rewrite("ckpt", [](SafetensorsFile& f) {
    std::erase_if(f.tensors, [](const auto& e) { return e.first == "model.3.bias"; });
  });
  msg = error_of([&] { load_checkpoint(stem(), *m, o.get()); });
  EXPECT_TRUE(contains(msg, "3.bias") && contains(msg, "missing")) << msg;
  // Optimizer state of another optimizer.
  save_checkpoint(stem(), *model, optim.get(), state);
  Config adam;
  adam.set_override("solver.optim.optim_method=adam");
  auto a = make_optimizer(adam, m->named_parameters());
  msg = error_of([&] { load_checkpoint(stem(), *m, a.get()); });
  EXPECT_TRUE(contains(msg, "optimizer state does not fit") && contains(msg, "momentum_buffer"))
      << msg;
  // A trainer state that does not parse.
  rewrite("ckpt", [](SafetensorsFile& f) { f.metadata["trainer_state"] = "{\"iter\": 3,"; });
  msg = error_of([&] { load_checkpoint(stem(), *m, o.get()); });
  EXPECT_TRUE(contains(msg, "ckpt.safetensors") && contains(msg, "trainer state") &&
              contains(msg, "not valid JSON"))
      << msg;
}

// Each rejected trainer state names where it came from and the key at fault.
TEST(TrainerState, ErrorsNameTheKeyAndRangesAreChecked) {
  const std::string good =
      R"({"model_name": "m", "epoch": 1, "epoch_iter": 2, "iter": 7, "lr": 0.1,
          "rng_seed": "0", "rng_offset": "5", "best_top1": -1.0, "last_top1": 50.0,
          "elapsed_s": 3.0})";
  EXPECT_EQ(parse_trainer_state(good, "f").iter, 7);
  auto with = [&](const std::string& key, const std::string& value) {
    Json j = json_parse(good);
    j[key] = json_parse(value);
    return json_dump(j);
  };
  struct Case {
    std::string key, value, expect;
  };
  const std::vector<Case> cases = {
      {"rng_offset", "\"abc\"", "an unsigned 64-bit integer"},
      {"rng_offset", "\"12x\"", "an unsigned 64-bit integer"},
      {"rng_offset", "\"-1\"", "an unsigned 64-bit integer"},
      {"rng_offset", "\"18446744073709551616\"", "an unsigned 64-bit integer"},  // 2^64
      {"rng_seed", "7", "an unsigned 64-bit integer"},
      {"iter", "1000000000000000", "[0, 1099511627776]"},  // 1e15
      {"iter", "1e15", "[0, 1099511627776]"},
      {"iter", "-3", "[0, 1099511627776]"},
      {"epoch", "8", "[0, 7]"},  // more epochs than iterations
      {"epoch_iter", "9", "[0, 7]"},
      {"lr", "-0.1", "a number"},
      {"lr", "\"0.1\"", "a number"},
      {"best_top1", "250.0", "percentage"},
      {"elapsed_s", "null", "a number"},
      {"model_name", "\"\"", "model name"},
      {"nonfinite_skipped", "8", "[0, 7]"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of([&] { parse_trainer_state(with(c.key, c.value), "run.st"); });
    EXPECT_TRUE(contains(msg, "run.st") && contains(msg, "\"" + c.key + "\"") &&
                contains(msg, c.expect))
        << c.key << " = " << c.value << ": " << msg;
  }
  Json missing = json_parse(good);
  missing.erase("lr");
  EXPECT_TRUE(
      contains(error_of([&] { parse_trainer_state(json_dump(missing), "f"); }), "no \"lr\""));
  EXPECT_TRUE(
      contains(error_of([&] { parse_trainer_state("[1, 2]", "f"); }), "expected an object"));
  EXPECT_TRUE(contains(error_of([&] { parse_trainer_state("{", "f"); }), "not valid JSON"));
}

TEST(TempFiles, StaleOnesAreRemovedLiveOnesKept) {
  tcv::testing::TempDir dir("stale");
  // A pid that no process has.
  pid_t dead = 4194303;
  while (dead > 2 && !(::kill(dead, 0) != 0 && errno == ESRCH)) --dead;
  const std::string self = std::to_string(::getpid());
  const std::string init = "1";  // alive in any pid namespace
  const std::vector<std::string> removed = {"latest.safetensors.tmp." + std::to_string(dead) + ".0",
                                            "config.toml.tmp." + self + ".12"};
  const std::vector<std::string> kept = {"best.safetensors.tmp." + init + ".3", "notes.tmp.txt",
                                         "a.tmp.12", "latest.safetensors"};
  for (const auto& f : removed) std::ofstream(dir.root() / f) << "x";
  for (const auto& f : kept) std::ofstream(dir.root() / f) << "x";
  EXPECT_EQ(remove_stale_temp_files(dir.path()), 2);
  for (const auto& f : removed) EXPECT_FALSE(fs::exists(dir.root() / f)) << f;
  for (const auto& f : kept) EXPECT_TRUE(fs::exists(dir.root() / f)) << f;
  EXPECT_EQ(remove_stale_temp_files(dir.path("no/such/dir")), 0);
}

}  // namespace
}  // namespace tcv::train
