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
#include <vector>

#include "data/idx.h"
#include "dist/spawn.h"
#include "engine/json.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "train/checkpoint.h"

namespace tcv::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using Env = std::map<std::string, std::string>;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Writes the first n samples of an IDX tensor (u8) as a raw IDX file.
inline void write_idx_head(const Tensor& t, int64_t n, const fs::path& p) {
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

// The first images of each Fashion-MNIST split, as IDX files in `dir`.
inline void write_small_fmnist(const fs::path& dir, int64_t n_train, int64_t n_test) {
  fs::create_directories(dir);
  const std::string src = "/usr/share/datasets/fashion-mnist/";
  write_idx_head(data::read_idx(src + "train-images-idx3-ubyte.gz"), n_train,
                 dir / "train-images-idx3-ubyte");
  write_idx_head(data::read_idx(src + "train-labels-idx1-ubyte.gz"), n_train,
                 dir / "train-labels-idx1-ubyte");
  write_idx_head(data::read_idx(src + "t10k-images-idx3-ubyte.gz"), n_test,
                 dir / "t10k-images-idx3-ubyte");
  write_idx_head(data::read_idx(src + "t10k-labels-idx1-ubyte.gz"), n_test,
                 dir / "t10k-labels-idx1-ubyte");
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

// The pid of the child of `parent` whose environment has RANK=rank (-1: none).
inline pid_t find_rank(pid_t parent, int rank) {
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
    if (ppid != parent) continue;
    std::ifstream env_file(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(env_file)), std::istreambuf_iterator<char>());
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos)
      return std::stoi(name);
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

// Every tensor of two checkpoints (model and optimizer state) holds the same bytes.
inline void expect_bitwise_equal(const fs::path& a, const fs::path& b) {
  const auto wa = load_safetensors(a.string()).tensors;
  const auto wb = load_safetensors(b.string()).tensors;
  ASSERT_EQ(wa.size(), wb.size());
  int optim = 0, differ = 0;
  for (size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wa[i].first, wb[i].first);
    const Tensor& x = wa[i].second;
    const Tensor& y = wb[i].second;
    ASSERT_EQ(x.shape(), y.shape()) << wa[i].first;
    ASSERT_EQ(x.dtype(), y.dtype()) << wa[i].first;
    const bool same = std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
    EXPECT_TRUE(same) << wa[i].first;
    differ += !same;
    optim += wa[i].first.rfind("optim.", 0) == 0;
  }
  EXPECT_GT(optim, 0);
  std::printf("compared %zu tensors (%d optimizer): %d differ\n", wa.size(), optim, differ);
}

}  // namespace tcv::test
