// Data-parallel tcv-train runs driven by tests (tests/dist/test_elastic.cpp,
// test_multinode.cpp): a small Fashion-MNIST subset, the CNN config with the
// test's overrides, a run to its end with a deadline, the pid of a rank, the
// progress read from metrics.jsonl, and checkpoints compared byte for byte.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dist/spawn.h"
#include "engine/json.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "train/checkpoint.h"

namespace tcv::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using Env = std::map<std::string, std::string>;
using tcv::testing::contains;
using tcv::testing::expect_bitwise_equal;
using tcv::testing::write_small_fmnist;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A launcher's command line (`launcher`: tcv-run and its own flags), then
// `flags`, "--" and the command it starts.
inline std::vector<std::string> launch_cmd(std::vector<std::string> launcher,
                                           const std::vector<std::string>& flags,
                                           const std::vector<std::string>& cmd) {
  launcher.insert(launcher.end(), flags.begin(), flags.end());
  launcher.push_back("--");
  launcher.insert(launcher.end(), cmd.begin(), cmd.end());
  return launcher;
}

// `train_bin` (tcv-train) on the fmnist CNN config with `sets` on top of the common ones.
inline std::vector<std::string> train_cmd(const std::string& train_bin, const std::string& data_dir,
                                          const std::string& out,
                                          const std::vector<std::string>& sets) {
  std::vector<std::string> cmd = {train_bin, "--config",
                                  tcv::testing::source_dir() + "/configs/cls/fmnist_cnn.toml",
                                  "--out", out};
  const std::vector<std::string> common = {
      "data.data_dir=\"" + data_dir + "\"",
      "device=\"cpu\"",
      "data.workers=1",
      "val.max_images=256",
      "val.batch_size=256",
      "solver.display_iter=1",
      "solver.lr.is_warm=false",
      "solver.lr.lr_policy=\"step\"",
      "solver.lr.metric=\"iters\"",
      "solver.lr.step.step_size=20",
      "network.distributed=true",
      "network.timeout=30",
      // The same bucket cuts in every run: with 3+ ranks the ring's sum order
      // follows the cuts, and the timed plan cuts from measured times.
      "network.bucket_plan=\"cap\"",
  };
  for (const auto& s : common) cmd.insert(cmd.end(), {"--set", s});
  for (const auto& s : sets) cmd.insert(cmd.end(), {"--set", s});
  return cmd;
}

struct RunResult {
  int status = -1;
  std::string out;
  double seconds = 0;
};

inline RunResult run_to_end(const std::vector<std::string>& argv, const Env& env,
                            std::chrono::milliseconds limit) {
  Env e = env;
  e.emplace("OMP_NUM_THREADS", "1");
  const auto t0 = Clock::now();
  std::vector<test::Child> kids = {test::spawn(argv, e)};
  test::wait_all(kids, limit);
  RunResult r{kids[0].status, test::read_file(kids[0].out_path), seconds_since(t0)};
  std::remove(kids[0].out_path.c_str());
  return r;
}

// Every process now running, as (pid, parent pid), from /proc.
inline std::vector<std::pair<pid_t, pid_t>> processes() {
  std::vector<std::pair<pid_t, pid_t>> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    out.emplace_back(std::stoi(name), ppid);
  }
  return out;
}

// The pid of the child of `parent` whose environment has RANK=rank (-1: none).
inline pid_t find_rank(pid_t parent, int rank) {
  for (const auto& [pid, ppid] : processes()) {
    if (ppid != parent) continue;
    std::ifstream env_file("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(env_file)), std::istreambuf_iterator<char>());
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos)
      return pid;
  }
  return -1;
}

// The last training iteration in a metrics.jsonl (0: none yet).
inline int64_t last_train_iter(const fs::path& metrics) {
  std::ifstream f(metrics);
  std::string line;
  int64_t iter = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line.back() != '}') continue;  // a line being written
    try {
      const Json j = json_parse(line);
      if (json_string(j, "split") == "train") iter = json_int(j, "iter");
    } catch (const std::exception&) {
    }
  }
  return iter;
}

// The iteration of checkpoint `stem` (-1: none that reads).
inline int64_t checkpoint_iter(const fs::path& stem) {
  try {
    return train::load_trainer_state(stem.string()).iter;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace tcv::test
