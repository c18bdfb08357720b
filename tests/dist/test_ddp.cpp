// DistributedDataParallel across processes: `world` tcv_ddp_worker processes
// (fork + exec) on 127.0.0.1 over Gloo; each checks its parameters and buffers
// against one process trained on the union of the ranks' batches.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "data/dataset.h"
#include "dist/hook_reference.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/config.h"
#include "train/trainer.h"

#ifndef TCV_DDP_WORKER
#error "TCV_DDP_WORKER must name the worker executable"
#endif

namespace {

using tcv::testing::slurp;

// Starts `world` workers for `scenario` in `dir`; returns "" when all exit 0, else their output.
std::string run_workers_in(const tcv::testing::TempDir& dir, const std::string& scenario,
                           int world);

std::string run_workers(const std::string& scenario, int world) {
  tcv::testing::TempDir dir("ddp_" + scenario);
  return run_workers_in(dir, scenario, world);
}

std::string run_workers_in(const tcv::testing::TempDir& dir, const std::string& scenario,
                           int world) {
  const std::string rdv = (dir.root() / "port").string();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const std::string log = (dir.root() / ("rank" + std::to_string(r) + ".log")).string();
    const pid_t pid = fork();
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f) dup2(fileno(stdout), STDERR_FILENO);
      setenv("OMP_NUM_THREADS", "1", 1);
      const std::string rs = std::to_string(r), ws = std::to_string(world);
      execl(TCV_DDP_WORKER, TCV_DDP_WORKER, scenario.c_str(), rs.c_str(), ws.c_str(), rdv.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(world, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(45);
  int left = world;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world; ++r)
        if (status[r] == -1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          status[r] = 999;
        }
      break;
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string out;
  bool ok = true;
  for (int r = 0; r < world; ++r) {
    const std::string log = slurp((dir.root() / ("rank" + std::to_string(r) + ".log")).string());
    ok = ok && status[r] == 0 && log.find("ok") != std::string::npos;
    out += "rank " + std::to_string(r) + " exit " + std::to_string(status[r]) + ": " + log;
  }
  return ok ? "" : out;
}

// Each worker scenario (tests/dist/ddp_worker.cpp) and its world size: every
// rank prints "ok" when its checks pass.
struct WorkerCase {
  const char* name;  // the test's name
  const char* scenario;
  int world;
};

// What ctest lists as GetParam(): the scenario and the world.
void PrintTo(const WorkerCase& c, std::ostream* os) {
  *os << c.scenario << " on " << c.world << " ranks";
}

class DDPGlooWorkers : public ::testing::TestWithParam<WorkerCase> {};

TEST_P(DDPGlooWorkers, AllRanksPass) {
  EXPECT_EQ(run_workers(GetParam().scenario, GetParam().world), "");
}

INSTANTIATE_TEST_SUITE_P(
    DDPGloo, DDPGlooWorkers,
    ::testing::Values(WorkerCase{"EqualsUnionBatchWorld2", "sgd", 2},
                      WorkerCase{"EqualsUnionBatchWorld3", "sgd", 3},
                      WorkerCase{"Bf16CompressionHook", "bf16", 2},
                      WorkerCase{"NoSyncAccumulation", "nosync", 2},
                      WorkerCase{"FindUnusedParameters", "unused", 2},
                      WorkerCase{"UnusedParameterWithoutFlagIsAClearError", "unused_error", 2}),
    [](const ::testing::TestParamInfo<WorkerCase>& info) { return std::string(info.param.name); });

// ---- comm hooks on Gloo ranks ------------------------------------------------
//
// Real Gloo ranks with SyncBatchNorm: collectives finish at different times on
// each rank, and PowerSGD's chain (the rest and P, then Q) runs beside
// SyncBatchNorm's all-reduces on the same group; every fingerprint is
// compared, so ranks that issued them in different orders would fail. Each
// rank records what its hook got and gave; the hook's f64 reference over all
// ranks' inputs must give what they gave, within the bounds of
// tests/dist/hook_reference.h, and the bytes each step put on the wire must be
// exactly the bucket's compressed size.

struct HookCall {
  int64_t index = 0;
  bool is_last = false;
  std::vector<tcv::Shape> shapes;
  std::vector<std::vector<double>> in, out;  // per rank
};

std::vector<HookCall> read_hook_calls(const tcv::testing::TempDir& dir, int world,
                                      std::map<std::string, std::string>& meta) {
  std::vector<HookCall> calls;
  for (int r = 0; r < world; ++r) {
    const auto f = tcv::load_safetensors(
        (dir.root() / ("hooks_rank" + std::to_string(r) + ".safetensors")).string());
    if (r == 0) meta = f.metadata;
    std::map<std::string, tcv::Tensor> t(f.tensors.begin(), f.tensors.end());
    for (size_t k = 0;; ++k) {
      std::string key = "k";
      key += std::to_string(k);
      if (!f.metadata.count(key)) break;
      if (r == 0) {
        HookCall c;
        std::istringstream is(f.metadata.at(key));
        int last = 0;
        is >> c.index >> last;
        c.is_last = last != 0;
        size_t nd = 0;
        while (is >> nd) {
          tcv::Shape sh(nd);
          for (auto& d : sh) is >> d;
          c.shapes.push_back(sh);
        }
        calls.push_back(c);
      }
      EXPECT_LT(k, calls.size()) << "rank " << r << " made more hook calls than rank 0";
      if (k >= calls.size()) break;
      calls[k].in.push_back(t.at(key + ".in").to_vector<double>());
      calls[k].out.push_back(t.at(key + ".out").to_vector<double>());
    }
  }
  return calls;
}

void check_powersgd_on_gloo(const std::string& scenario, int world) {
  using namespace tcv::dist::testing;
  tcv::testing::TempDir dir("ddp_" + scenario);
  ASSERT_EQ(run_workers_in(dir, scenario, world), "");
  std::map<std::string, std::string> meta;
  const auto calls = read_hook_calls(dir, world, meta);
  const tcv::dist::PowerSGDOptions o = gloo_test_powersgd();
  PowerSGDReference ref(o, world);
  int64_t step = 0, compressed = 0, bytes = 0, max_dims = 0;
  double worst = 0;
  for (const HookCall& c : calls) {
    ASSERT_EQ(static_cast<int>(c.out.size()), world);
    const bool compressing = step >= o.start_powerSGD_iter;
    if (compressing && c.index == 0) ++compressed;
    const auto want = ref.run(c.index, c.is_last, c.shapes, c.in);
    for (const auto& sh : c.shapes) {
      const int64_t n = sh[0], m = tcv::shape_numel(sh) / n;
      const int64_t r = std::min({n, m, o.matrix_approximation_rank});
      max_dims = std::max(max_dims, n + m + r);
      const bool comp =
          static_cast<double>((n + m) * r) * o.min_compression_rate < static_cast<double>(n * m);
      bytes += 4 * (compressing && comp ? (n + m) * r : n * m);
    }
    // Gloo sums P and Q in f32 (the reference in f64): within the same bound.
    const double bound = compressing ? powersgd_bound(compressed, max_dims, ref.kappa()) : 3 * kU32;
    for (int r = 0; r < world; ++r) {
      const double e = max_rel_diff(c.out[r], want[r]) / bound;
      EXPECT_LE(e, 1.0) << "step " << step << " bucket " << c.index << " rank " << r;
      worst = std::max(worst, e);
    }
    if (c.is_last) {
      EXPECT_EQ(meta.at("bytes.s" + std::to_string(step)), std::to_string(bytes))
          << "step " << step;
      ++step;
      bytes = 0;
    }
  }
  EXPECT_EQ(step, 5);
  EXPECT_GT(compressed, 0);
}

TEST(DDPGlooHooks, PowerSGDWithSyncBatchNormMatchesTheReference) {
  check_powersgd_on_gloo("hook_powersgd", 3);
}
TEST(DDPGlooHooks, PowerSGDWithNoSyncAndSyncBatchNormMatchesTheReference) {
  check_powersgd_on_gloo("hook_powersgd_nosync", 2);
}
TEST(DDPGlooHooks, Fp16WithNoSyncAndSyncBatchNormWithinItsBound) {
  using namespace tcv::dist::testing;
  tcv::testing::TempDir dir("ddp_hook_fp16");
  ASSERT_EQ(run_workers_in(dir, "hook_fp16_nosync", 2), "");
  std::map<std::string, std::string> meta;
  const auto calls = read_hook_calls(dir, 2, meta);
  int64_t step = 0, bytes = 0;
  for (const HookCall& c : calls) {
    const auto mean = mean_over_ranks(c.in);
    for (size_t i = 0; i < mean.size(); ++i) {
      const double a = (std::abs(c.in[0][i]) + std::abs(c.in[1][i])) / 2;
      const double bound = compression_bound(kUf16, a, mean[i], kF16Subnormal);
      for (int r = 0; r < 2; ++r)
        ASSERT_LE(std::abs(c.out[r][i] - mean[i]), bound) << "call bucket " << c.index << " " << i;
    }
    bytes += 2 * static_cast<int64_t>(mean.size());
    if (c.is_last) {
      EXPECT_EQ(meta.at("bytes.s" + std::to_string(step++)), std::to_string(bytes));
      bytes = 0;
    }
  }
  EXPECT_EQ(step, 5);
}

// tcv-train's path with network.distributed = true on 2 processes, per-rank batch
// 16, equals one process with batch 32: the DistributedSampler's i-th batches of
// all ranks together are the single process's i-th batch, the model (fmnist_cnn)
// has no BatchNorm, and the gradients are averaged. Rank 0 alone writes the run
// directory; evaluation counts are summed over the ranks.
TEST(DDPGloo, TrainerMatchesOneProcessWithTheGlobalBatch) {
  namespace fs = std::filesystem;
  tcv::testing::TempDir dir("ddp_trainer");
  const std::string toml =
      "seed = 3\ndevice = \"cpu\"\n[data]\ndataset = \"fashion_mnist\"\nworkers = 0\n"
      "[train]\nbatch_size = 16\n[val]\nbatch_size = 50\nmax_images = 200\n"
      "[network]\nmodel_name = \"fmnist_cnn\"\ndistributed = true\n"
      "[solver]\nmax_iters = 5\ndisplay_iter = 5\n[solver.lr]\nbase_lr = 0.05\n";
  std::ofstream(dir.root() / "config.toml") << toml;
  ASSERT_EQ(run_workers_in(dir, "trainer", 2), "");

  tcv::train::Config ref = tcv::train::Config::from_string(toml, "ref.toml");
  ref.set_override("network.distributed=false");
  ref.set_override("train.batch_size=32");
  tcv::train::TrainOptions o;
  o.out_dir = (dir.root() / "ref").string();
  o.progress = tcv::train::ProgressMode::quiet;
  tcv::train::Trainer(ref, o).run();

  const auto got =
      tcv::load_safetensors((dir.root() / "ddp/checkpoints/latest.safetensors").string());
  const auto want =
      tcv::load_safetensors((dir.root() / "ref/checkpoints/latest.safetensors").string());
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  int compared = 0;
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    ASSERT_EQ(got.tensors[i].first, want.tensors[i].first);
    if (!tcv::is_floating(got.tensors[i].second.dtype())) continue;
    tcv::testing::expect_close(got.tensors[i].second, want.tensors[i].second, 1e-5, 1e-4,
                               got.tensors[i].first);
    ++compared;
  }
  EXPECT_GT(compared, 0);
  // The val line counts every image once, over both ranks.
  std::ifstream m(dir.root() / "ddp/metrics.jsonl");
  std::string line, last;
  while (std::getline(m, line)) last = line;
  EXPECT_NE(last.find("\"images\":200"), std::string::npos) << last;
}

// The trainer's loader under network.distributed: each rank iterates its
// DistributedSampler share; all ranks run the same number of batches and
// together cover the epoch (padded by repeating its start).
TEST(DistributedLoader, RanksShareEachEpoch) {
  const int64_t n = 23, world = 3, batch = 4;
  std::vector<uint8_t> px(static_cast<size_t>(n));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    px[i] = static_cast<uint8_t>(i);
    y[i] = i % 2;
  }
  auto ds = std::make_shared<tcv::data::ImageClassificationDataset>(
      tcv::from_vector(px, {n, 1, 1, 1}), tcv::from_vector(y, {n}), 2, "toy");
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    int64_t total = 0;
    for (int64_t r = 0; r < world; ++r) {
      tcv::data::LoaderOptions o;
      o.batch_size = batch;
      o.seed = 5;
      o.world_size = world;
      o.rank = r;
      o.normalize.div_value = 1.0;
      tcv::data::DataLoader loader(ds, o);
      EXPECT_EQ(loader.num_batches(), 2);  // ceil(23 / 3) = 8 samples per rank
      loader.start_epoch(epoch);
      tcv::data::Batch b;
      int64_t batches = 0;
      while (loader.next(b)) {
        ++batches;
        for (float v : b.x.to_vector<float>()) {
          ++seen[static_cast<size_t>(v)];
          ++total;
        }
      }
      EXPECT_EQ(batches, 2);
    }
    EXPECT_EQ(total, 24);  // 23 + 1 padding
    for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen[i], 1) << "sample " << i << " epoch " << epoch;
  }
}

}  // namespace
