// A checkpoint is one atomic unit: tcv-train saving every iteration is
// SIGKILLed at random points, again and again, each run resuming from what the
// previous one left. After every kill each checkpoint in the run directory must
// load, its trainer state must describe the weights beside it (the iteration
// equals the optimizer's step count), the temp files of earlier kills must be
// gone, and in the end the weights must equal those of an uninterrupted run, to
// the bit, with each iteration logged once in metrics.jsonl.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "apps/process.h"
#include "engine/json.h"
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
using Clock = std::chrono::steady_clock;

namespace {

// fmnist_cnn on 64 images in batches of 4: 16 iterations an epoch, `latest`
// saved after every one, `best` and `epoch_NNNN` after each epoch's evaluation.
std::vector<std::string> kill_config(const fs::path& data) {
  return {"data.data_dir=\"" + data.string() + "\"",
          "train.batch_size=4",
          "val.batch_size=8",
          "data.workers=1",
          "device=\"cpu\"",
          "solver.max_iters=100000",  // the kills come first
          "solver.lr.lr_policy=\"fixed\"",
          "solver.lr.is_warm=false",
          "solver.lr.base_lr=0.02",
          "solver.display_iter=1",
          "solver.save_iters=1",
          "solver.save_epoch=1",
          "checkpoints.keep_last=2"};
}

Config make_config(const std::vector<std::string>& sets) {
  Config c = Config::from_file(tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml");
  for (const auto& s : sets) c.set_override(s);
  return c;
}

// The temp files ("*.tmp.<pid>.<n>") in a directory, with their pids.
std::vector<std::pair<std::string, long>> temp_files(const fs::path& dir) {
  std::vector<std::pair<std::string, long>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    const size_t t = f.rfind(".tmp.");
    if (t == std::string::npos) continue;
    out.emplace_back(f, std::atol(f.c_str() + t + 5));
  }
  return out;
}

// "" when checkpoint `stem` loads into a fresh model and optimizer and its
// trainer state's iteration equals the optimizer's step count; else what is
// wrong. `gap` receives step - iteration.
std::string check_checkpoint(const Config& cfg, const std::string& stem, int64_t& gap) {
  gap = 0;
  try {
    models::register_builtin_models();
    auto model = models::create_model("fmnist_cnn", {10, 1});
    auto optim = make_optimizer(cfg, model->named_parameters());
    const TrainerState s = load_checkpoint(stem, *model, optim.get());
    gap = optim->step_count() - s.iter;
    if (gap != 0)
      return stem + ": trainer state at iteration " + std::to_string(s.iter) +
             ", weights and optimizer at step " + std::to_string(optim->step_count());
  } catch (const std::exception& e) {
    return stem + ": does not load: " + e.what();
  }
  return "";
}

// The checkpoints of a run directory (their stems).
std::vector<std::string> checkpoint_stems(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") out.push_back((dir / e.path().stem()).string());
  std::sort(out.begin(), out.end());
  return out;
}

void expect_same_tensors(const fs::path& a, const fs::path& b) {
  const auto ta = load_safetensors(a.string()).tensors;
  const auto tb = load_safetensors(b.string()).tensors;
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    ASSERT_EQ(ta[i].first, tb[i].first);
    ASSERT_EQ(ta[i].second.shape(), tb[i].second.shape()) << ta[i].first;
    EXPECT_EQ(std::memcmp(ta[i].second.data_ptr(), tb[i].second.data_ptr(), ta[i].second.nbytes()),
              0)
        << ta[i].first << " differs from the uninterrupted run";
  }
}

}  // namespace

TEST(CheckpointKill, RandomKillsWhileSavingLeaveConsistentCheckpoints) {
#ifndef TCV_TRAIN
  GTEST_SKIP() << "tcv-train is not built (TCV_BUILD_APPS=OFF)";
#else
  tcv::testing::TempDir tmp("kill");
  const fs::path data = tmp.root() / "data", run = tmp.root() / "run";
  tcv::testing::write_small_fmnist(data, 64, 8);
  const std::vector<std::string> sets = kill_config(data);
  const Config cfg = make_config(sets);
  const fs::path ck = run / "checkpoints";

  constexpr int kKills = 50;
  // A bound: 50 kills take 20 s on 2 idle cores, 80 s with other tests running beside.
  const auto budget = std::chrono::seconds(240);
  std::mt19937_64 rng(20240601);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int kills = 0, mid_write = 0, early = 0, self_exits = 0;
  std::vector<std::string> problems;  // inconsistent or unloadable checkpoints, stale temp files
  int bad_kills = 0;                  // kills after which a check failed
  int new_gaps = 0;  // kills that moved latest's trainer state away from its weights
  int64_t iter = 0;  // where `latest` stands
  int64_t latest_gap = 0;
  const auto t0 = Clock::now();
  while (kills < kKills && Clock::now() - t0 < budget) {
    std::vector<std::string> argv = {TCV_TRAIN, "--config",
                                     tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml",
                                     "--out", run.string()};
    for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
    if (fs::exists(ck / "latest.safetensors"))
      argv.insert(argv.end(), {"--set", "network.resume=\"" + run.string() + "\""});
    const auto p = tcv::testing::start_process(argv, (tmp.root() / "child.log").string());
    ASSERT_GT(p.pid, 0);
    int status = 0;
    bool exited = false;
    bool progressed = false;  // it saved a new `latest`: it was past its setup
    const double mode = unit(rng);
    if (mode < 0.2) {
      // Anywhere, setup included (resume, removal of temp files, metrics rewrite).
      ++early;
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(6e5 * unit(rng))));
    } else {
      // Once it has saved a new `latest`: then within the next iterations, or
      // as soon as it writes a checkpoint again (its temp file appears), within
      // a few milliseconds, so that many kills land inside a save.
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      while (!(exited = tcv::testing::has_exited(p, status)) && Clock::now() < deadline) {
        try {
          if (load_trainer_state((ck / "latest").string()).iter > iter) {
            progressed = true;
            break;
          }
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (!exited && mode < 0.6) {
        std::this_thread::sleep_for(
            std::chrono::microseconds(static_cast<int64_t>(1.5e5 * unit(rng))));
      } else if (!exited) {
        auto writing = [&] {
          for (const auto& [f, pid] : temp_files(ck))
            if (pid == p.pid) return true;
          return false;
        };
        while (!writing() && !(exited = tcv::testing::has_exited(p, status)) &&
               Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::microseconds(500));
        std::this_thread::sleep_for(
            std::chrono::microseconds(static_cast<int64_t>(5e3 * unit(rng))));
      }
    }
    if (!exited) {
      kill(p.pid, SIGKILL);
      status = tcv::testing::wait_process(p, std::chrono::seconds(30));
    }
    if (status != 128 + SIGKILL) {
      ++self_exits;
      problems.push_back("run " + std::to_string(kills) + " ended by itself (status " +
                         std::to_string(status) +
                         "): " + tcv::testing::read_text(p.out_path).substr(0, 2000));
      if (self_exits > 3) break;
      continue;
    }
    ++kills;
    // Temp files: once past its setup, a run has removed those of earlier
    // runs, so only its own may be there (a run killed during its setup may
    // leave those of the run before it too).
    bool own = false;
    for (const fs::path& d : {run, ck})
      for (const auto& [f, pid] : temp_files(d)) {
        if (pid == p.pid)
          own = true;
        else if (progressed)
          problems.push_back("after kill " + std::to_string(kills) + ": stale temp file " + f +
                             " of an earlier run");
      }
    mid_write += own;
    const size_t problems_before = problems.size();
    for (const auto& stem : checkpoint_stems(ck)) {
      int64_t gap = 0;
      if (const std::string bad = check_checkpoint(cfg, stem, gap); !bad.empty())
        problems.push_back("after kill " + std::to_string(kills) + ": " + bad);
      if (stem == (ck / "latest").string() && gap != latest_gap) {
        ++new_gaps;
        latest_gap = gap;
      }
    }
    bad_kills += problems.size() > problems_before;
    if (fs::exists(ck / "latest.safetensors")) {
      try {
        iter = load_trainer_state((ck / "latest").string()).iter;
      } catch (const std::exception& e) {
        problems.push_back(std::string("latest: ") + e.what());
      }
    }
  }
  const double kill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << "[ kill test ] " << kills << " kills in " << kill_s << " s (" << early
            << " at any time, " << kills - early << " after a save; " << mid_write
            << " left a temp file, i.e. landed mid-write); latest at iteration " << iter << "; "
            << bad_kills << " kills left a checkpoint that does not load or whose trainer state "
            << "is not that of its weights (" << new_gaps << " of them moved latest's state "
            << "away from its weights); " << self_exits << " runs ended by themselves\n";
  for (size_t i = 0; i < problems.size() && i < 20; ++i) ADD_FAILURE() << problems[i];
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems";
  if (kills < kKills) std::cout << "[ kill test ] the time bound stopped the kills early\n";
  EXPECT_GE(kills, kKills / 2) << "too few kills within the time bound";
  EXPECT_GT(iter, 0);
  EXPECT_GT(mid_write, 0) << "no kill landed while a file was written";

  // One more iteration from there, in this process; then the same run unbroken.
  {
    Config r = cfg;
    r.set_override("network.resume=\"" + run.string() + "\"");
    Trainer t(r, {.out_dir = run.string(),
                  .progress = ProgressMode::quiet,
                  .log = nullptr,
                  .stop_at_iter = iter + 1});
    EXPECT_EQ(t.run().iters, iter + 1);
  }
  for (const fs::path& d : {run, ck}) EXPECT_TRUE(temp_files(d).empty()) << d;
  const fs::path ref = tmp.root() / "ref";
  {
    Config c = cfg;
    c.set_override("solver.save_iters=0");  // saving does not change the numbers
    Trainer t(c, {.out_dir = ref.string(),
                  .progress = ProgressMode::quiet,
                  .log = nullptr,
                  .stop_at_iter = iter + 1});
    t.run();
  }
  expect_same_tensors(ck / "latest.safetensors", ref / "checkpoints" / "latest.safetensors");
  // metrics.jsonl: every iteration once, in order.
  std::vector<int64_t> logged;
  std::ifstream f(run / "metrics.jsonl");
  std::string line;
  int64_t bad_lines = 0;
  while (std::getline(f, line)) {
    try {
      const Json j = json_parse(line);
      if (json_string(j, "split") == "train") logged.push_back(json_int(j, "iter"));
    } catch (const std::exception&) {
      ++bad_lines;
    }
  }
  EXPECT_EQ(bad_lines, 0);
  std::vector<int64_t> expected(static_cast<size_t>(iter + 1));
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int64_t>(i) + 1;
  size_t first_diff = 0;
  while (first_diff < std::min(logged.size(), expected.size()) &&
         logged[first_diff] == expected[first_diff])
    ++first_diff;
  EXPECT_EQ(logged, expected) << "metrics.jsonl departs from 1, 2, ... at line " << first_diff
                              << " of " << logged.size();
#endif
}
