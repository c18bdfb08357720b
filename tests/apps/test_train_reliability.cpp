// Training that survives bad numbers, bad checkpoints and full disks:
// solver.nonfinite (stop, skip; data-parallel ranks agree), resume refusals
// before any step, metrics.jsonl after a resume, data.workers and iteration
// counts out of range, a disk that fills while saving.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include "apps/process.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/serialize.h"
#include "models/registry.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace tcv::train;
using tcv::testing::error_of;

namespace {

using tcv::testing::contains;
using tcv::testing::read_jsonl;
using tcv::testing::slurp;

// The iterations of metrics.jsonl's lines of one split, in file order.
std::vector<int64_t> logged_iters(const fs::path& run, const std::string& split) {
  std::vector<int64_t> out;
  for (const auto& j : read_jsonl(run / "metrics.jsonl"))
    if (json_string(j, "split") == split) out.push_back(json_int(j, "iter"));
  return out;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i + 1;
  return v;
}

std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (contains(e.path().filename().string(), ".tmp.")) out.push_back(e.path().string());
  return out;
}

// 64 Fashion-MNIST images in batches of 4 (16 iterations an epoch), on the CPU.
struct Reliability : ::testing::Test {
  void SetUp() override { tcv::testing::write_small_fmnist(data, 64, 8); }

  std::vector<std::string> base_sets(const std::string& model = "fmnist_cnn") const {
    return {"data.data_dir=\"" + data.string() + "\"",
            "network.model_name=\"" + model + "\"",
            "train.batch_size=4",
            "val.batch_size=8",
            "data.workers=0",
            "device=\"cpu\"",
            "solver.max_iters=12",
            "solver.lr.lr_policy=\"fixed\"",
            "solver.lr.is_warm=false",
            "solver.lr.base_lr=0.02",
            "solver.display_iter=1"};
  }
  Config config(const std::vector<std::string>& extra = {},
                const std::string& model = "fmnist_cnn") const {
    Config c = Config::from_file(tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml");
    for (const auto& s : base_sets(model)) c.set_override(s);
    for (const auto& s : extra) c.set_override(s);
    return c;
  }
  // Trains `cfg` into `out` up to iteration `stop` (0: the end).
  TrainSummary train(const Config& cfg, const fs::path& out, int64_t stop = 0,
                     std::ostream* log = nullptr) const {
    Trainer t(cfg, {.out_dir = out.string(),
                    .progress = log ? ProgressMode::lines : ProgressMode::quiet,
                    .log = log,
                    .stop_at_iter = stop});
    return t.run();
  }
  static std::string resume_of(const fs::path& run) {
    return "network.resume=\"" + run.string() + "\"";
  }

  tcv::testing::TempDir tmp{"rel"};
  fs::path data = tmp.root() / "data";
};

// Pixels divided by 1e-40 are inf: a batch with inf in it, the gradient of the
// first convolution's weight becomes inf - inf = NaN.
const char* kInfData = "data.normalize.div_value=1e-40";

}  // namespace

TEST_F(Reliability, NonFiniteStepStopsNamingIterationAndParameterAndSavesNothing) {
  const fs::path run = tmp.root() / "run";
  train(config({"solver.save_iters=1"}), run, 2);
  const fs::path latest = run / "checkpoints" / "latest.safetensors";
  const std::string before = slurp(latest);

  const Config bad = config({"solver.save_iters=1", resume_of(run), kInfData});
  EXPECT_EQ(bad.get_string("solver.nonfinite"), "stop");  // the default
  const std::string msg = error_of([&] { train(bad, run); });
  EXPECT_TRUE(contains(msg, "iteration 3") &&
              contains(msg, "first parameter with a non-finite gradient: 0.weight") &&
              contains(msg, "solver.nonfinite"))
      << msg;
  EXPECT_EQ(slurp(latest), before) << "latest was written after the non-finite step";
  EXPECT_EQ(load_trainer_state((run / "checkpoints" / "latest").string()).iter, 2);
  EXPECT_EQ(logged_iters(run, "train"), one_to(2));
  EXPECT_TRUE(temp_files(run / "checkpoints").empty());
}

// "skip" drops the step whole, the BatchNorm statistics its forward changed
// included, counts it in the log, metrics.jsonl and the checkpoint, and goes on.
TEST_F(Reliability, NonFiniteStepsAreSkippedWithBatchNormStatistics) {
  const fs::path run = tmp.root() / "run";
  const std::string model = "fmnist_resnet";
  train(config({}, model), run, 2);
  const SafetensorsFile good = load_safetensors((run / "checkpoints/latest.safetensors").string());

  std::ostringstream log;
  const TrainSummary s =
      train(config({resume_of(run), kInfData, "solver.nonfinite=\"skip\""}, model), run, 5, &log);
  EXPECT_EQ(s.iters, 5);
  EXPECT_EQ(s.nonfinite_skipped, 3);
  EXPECT_TRUE(contains(log.str(), "skipped iteration 3 (epoch 1): loss") &&
              contains(log.str(), "first parameter with a non-finite gradient: conv1.weight") &&
              contains(log.str(), "(3 skipped so far)"))
      << log.str();
  // Model (running statistics included) and optimizer state as they were.
  const SafetensorsFile after = load_safetensors((run / "checkpoints/latest.safetensors").string());
  ASSERT_EQ(after.tensors.size(), good.tensors.size());
  int running = 0;
  for (size_t i = 0; i < good.tensors.size(); ++i) {
    const auto& [name, t] = good.tensors[i];
    ASSERT_EQ(after.tensors[i].first, name);
    EXPECT_EQ(std::memcmp(after.tensors[i].second.data_ptr(), t.data_ptr(), t.nbytes()), 0)
        << name << " changed in a skipped step";
    running += contains(name, "running_mean");
  }
  EXPECT_GT(running, 0);
  const TrainerState st = load_trainer_state((run / "checkpoints/latest").string());
  EXPECT_EQ(st.iter, 5);
  EXPECT_EQ(st.nonfinite_skipped, 3);
  std::vector<int64_t> counts;
  for (const auto& j : read_jsonl(run / "metrics.jsonl"))
    if (json_string(j, "split") == "train" && json_int(j, "iter") > 2) {
      EXPECT_TRUE(j.at("loss").is_null());  // no step of the window counted
      counts.push_back(json_int(j, "nonfinite_skipped"));
    }
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 2, 3}));

  // Clean data again: training goes on, the count stays.
  const TrainSummary s2 =
      train(config({resume_of(run), "solver.nonfinite=\"skip\""}, model), run, 7);
  EXPECT_EQ(s2.nonfinite_skipped, 3);
  const auto last = read_jsonl(run / "metrics.jsonl").back();
  EXPECT_EQ(json_int(last, "iter"), 7);
  EXPECT_TRUE(last.at("loss").is_number());
  EXPECT_EQ(json_int(last, "nonfinite_skipped"), 3);
}

// Issue 25, item 2: a model with finite weights whose outputs are NaN (under
// "skip", every step after it is skipped). Such a model scored top-1 100% (NaN
// compares false with everything) and was saved as `best`; now a row holding
// NaN is wrong and a non-finite val loss never makes a best. The model: one
// step of training, then the weights and biases of both Linear layers (fc1 is
// layer 7, fc2 layer 9) times 1e30, finite in f32. fc2's products then
// overflow to +inf and -inf (each logit has weights of both signs over
// positive inputs), whose sum is NaN in any order of summation and before any
// ReLU. (A learning rate of 1e6 made such weights on one CPU and finite
// outputs on another: which units the ReLUs silence decides it.)
TEST_F(Reliability, ANaNModelNeverScoresAboveChanceNorBecomesBest) {
  const fs::path run = tmp.root() / "run";
  train(config({"solver.save_iters=1"}), run, 1);
  const std::string latest = (run / "checkpoints/latest.safetensors").string();
  SafetensorsFile ck = load_safetensors(latest);
  int scaled = 0;
  for (auto& [name, t] : ck.tensors)
    if (name.rfind("model.7.", 0) == 0 || name.rfind("model.9.", 0) == 0) {
      t = ops::mul(t, 1e30);
      ++scaled;
    }
  ASSERT_EQ(scaled, 4);
  save_safetensors(latest, ck.tensors, ck.metadata);
  std::ostringstream log;
  const TrainSummary s = train(config({resume_of(run), "solver.nonfinite=\"skip\""}), run, 0, &log);
  EXPECT_GT(s.nonfinite_skipped, 0);
  EXPECT_FALSE(std::isfinite(s.val_loss));
  EXPECT_LE(s.metric("top1"), 10.0) << log.str();  // 10 classes: chance
  EXPECT_EQ(s.best_score, -1.0);
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "best.safetensors"));
  EXPECT_TRUE(contains(log.str(), "(the model's outputs hold inf or NaN): not a best") &&
              contains(log.str(), "(no best)"))
      << log.str();
  // The trainer state holds "none yet" (-1), not NaN (which JSON cannot hold), and resumes.
  EXPECT_EQ(load_trainer_state((run / "checkpoints" / "latest").string()).last_score, -1.0);
}

// ... and "skip" never lets inf or NaN into the weights: an update of finite
// gradients that overflows them (a learning rate of 1e39, inf in f32) stops
// training as "stop" would, before anything is saved from it.
TEST_F(Reliability, AnUpdateThatOverflowsTheWeightsStopsUnderSkip) {
  const fs::path run = tmp.root() / "run";
  train(config({"solver.save_iters=1"}), run, 2);
  const std::string before = slurp(run / "checkpoints" / "latest.safetensors");
  const std::string msg = error_of([&] {
    train(config({resume_of(run), "solver.save_iters=1", "solver.lr.base_lr=1e39",
                  "solver.nonfinite=\"skip\""}),
          run);
  });
  EXPECT_TRUE(
      contains(msg, "non-finite weights after the update of iteration 3 (epoch 1, lr 1e+39)") &&
      contains(msg, "gradients finite, first tensor holding inf or NaN: 0.weight") &&
      contains(msg, "Stopped as solver.nonfinite = \"stop\" would"))
      << msg;
  EXPECT_EQ(slurp(run / "checkpoints" / "latest.safetensors"), before);
}

// Data-parallel: the all-reduced gradients are the same on every rank, so
// every rank skips the same steps (or stops at the same one), and no rank hangs.
TEST_F(Reliability, DataParallelRanksAgreeOnNonFiniteSteps) {
#if !defined(TCV_TRAIN) || !defined(TCV_RUN)
  GTEST_SKIP() << "tcv-train or tcv-run is not built";
#else
  const fs::path run = tmp.root() / "run";
  train(config(), run, 2);
  const std::string good = slurp(run / "checkpoints/latest.safetensors");
  auto command = [&](const std::string& mode) {
    std::vector<std::string> argv = {TCV_RUN,
                                     "--nproc-per-node",
                                     "2",
                                     "--",
                                     TCV_TRAIN,
                                     "--config",
                                     tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml",
                                     "--out",
                                     run.string()};
    for (const auto& s : base_sets()) argv.insert(argv.end(), {"--set", s});
    for (const std::string& s :
         std::vector<std::string>{"solver.max_iters=5", "network.distributed=true", kInfData,
                                  "solver.nonfinite=\"" + mode + "\"", resume_of(run)})
      argv.insert(argv.end(), {"--set", s});
    return tcv::testing::run_process(argv, (tmp.root() / (mode + ".log")).string(),
                                     std::chrono::seconds(90));
  };
  const auto skip = command("skip");
  ASSERT_EQ(skip.status, 0) << skip.output;
  const TrainerState st = load_trainer_state((run / "checkpoints/latest").string());
  EXPECT_EQ(st.iter, 5);
  EXPECT_EQ(st.nonfinite_skipped, 3);
  // The weights are those of iteration 2.
  const auto after = load_safetensors((run / "checkpoints/latest.safetensors").string()).tensors;
  const fs::path keep = tmp.root() / "good.safetensors";
  std::ofstream(keep, std::ios::binary) << good;
  const auto g = load_safetensors(keep.string()).tensors;
  ASSERT_EQ(g.size(), after.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i].first.rfind("model.", 0) != 0) continue;
    EXPECT_EQ(std::memcmp(g[i].second.data_ptr(), after[i].second.data_ptr(), g[i].second.nbytes()),
              0)
        << g[i].first;
  }

  std::ofstream(run / "checkpoints/latest.safetensors", std::ios::binary) << good;
  const auto stop = command("stop");
  EXPECT_NE(stop.status, 0) << stop.output;
  EXPECT_NE(stop.status, -1) << "the ranks hung: " << stop.output;
  EXPECT_TRUE(contains(stop.output, "non-finite training step at iteration 3")) << stop.output;
  EXPECT_EQ(slurp(run / "checkpoints/latest.safetensors"), good);
#endif
}

// network.resume is checked whole before any step: each bad checkpoint is
// refused naming the key and what is wrong, and nothing is written.
TEST_F(Reliability, ResumeRefusesBadCheckpointsBeforeAnyStep) {
  const fs::path good = tmp.root() / "good";
  train(config(), good, 2);
  const std::string stem = (good / "checkpoints/latest").string();
  const SafetensorsFile file = load_safetensors(stem + ".safetensors");
  const std::string bytes = slurp(stem + ".safetensors");

  struct Case {
    std::string name;
    std::function<void(const fs::path&)> make;  // writes the checkpoint at this path
    std::vector<std::string> sets;              // config changes
    std::vector<std::string> expect;            // in the message
  };
  auto edited = [&](std::function<void(SafetensorsFile&)> edit) {
    return [=](const fs::path& p) {
      SafetensorsFile f = file;
      for (auto& [k, t] : f.tensors) t = t.clone();
      edit(f);
      save_safetensors(p.string(), f.tensors, f.metadata);
    };
  };
  auto copy = [&](const fs::path& p) { std::ofstream(p, std::ios::binary) << bytes; };
  const std::vector<Case> cases = {
      {"truncated",
       [&](const fs::path& p) { std::ofstream(p, std::ios::binary) << bytes.substr(0, 100000); },
       {},
       {"run past the data section", "file truncated?"}},
      {"other model",
       copy,
       {"network.model_name=\"fmnist_resnet\""},
       {"holds a \"fmnist_cnn\"", "network.model_name is \"fmnist_resnet\""}},
      {"other shapes",
       copy,
       {"data.num_classes=12"},
       {"size mismatch for \"9.weight\": checkpoint (10, 128) vs model (12, 128)"}},
      {"other optimizer",
       copy,
       {"solver.optim.optim_method=\"adam\""},
       {"optimizer state does not fit"}},
      {"missing tensor",
       edited([](SafetensorsFile& f) {
         std::erase_if(f.tensors, [](const auto& e) { return e.first == "model.3.bias"; });
       }),
       {},
       {"missing", "3.bias"}},
      {"NaN weights",
       edited([](SafetensorsFile& f) {
         for (auto& [k, t] : f.tensors)
           if (k == "model.0.weight") t.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
       }),
       {},
       {"\"model.0.weight\" holds inf or NaN"}},
      {"trainer state not JSON",
       edited([](SafetensorsFile& f) { f.metadata["trainer_state"] = "{\"iter\": 2"; }),
       {},
       {"trainer state", "not valid JSON"}},
      {"trainer state out of range",
       edited([](SafetensorsFile& f) {
         Json j = json_parse(f.metadata["trainer_state"]);
         j["iter"] = int64_t{1000000000000000};
         f.metadata["trainer_state"] = json_dump(j);
       }),
       {},
       {"\"iter\" must be an integer in [0, 1099511627776]"}},
      {"rng_offset not a number",
       edited([](SafetensorsFile& f) {
         Json j = json_parse(f.metadata["trainer_state"]);
         j["rng_offset"] = "12abc";
         f.metadata["trainer_state"] = json_dump(j);
       }),
       {},
       {"\"rng_offset\" must be an unsigned 64-bit integer", "\"12abc\""}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path dir = tmp.root() / ("bad_" + std::to_string(&c - cases.data()));
    fs::create_directories(dir);
    c.make(dir / "latest.safetensors");
    const fs::path out = tmp.root() / "out";
    fs::remove_all(out);
    std::vector<std::string> sets = c.sets;
    sets.push_back(resume_of(dir));
    std::string msg;
    try {
      Trainer t(config(sets), {.out_dir = out.string(), .progress = ProgressMode::quiet});
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a ConfigError: " << e.what();
    }
    EXPECT_TRUE(contains(msg, "network.resume")) << msg;
    EXPECT_TRUE(contains(msg, "latest.safetensors")) << msg;
    for (const auto& e : c.expect) EXPECT_TRUE(contains(msg, e)) << e << " in: " << msg;
    EXPECT_FALSE(fs::exists(out / "metrics.jsonl"));
    EXPECT_TRUE(fs::is_empty(out / "checkpoints"));
  }
}

// network.pretrained weights with NaN are refused before training, naming the key and tensor.
TEST_F(Reliability, PretrainedWeightsWithNaNAreRefused) {
  models::register_builtin_models();
  nn::StateDict w =
      models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1})->state_dict();
  w[0].second.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();  // 0.weight
  const fs::path file = tmp.root() / "w.safetensors";
  save_safetensors(file.string(), w);
  std::string msg;
  try {
    Trainer t(config({"network.pretrained=\"" + file.string() + "\""}),
              {.out_dir = (tmp.root() / "run").string(), .progress = ProgressMode::quiet});
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(contains(msg, "network.pretrained") && contains(msg, "w.safetensors") &&
              contains(msg, "tensor \"0.weight\" holds inf or NaN"))
      << msg;
}

// A run killed after logging iterations its last checkpoint does not hold
// logs them again on resume: the lines after the checkpoint go first (and a
// line the kill cut short), so each iteration is in metrics.jsonl once.
TEST_F(Reliability, ResumedRunsLogEachIterationOnce) {
  const fs::path run = tmp.root() / "run";
  train(config(), run, 6);
  const std::string at6 = slurp(run / "checkpoints/latest.safetensors");
  train(config({resume_of(run)}), run, 9);
  EXPECT_EQ(logged_iters(run, "train"), one_to(9));
  // As a kill after iteration 9's line but before its checkpoint would leave it.
  std::ofstream(run / "checkpoints/latest.safetensors", std::ios::binary) << at6;
  std::ofstream(run / "metrics.jsonl", std::ios::app) << "{\"split\":\"train\",\"ep";
  train(config({resume_of(run)}), run, 12);
  EXPECT_EQ(logged_iters(run, "train"), one_to(12));
  EXPECT_EQ(logged_iters(run, "val"), (std::vector<int64_t>{12}));  // the end of the run
  // Resuming a finished run evaluates nothing again.
  train(config({resume_of(run)}), run);
  EXPECT_EQ(logged_iters(run, "train"), one_to(12));
  EXPECT_EQ(logged_iters(run, "val"), (std::vector<int64_t>{12}));
}

TEST_F(Reliability, DataWorkersOutOfRangeOrUnstartableNameTheKey) {
  Config c = config({"data.workers=100000"});
  const std::string msg = error_of([&] { c.validate(); });
  EXPECT_TRUE(contains(msg, "data.workers") && contains(msg, "at most 256") &&
              contains(msg, "100000"))
      << msg;

  // Threads that cannot start (here: a default stack no address space holds).
  Trainer t(config({"data.workers=4"}),
            {.out_dir = (tmp.root() / "run").string(), .progress = ProgressMode::quiet});
  (void)ops::add(ones({1 << 20}), 1.0);  // the OpenMP threads exist before the limit
  pthread_attr_t old_attr, huge;
  ASSERT_EQ(pthread_getattr_default_np(&old_attr), 0);
  ASSERT_EQ(pthread_attr_init(&huge), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&huge, size_t{1} << 50), 0);
  ASSERT_EQ(pthread_setattr_default_np(&huge), 0);
  bool can_start = true;
  try {
    std::thread([] {}).join();
  } catch (const std::system_error&) {
    can_start = false;
  }
  std::string err;
  if (!can_start) {
    try {
      t.run();
    } catch (const ConfigError& e) {
      err = e.what();
    } catch (const std::exception& e) {
      err = std::string("not a ConfigError: ") + e.what();
    }
  }
  pthread_setattr_default_np(&old_attr);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&old_attr);
  if (can_start) GTEST_SKIP() << "threads with a 1 PiB stack start here; nothing to test";
  EXPECT_TRUE(contains(err, "data.workers = 4: cannot start the data loader's worker threads") &&
              contains(err, "lower data.workers"))
      << err;
}

TEST_F(Reliability, IterationCountsCannotOverflow) {
  // 2^40 epochs pass the check of the key alone, but not with 16 iterations each.
  const std::string msg = error_of([&] {
    Trainer t(config({"solver.max_iters=0", "solver.max_epoch=1099511627776"}),
              {.out_dir = (tmp.root() / "run").string(), .progress = ProgressMode::quiet});
  });
  EXPECT_TRUE(contains(msg, "solver.max_epoch") && contains(msg, "16 iterations") &&
              contains(msg, "2^40"))
      << msg;
  for (const std::string s :
       {"solver.max_epoch=100000000000000000", "solver.max_iters=2199023255552"}) {
    const std::string m = error_of([&] { config({s}).validate(); });
    EXPECT_TRUE(contains(m, s.substr(0, s.find('='))) && contains(m, "at most 1099511627776")) << m;
  }
}

// A disk that fills while a checkpoint is written (here RLIMIT_FSIZE, which
// fails the write with EFBIG as ENOSPC would): an error that names the file,
// and the checkpoint already there is whole and unchanged.
TEST_F(Reliability, AFullDiskLeavesTheLastCheckpointWhole) {
#ifndef TCV_TRAIN
  GTEST_SKIP() << "tcv-train is not built";
#else
  const fs::path run = tmp.root() / "run";
  train(config({"solver.save_iters=1"}), run, 2);
  const std::string before = slurp(run / "checkpoints/latest.safetensors");
  std::string cmd = "trap '' XFSZ; ulimit -f 1024; exec '" + std::string(TCV_TRAIN) +
                    "' --config '" + tcv::testing::source_dir() +
                    "/configs/cls/fmnist_cnn.toml' --out '" + run.string() + "'";
  for (const auto& s : base_sets()) cmd += " --set '" + s + "'";
  cmd += " --set solver.save_iters=1 --set '" + resume_of(run) + "'";
  const auto r =
      tcv::testing::run_process({"/bin/bash", "-c", cmd}, (tmp.root() / "full.log").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "latest.safetensors") && contains(r.output, "File too large"))
      << r.output;
  EXPECT_EQ(slurp(run / "checkpoints/latest.safetensors"), before);
  EXPECT_EQ(load_trainer_state((run / "checkpoints/latest").string()).iter, 2);
  EXPECT_TRUE(temp_files(run / "checkpoints").empty());
#endif
}
