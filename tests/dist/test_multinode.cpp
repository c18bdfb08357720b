// Data-parallel training across machines made from network namespaces
// (tests/dist/netns.h): each machine runs its own tcv-run with --nnodes,
// --node-rank and --master-addr 10.77.0.1 (the first machine), and no address
// variable, as a new user would; the host name is this machine's, which
// resolves to 127.0.0.1 in most containers.
//
//   MultiMachine: 2 machines x 2 ranks, 3 x 1, and a segmentation config with
//       SyncBatchNorm end with weights bit-identical to one machine's run
//       with the same ranks; every machine says which address it bound.
//   MultiMachineFaults: a machine's tcv-run killed, a rank killed, a rank
//       stopped, the link cut: every machine stops within network.timeout
//       (plus a few seconds) with an error naming the lost rank and its
//       machine, having said what it waited for.
//   MultiMachineElastic: a rank on the second machine killed under
//       --max-restarts 1 with network.resume = "auto": every machine
//       restarts, and the weights equal an uninterrupted run's.
//   MultiMachineRendezvous: a wrong --master-addr, a closed port, machines
//       started with different --nnodes: named errors on every machine
//       within the rendezvous timeout.
// Each test prints its table row: machines x ranks, what happened, when each
// machine stopped. Without root or `ip netns` the tests skip, saying why.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dist/netns.h"
#include "dist/spawn.h"
#include "dist/train_runs.h"
#include "support/gradcheck.h"
#include "support/scenes_configs.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace std::chrono_literals;

#if defined(TCV_RUN) && defined(TCV_TRAIN)

namespace {

using test::Clock;
using test::contains;
using test::NetnsLab;
using test::seconds_since;

constexpr int kPort = 29562;

// The tcv-run of machine `node` of `nnodes`, rank 0's store on machine 0.
std::vector<std::string> launcher(const NetnsLab& lab, int nnodes, int node, int nproc,
                                  const std::vector<std::string>& flags,
                                  const std::vector<std::string>& cmd) {
  std::vector<std::string> argv = lab.exec_prefix(node);
  const std::vector<std::string> own = {TCV_RUN,
                                        "--nnodes",
                                        std::to_string(nnodes),
                                        "--node-rank",
                                        std::to_string(node),
                                        "--nproc-per-node",
                                        std::to_string(nproc),
                                        "--master-addr",
                                        NetnsLab::address(0),
                                        "--master-port",
                                        std::to_string(kPort)};
  argv.insert(argv.end(), own.begin(), own.end());
  return test::launch_cmd(std::move(argv), flags, cmd);
}

// The launchers of one job, one per machine: when each ended, what each printed.
struct Job {
  std::vector<test::Child> kids;
  std::vector<double> ended;  // seconds after `t0`; -1: still running
  Clock::time_point t0 = Clock::now();

  void start(const std::vector<std::string>& argv) {
    kids.push_back(test::spawn(argv, {{"OMP_NUM_THREADS", "1"}}));
    ended.push_back(-1);
  }
  // Waits for every launcher until `limit`, then kills the rest; true when
  // all ended by themselves.
  bool wait(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      bool running = false;
      for (size_t k = 0; k < kids.size(); ++k) {
        if (kids[k].status != -1) continue;
        int st = 0;
        if (waitpid(kids[k].pid, &st, WNOHANG) == kids[k].pid) {
          kids[k].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          ended[k] = seconds_since(t0);
        } else {
          running = true;
        }
      }
      if (!running) return true;
      if (Clock::now() > deadline) {
        for (auto& k : kids)
          if (k.status == -1) kill(k.pid, SIGKILL);
        test::wait_all(kids, 5s);
        return false;
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  std::string out(size_t k) const { return test::read_file(kids[k].out_path); }
  ~Job() {
    for (auto& k : kids) {
      if (k.status == -1) kill(k.pid, SIGKILL);
      std::remove(k.out_path.c_str());
    }
    test::wait_all(kids, 5s);
  }
};

// Waits until rank 0 has logged iteration `iter` in `metrics` (or `job` ended).
bool wait_for_iter(Job& job, const fs::path& metrics, int64_t iter) {
  const auto t0 = Clock::now();
  while (seconds_since(t0) < 90) {
    if (test::last_train_iter(metrics) >= iter) return true;
    for (auto& k : job.kids) {
      int st = 0;
      if (k.status == -1 && waitpid(k.pid, &st, WNOHANG) == k.pid) {
        k.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return false;
      }
    }
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

// The first `n` lines of a launcher's output that contain `part`, for the report.
std::string lines_with(const std::string& out, const std::string& part, int n = 2) {
  std::string s;
  size_t pos = 0;
  while (n > 0 && (pos = out.find(part, pos)) != std::string::npos) {
    const size_t b = out.rfind('\n', pos) == std::string::npos ? 0 : out.rfind('\n', pos) + 1;
    const size_t e = out.find('\n', pos);
    s += "    " + out.substr(b, e - b) + "\n";
    pos = e;
    --n;
  }
  return s;
}

class MultiMachineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = tmp_.root() / "data";
    test::write_small_fmnist(data_, 1024, 256);
  }
  // tcv-train on the CNN config: batch 32 per rank, `sets` on top.
  std::vector<std::string> train(const fs::path& out, std::vector<std::string> sets) const {
    sets.insert(sets.begin(), "train.batch_size=32");
    return test::train_cmd(TCV_TRAIN, data_.string(), out.string(), sets);
  }
  // One machine: tcv-run --nproc-per-node `nproc` on this host's loopback.
  static void run_one_machine(int nproc, const std::vector<std::string>& cmd) {
    std::vector<std::string> argv = {TCV_RUN, "--nproc-per-node", std::to_string(nproc), "--"};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    const test::RunResult r = test::run_to_end(argv, {}, 120s);
    ASSERT_EQ(r.status, 0) << r.out;
  }
  // `machines` machines x `nproc` ranks, every one to its end.
  void run_machines(const NetnsLab& lab, int machines, int nproc,
                    const std::vector<std::string>& cmd, Job& job) {
    for (int k = 0; k < machines; ++k) job.start(launcher(lab, machines, k, nproc, {}, cmd));
    ASSERT_TRUE(job.wait(180s)) << job.out(0) << "\n---\n" << job.out(1);
    for (int k = 0; k < machines; ++k) ASSERT_EQ(job.kids[k].status, 0) << job.out(k);
  }
  void expect_machines_equal_one(int machines, int nproc, int iters);

  tcv::testing::TempDir tmp_{"multinode"};
  fs::path data_;
};

// Every machine binds the address of its interface on the switch (the route
// to MASTER_ADDR), not the host name, and says so once.
void expect_bound_by_route(const Job& job, int machines, int nproc) {
  for (int k = 0; k < machines; ++k) {
    const std::string prefix = k == 0 ? "" : "[rank " + std::to_string(k * nproc) + "] ";
    const std::string want = prefix + "gloo: bound to " + NetnsLab::address(k) +
                             " (eth0, the route to MASTER_ADDR " + NetnsLab::address(0) + "; ";
    EXPECT_TRUE(contains(job.out(k), want)) << "machine " << k << ":\n" << job.out(k);
    std::printf("machine %d: %s", k, lines_with(job.out(k), "gloo: bound to", 1).c_str());
  }
}

}  // namespace

// `machines` x `nproc` ranks train fmnist_cnn for `iters` iterations and end
// where one machine's run with as many ranks does, bit for bit.
void MultiMachineTest::expect_machines_equal_one(int machines, int nproc, int iters) {
  NetnsLab lab(machines);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  const std::vector<std::string> sets = {"solver.max_iters=" + std::to_string(iters)};
  run_one_machine(machines * nproc, train(tmp_.root() / "one", sets));
  Job job;
  run_machines(lab, machines, nproc, train(tmp_.root() / "many", sets), job);
  expect_bound_by_route(job, machines, nproc);
  test::expect_bitwise_equal(tmp_.root() / "one/checkpoints/latest.safetensors",
                             tmp_.root() / "many/checkpoints/latest.safetensors");
  std::printf("%d machines x %d rank(s) vs 1 x %d, fmnist_cnn, %d iterations: bit-equal\n",
              machines, nproc, machines * nproc, iters);
}

TEST_F(MultiMachineTest, TwoMachinesOfTwoRanksEqualOneMachineOfFourBitForBit) {
  expect_machines_equal_one(2, 2, 12);
}

TEST_F(MultiMachineTest, ThreeMachinesOfOneRankEqualOneMachineOfThreeBitForBit) {
  expect_machines_equal_one(3, 1, 10);
}

// PSPNet on generated scenes with SyncBatchNorm: the group statistics cross
// the link in every layer's forward and backward.
TEST_F(MultiMachineTest, SegmentationWithSyncBatchNormOnTwoMachinesEqualsOneBitForBit) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  const fs::path toml = tmp_.root() / "seg.toml";
  std::ofstream(toml) << tcv::testing::kScenesSeg;
  auto cmd = [&](const std::string& out) {
    std::vector<std::string> argv = {TCV_TRAIN,
                                     "--config",
                                     toml.string(),
                                     "--out",
                                     (tmp_.root() / out).string(),
                                     "--set",
                                     "data.data_dir=\"" + (tmp_.root() / "scenes").string() + "\""};
    for (const char* set : {"train.batch_size=2", "val.batch_size=2", "network.distributed=true",
                            "network.sync_bn=true", "network.timeout=60", "solver.max_iters=12",
                            "solver.test_interval=12"})
      argv.insert(argv.end(), {"--set", set});
    return argv;
  };
  run_one_machine(2, cmd("one"));
  Job job;
  run_machines(lab, 2, 1, cmd("two"), job);
  expect_bound_by_route(job, 2, 1);
  test::expect_bitwise_equal(tmp_.root() / "one/checkpoints/latest.safetensors",
                             tmp_.root() / "two/checkpoints/latest.safetensors");
  std::printf(
      "2 machines x 1 rank vs 1 x 2, pspnet_resnet18 + SyncBatchNorm, 12 iterations: "
      "bit-equal\n");
}

namespace {

// A 2-machine run (1 rank each) that a fault ends: starts it, waits for
// iteration 3, injects the fault, and returns the job once both machines
// have stopped (or `limit` passed).
struct FaultRun {
  Job job;
  double fault_at = 0;  // seconds after the start
  bool in_time = false;
  double stop_s(size_t k) const { return job.ended[k] - fault_at; }
};

}  // namespace

class MultiMachineFaults : public MultiMachineTest {
 protected:
  static constexpr double kTimeout = 5;  // network.timeout in these runs

  std::vector<std::string> long_run() const {
    return train(tmp_.root() / "out", {"solver.max_iters=100000", "network.timeout=5",
                                       "network.wait_log_interval=1", "val.max_images=64"});
  }
  // Starts both machines, waits for iteration 3, runs `fault`, waits.
  template <typename F>
  void run_fault(const NetnsLab& lab, FaultRun& r, F&& fault,
                 const std::vector<std::string>& flags = {"--rdzv-timeout", "10"}) {
    for (int k = 0; k < 2; ++k) r.job.start(launcher(lab, 2, k, 1, flags, long_run()));
    ASSERT_TRUE(wait_for_iter(r.job, tmp_.root() / "out/metrics.jsonl", 3))
        << r.job.out(0) << "\n---\n"
        << r.job.out(1);
    r.fault_at = seconds_since(r.job.t0);
    fault();
    r.in_time = r.job.wait(60s);
  }
  static void report(const char* scenario, const FaultRun& r) {
    std::printf(
        "%s: machine 0 stopped %.1f s after the fault (exit %d), machine 1 %.1f s "
        "(exit %d)\n",
        scenario, r.stop_s(0), r.job.kids[0].status, r.stop_s(1), r.job.kids[1].status);
    for (size_t k = 0; k < 2; ++k)
      std::printf("  machine %zu:\n%s%s", k, lines_with(r.job.out(k), "error:", 1).c_str(),
                  lines_with(r.job.out(k), "tcv-run (node", 3).c_str());
  }
  // Both machines stopped, non-zero, within the timeout plus `slack` seconds.
  static void expect_both_stopped(const FaultRun& r, double slack) {
    ASSERT_TRUE(r.in_time) << r.job.out(0) << "\n---\n" << r.job.out(1);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_NE(r.job.kids[k].status, 0) << r.job.out(k);
      EXPECT_LT(r.stop_s(k), kTimeout + slack) << "machine " << k << ":\n" << r.job.out(k);
    }
  }

  // Runs the job and, mid-run, sends `sig` to rank 1 (on machine 1); its pid
  // (-1, and a test failure, when it was not found).
  pid_t run_signalling_rank1(const NetnsLab& lab, FaultRun& r, int sig) {
    pid_t victim = -1;
    run_fault(lab, r, [&] {
      victim = test::find_rank(r.job.kids[1].pid, 1);
      ASSERT_GT(victim, 0);
      kill(victim, sig);
    });
    return victim;
  }
};

TEST_F(MultiMachineFaults, LostMachineStopsTheOtherNamingTheRankAndItsMachine) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  FaultRun r;
  run_fault(lab, r, [&] { kill(r.job.kids[1].pid, SIGKILL); });  // machine 1's tcv-run
  report("machine 1's tcv-run SIGKILLed", r);
  ASSERT_TRUE(r.in_time) << r.job.out(0);
  EXPECT_EQ(r.job.kids[1].status, 128 + SIGKILL);
  EXPECT_NE(r.job.kids[0].status, 0) << r.job.out(0);
  EXPECT_LT(r.stop_s(0), kTimeout + 3) << r.job.out(0);
  EXPECT_TRUE(contains(r.job.out(0), "lost rank 1 (on " + NetnsLab::address(1))) << r.job.out(0);
  EXPECT_TRUE(contains(r.job.out(0), "tcv-run (node 0): rank 0 (local rank 0, pid "))
      << r.job.out(0);
}

// The first machine hosts the job's store in its tcv-run: losing it stops
// the second machine too, naming what it lost.
TEST_F(MultiMachineFaults, LostFirstMachineStopsTheOther) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  FaultRun r;
  run_fault(lab, r, [&] { kill(r.job.kids[0].pid, SIGKILL); });  // machine 0's tcv-run
  report("machine 0's tcv-run SIGKILLed", r);
  ASSERT_TRUE(r.in_time) << r.job.out(1);
  EXPECT_EQ(r.job.kids[0].status, 128 + SIGKILL);
  EXPECT_NE(r.job.kids[1].status, 0) << r.job.out(1);
  EXPECT_LT(r.stop_s(1), kTimeout + 3) << r.job.out(1);
  EXPECT_TRUE(contains(r.job.out(1), "lost rank 0 (on " + NetnsLab::address(0)) ||
              contains(r.job.out(1), "tcv-run (node 1): lost the job's store"))
      << r.job.out(1);
  // The second machine's own error came at once, not at the timeout.
  EXPECT_LT(r.stop_s(1), 2.5) << r.job.out(1);
}

TEST_F(MultiMachineFaults, KilledRankStopsEveryMachine) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  FaultRun r;
  const pid_t victim = run_signalling_rank1(lab, r, SIGKILL);
  report("rank 1 (machine 1) SIGKILLed", r);
  expect_both_stopped(r, 3);
  const std::string killed =
      "rank 1 (local rank 0, pid " + std::to_string(victim) + ") was killed by signal 9 (Killed)";
  EXPECT_TRUE(contains(r.job.out(1), "tcv-run (node 1): " + killed)) << r.job.out(1);
  // Machine 0 names it: its rank saw the peer go, or its tcv-run heard of it first.
  EXPECT_TRUE(contains(r.job.out(0), "lost rank 1 (on " + NetnsLab::address(1)) ||
              contains(r.job.out(0), "node 1 reports: " + killed))
      << r.job.out(0);
}

TEST_F(MultiMachineFaults, StoppedRankStopsEveryMachineWithinTheTimeout) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  FaultRun r;
  const pid_t victim = run_signalling_rank1(lab, r, SIGSTOP);
  report("rank 1 (machine 1) SIGSTOPped", r);
  if (victim > 0) kill(victim, SIGKILL);
  expect_both_stopped(r, 4);
  EXPECT_TRUE(contains(r.job.out(0), "rank 0 is still waiting in collective #")) << r.job.out(0);
  EXPECT_TRUE(contains(r.job.out(0), "lost rank 1 (on " + NetnsLab::address(1))) << r.job.out(0);
  EXPECT_TRUE(contains(r.job.out(1), "tcv-run (node 1): node 0 reports: rank 0 (local rank 0"))
      << r.job.out(1);
}

TEST_F(MultiMachineFaults, CutLinkStopsEveryMachineWithinTheTimeoutAfterWaitLines) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  FaultRun r;
  run_fault(lab, r, [&] { ASSERT_TRUE(lab.cut(1)); });
  report("machine 1's link cut", r);
  expect_both_stopped(r, 4);
  // Each machine said what it waited for before it stopped.
  EXPECT_TRUE(contains(r.job.out(0), "rank 0 is still waiting in collective #")) << r.job.out(0);
  EXPECT_TRUE(contains(r.job.out(1), "[rank 1] [gloo] rank 1 is still waiting in collective #"))
      << r.job.out(1);
  EXPECT_TRUE(contains(r.job.out(1), "the store at " + NetnsLab::address(0) + ":" +
                                         std::to_string(kPort) +
                                         " (hosted by tcv-run on the first machine) has not "
                                         "answered for"))
      << r.job.out(1);
  EXPECT_TRUE(contains(r.job.out(0), "lost rank 1 (on " + NetnsLab::address(1))) << r.job.out(0);
}

// Rank 1, on the second machine, is killed just after the save at iteration
// 10; both machines restart from it (the run directory is shared, as on a
// cluster's file system) and end bit-identical to one machine's run.
TEST_F(MultiMachineTest, KilledRankOnTheSecondMachineRestartsEveryMachineBitIdentical) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  const std::vector<std::string> sets = {"solver.max_iters=24", "solver.save_iters=5",
                                         "network.resume=\"auto\""};
  run_one_machine(2, train(tmp_.root() / "one", sets));
  Job job;
  const std::vector<std::string> flags = {"--max-restarts", "1", "--rdzv-timeout", "30"};
  for (int k = 0; k < 2; ++k)
    job.start(launcher(lab, 2, k, 1, flags, train(tmp_.root() / "two", sets)));
  ASSERT_TRUE(wait_for_iter(job, tmp_.root() / "two/metrics.jsonl", 11)) << job.out(0);
  const pid_t victim = test::find_rank(job.kids[1].pid, 1);
  ASSERT_GT(victim, 0);
  kill(victim, SIGKILL);
  const double killed_at = seconds_since(job.t0);
  ASSERT_TRUE(job.wait(120s)) << job.out(0) << "\n---\n" << job.out(1);
  std::printf(
      "rank 1 on machine 1 SIGKILLed at %.1f s; machine 0 finished %.1f s later, machine 1 "
      "%.1f s later\n%s%s",
      killed_at, job.ended[0] - killed_at, job.ended[1] - killed_at,
      lines_with(job.out(0), "restart 1 of 1").c_str(),
      lines_with(job.out(0), "resumed at").c_str());
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(job.kids[k].status, 0) << job.out(k);
    EXPECT_TRUE(contains(job.out(k),
                         "restart 1 of 1: starting all 1 local rank(s) again once "
                         "all 2 machines have joined"))
        << job.out(k);
  }
  EXPECT_TRUE(contains(job.out(0), "resumed at epoch")) << job.out(0);
  EXPECT_EQ(test::checkpoint_iter(tmp_.root() / "two/checkpoints/latest"), 24);
  test::expect_bitwise_equal(tmp_.root() / "one/checkpoints/latest.safetensors",
                             tmp_.root() / "two/checkpoints/latest.safetensors");
}

TEST_F(MultiMachineTest, BadRendezvousIsANamedErrorOnEveryMachine) {
  NetnsLab lab(2);
  if (!lab.ok()) GTEST_SKIP() << lab.skip_reason();
  const std::vector<std::string> cmd = train(tmp_.root() / "out", {"solver.max_iters=4"});
  auto run = [&](const char* scenario, const std::vector<std::string>& m0,
                 const std::vector<std::string>& m1) {
    Job job;
    job.start(m0);
    job.start(m1);
    EXPECT_TRUE(job.wait(40s)) << job.out(0) << "\n---\n" << job.out(1);
    std::printf("%s: machine 0 exit %d after %.1f s, machine 1 exit %d after %.1f s\n%s%s",
                scenario, job.kids[0].status, job.ended[0], job.kids[1].status, job.ended[1],
                lines_with(job.out(0), "tcv-run (node 0)", 1).c_str(),
                lines_with(job.out(1), "tcv-run (node 1)", 1).c_str());
    std::vector<std::string> outs = {job.out(0), job.out(1)};
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(job.kids[k].status, 1) << outs[k];
      EXPECT_LT(job.ended[k], 4 + 4.0) << outs[k];
    }
    return outs;
  };
  const std::vector<std::string> rdzv = {"--rdzv-timeout", "4"};

  // Machine 1 given an address nobody has.
  auto wrong = launcher(lab, 2, 1, 1, rdzv, cmd);
  for (size_t i = 0; i + 1 < wrong.size(); ++i)
    if (wrong[i] == "--master-addr") wrong[i + 1] = "10.77.0.99";
  auto outs = run("wrong --master-addr on machine 1", launcher(lab, 2, 0, 1, rdzv, cmd), wrong);
  EXPECT_TRUE(contains(outs[0], "tcv-run (node 0): node 1 did not join round 0 within 4.0 s"))
      << outs[0];
  EXPECT_TRUE(
      contains(outs[1], "could not connect to the store at 10.77.0.99:29562 within 4000 ms"))
      << outs[1];

  // Machine 1 given a port nobody listens on.
  auto closed = launcher(lab, 2, 1, 1, rdzv, cmd);
  for (size_t i = 0; i + 1 < closed.size(); ++i)
    if (closed[i] == "--master-port") closed[i + 1] = std::to_string(kPort + 1);
  outs = run("closed --master-port on machine 1", launcher(lab, 2, 0, 1, rdzv, cmd), closed);
  EXPECT_TRUE(contains(outs[0], "node 1 did not join round 0")) << outs[0];
  EXPECT_TRUE(contains(outs[1], "Connection refused")) << outs[1];

  // The machines disagree on --nnodes.
  auto three = launcher(lab, 3, 1, 1, rdzv, cmd);
  outs = run("--nnodes 2 on machine 0, 3 on machine 1", launcher(lab, 2, 0, 1, rdzv, cmd), three);
  for (const auto& o : outs)
    EXPECT_TRUE(contains(o, "the machines were started with different launch options")) << o;
  EXPECT_TRUE(contains(outs[0], "--nnodes 3 --nproc-per-node 1")) << outs[0];
}

#endif
