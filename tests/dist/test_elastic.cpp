// Data-parallel tcv-train runs that lose a process, through the real binaries:
// tcv-run with two Gloo ranks of the Fashion-MNIST CNN on a small subset.
//
//   Elastic: SIGKILL of rank 1 mid-epoch under --max-restarts; the run
//            restarts, resumes from the newest checkpoint (network.resume =
//            "auto") and ends with weights bit-identical to an uninterrupted run.
//   TrainFaults: a stopped (SIGSTOP) rank, ranks with different configs or
//            data, WORLD_SIZE without network.distributed, a missing rank.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data/idx.h"
#include "dist/launcher.h"
#include "dist/spawn.h"
#include "dist/train_runs.h"
#include "engine/json.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;
using namespace tcv;
using namespace std::chrono_literals;

#if defined(TCV_RUN) && defined(TCV_TRAIN)

namespace {

using test::checkpoint_iter;
using test::Clock;
using test::contains;
using test::Env;
using test::expect_bitwise_equal;
using test::find_rank;
using test::last_train_iter;
using test::run_to_end;
using test::RunResult;
using test::seconds_since;
using test::write_small_fmnist;

std::vector<std::string> train_cmd(const std::string& data_dir, const std::string& out,
                                   const std::vector<std::string>& sets) {
  return test::train_cmd(TCV_TRAIN, data_dir, out, sets);
}

// tcv-run --nproc-per-node 2 [launcher flags] -- cmd.
std::vector<std::string> under_tcv_run(const std::vector<std::string>& flags,
                                       const std::vector<std::string>& cmd) {
  return test::launch_cmd({TCV_RUN, "--nproc-per-node", "2"}, flags, cmd);
}

// Starts `argv`, waits until rank 0 has logged training iteration `at_iter`,
// then sends `sig` to rank `victim`. Returns the child (still running) or
// fails the test.
struct Started {
  test::Child launcher;
  pid_t victim = -1;
  double signalled_at = 0;  // seconds after the start
  int64_t iter_at_signal = 0;
};

Started start_and_signal(const std::vector<std::string>& argv, const fs::path& metrics,
                         int64_t at_iter, int victim, int sig) {
  Started s;
  const auto t0 = Clock::now();
  s.launcher = test::spawn(argv, {{"OMP_NUM_THREADS", "1"}});
  while (seconds_since(t0) < 60) {
    s.iter_at_signal = last_train_iter(metrics);
    if (s.iter_at_signal >= at_iter) break;
    int st = 0;
    if (waitpid(s.launcher.pid, &st, WNOHANG) == s.launcher.pid) {
      ADD_FAILURE() << "the run ended before iteration " << at_iter << ":\n"
                    << test::read_file(s.launcher.out_path);
      std::remove(s.launcher.out_path.c_str());
      return s;
    }
    std::this_thread::sleep_for(2ms);
  }
  s.victim = find_rank(s.launcher.pid, victim);
  EXPECT_GT(s.victim, 0) << "rank " << victim << " not found";
  if (s.victim > 0 && sig != 0) kill(s.victim, sig);
  s.signalled_at = seconds_since(t0);
  return s;
}

}  // namespace

// 2048 training images, batch 64 per rank: 16 iterations per epoch, 64 in all.
// Rank 1 is killed once rank 0 has logged iteration 21 (mid-epoch 2, just
// after the save at 20, so rank 0 is not writing one when it is stopped);
// `latest` is saved every 5 iterations, so at most 5 are done again.
TEST(Elastic, KilledRankRestartsAndEndsBitIdenticalToAnUninterruptedRun) {
  tcv::testing::TempDir tmp("elastic");
  write_small_fmnist(tmp.root() / "data", 2048, 256);
  const std::vector<std::string> sets = {"solver.max_iters=64", "solver.save_iters=5",
                                         "network.resume=\"auto\""};
  const fs::path a = tmp.root() / "a", b = tmp.root() / "b";

  const RunResult plain =
      run_to_end(under_tcv_run({}, train_cmd(tmp.path("data"), a.string(), sets)), {}, 120s);
  ASSERT_EQ(plain.status, 0) << plain.out;

  Started s = start_and_signal(
      under_tcv_run({"--max-restarts", "2"}, train_cmd(tmp.path("data"), b.string(), sets)),
      b / "metrics.jsonl", 21, /*victim=*/1, SIGKILL);
  ASSERT_GT(s.victim, 0);
  const int64_t saved_at_kill = checkpoint_iter(b / "checkpoints" / "latest");
  std::vector<test::Child> kids = {s.launcher};
  const auto t0 = Clock::now();
  const bool in_time = test::wait_all(kids, 120s);
  const std::string out = test::read_file(s.launcher.out_path);
  std::remove(s.launcher.out_path.c_str());
  ASSERT_TRUE(in_time) << "the restarted run did not finish:\n" << out;
  ASSERT_EQ(kids[0].status, 0) << out;

  const std::regex resumed_re(R"(resumed at epoch (\d+) iter (\d+))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, resumed_re)) << out;
  const int64_t resumed = std::stoll(m[2]);
  int restarts = 0;
  for (size_t p = 0; (p = out.find("tcv-run: restart ", p)) != std::string::npos; ++p) ++restarts;
  std::printf(
      "uninterrupted run: %.1f s; interrupted run: rank 1 (pid %d) SIGKILLed %.2f s after the "
      "start, after iteration %lld (latest checkpoint then: iter %lld); %d restart(s); resumed "
      "from iteration %lld (%lld iterations done again); finished %.1f s after the kill\n",
      plain.seconds, static_cast<int>(s.victim), s.signalled_at,
      static_cast<long long>(s.iter_at_signal), static_cast<long long>(saved_at_kill), restarts,
      static_cast<long long>(resumed), static_cast<long long>(s.iter_at_signal - resumed),
      seconds_since(t0));
  EXPECT_TRUE(contains(
      out, "tcv-run: rank 1 (pid " + std::to_string(s.victim) + ") was killed by signal 9"))
      << out;
  EXPECT_EQ(restarts, 1) << out;
  EXPECT_TRUE(contains(out, "tcv-run: restart 1 of 2")) << out;
  EXPECT_GE(resumed, 5) << "nothing was saved before the kill?\n" << out;
  EXPECT_LE(s.iter_at_signal - resumed, 5) << "more work lost than solver.save_iters";
  // Killed mid-epoch (epochs end at iterations 16, 32, 48, 64).
  EXPECT_GT(s.iter_at_signal, 16);
  EXPECT_LT(s.iter_at_signal, 32);
  EXPECT_EQ(checkpoint_iter(a / "checkpoints" / "latest"), 64);
  EXPECT_EQ(checkpoint_iter(b / "checkpoints" / "latest"), 64);
  expect_bitwise_equal(a / "checkpoints" / "latest.safetensors",
                       b / "checkpoints" / "latest.safetensors");
}

// A rank that hangs (SIGSTOP) stops the whole run within network.timeout,
// the error naming it; meanwhile rank 0 says what it waits for.
TEST(TrainFaults, StoppedRankStopsTheRunNamingIt) {
  tcv::testing::TempDir tmp("stopped");
  write_small_fmnist(tmp.root() / "data", 2048, 256);
  const fs::path out_dir = tmp.root() / "out";
  Started s =
      start_and_signal(under_tcv_run({}, train_cmd(tmp.path("data"), out_dir.string(),
                                                   {"solver.max_iters=100000", "network.timeout=3",
                                                    "network.wait_log_interval=1"})),
                       out_dir / "metrics.jsonl", 3, /*victim=*/1, SIGSTOP);
  ASSERT_GT(s.victim, 0);
  const auto t0 = Clock::now();
  std::vector<test::Child> kids = {s.launcher};
  const bool in_time = test::wait_all(kids, 30s);
  const double stop_s = seconds_since(t0);
  kill(s.victim, SIGKILL);  // when tcv-run did not
  const std::string out = test::read_file(s.launcher.out_path);
  std::remove(s.launcher.out_path.c_str());
  std::printf("rank 1 stopped after iteration %lld; the run ended %.2f s later:\n%s",
              static_cast<long long>(s.iter_at_signal), stop_s, out.c_str());
  ASSERT_TRUE(in_time) << out;
  EXPECT_EQ(kids[0].status, 1) << out;
  EXPECT_TRUE(contains(out, "lost rank 1 (on 127.0.0.1")) << out;
  EXPECT_TRUE(contains(out, "rank 0 is still waiting in collective #")) << out;
  EXPECT_TRUE(contains(out, "tcv-run: rank 0 (pid ")) << out;
  EXPECT_LT(stop_s, 3.0 + 4.0) << out;
}

// Every process below `root` (its children, theirs, ...), from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> kids;
  for (const auto& [pid, ppid] : test::processes()) kids[ppid].push_back(pid);
  std::vector<pid_t> out, todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : kids[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] != 'Z';
}

// Ranks started through a wrapper (a shell that runs tcv-train, then more)
// are not tcv-run's children, so PR_SET_PDEATHSIG does not reach them; they
// watch the pipe tcv-run holds and stop, wrapper and all, when it is killed.
// Before, both kept training 23 s after a kill -9 of tcv-run.
TEST(TrainFaults, RanksBehindAWrapperStopWhenTheLauncherIsKilled) {
  tcv::testing::TempDir tmp("wrapper");
  write_small_fmnist(tmp.root() / "data", 2048, 256);
  const fs::path out_dir = tmp.root() / "out";
  std::string line;
  for (const auto& a : train_cmd(tmp.path("data"), out_dir.string(), {"solver.max_iters=100000"}))
    line += " '" + a + "'";
  Started s = start_and_signal(under_tcv_run({}, {"/bin/sh", "-c", line + "; echo done"}),
                               out_dir / "metrics.jsonl", 2, /*victim=*/0, 0);
  std::vector<pid_t> trainers;
  for (pid_t p : descendants(s.launcher.pid)) {
    std::ifstream cmd("/proc/" + std::to_string(p) + "/cmdline");
    std::string c((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (c.rfind(TCV_TRAIN, 0) == 0) trainers.push_back(p);
  }
  ASSERT_EQ(trainers.size(), 2u);
  ASSERT_EQ(kill(s.launcher.pid, SIGKILL), 0);
  const auto t0 = Clock::now();
  bool gone = false;
  while (!gone && seconds_since(t0) < 10) {
    gone = !alive(trainers[0]) && !alive(trainers[1]);
    std::this_thread::sleep_for(10ms);
  }
  const double took = seconds_since(t0);
  for (pid_t p : trainers) kill(p, SIGKILL);  // when the test fails
  std::vector<test::Child> kids = {s.launcher};
  test::wait_all(kids, 5s);
  const std::string out = test::read_file(s.launcher.out_path);
  std::remove(s.launcher.out_path.c_str());
  std::printf("both tcv-train ranks behind /bin/sh gone %.2f s after kill -9 of tcv-run\n", took);
  EXPECT_TRUE(gone) << out;
  EXPECT_LT(took, 3.0) << out;
}

// Without tcv-run, rank 0 hosts the store; SIGSTOP of rank 0 stops the
// store too. Rank 1 keeps saying what it waits for (the store's silence
// included) and stops within the timeout. Before, it printed nothing for
// 31 s and stopped after 31 s against a 20 s network.timeout.
TEST(TrainFaults, StoppedStoreHostIsReportedAndTheOtherRankStopsWithinTheTimeout) {
  tcv::testing::TempDir tmp("storehost");
  write_small_fmnist(tmp.root() / "data", 2048, 256);
  const fs::path out_dir = tmp.root() / "out";
  const std::string port = std::to_string(dist::pick_free_port());
  std::vector<test::Child> kids;
  for (int r = 0; r < 2; ++r)
    kids.push_back(test::spawn(
        train_cmd(tmp.path("data"), out_dir.string(),
                  {"solver.max_iters=100000", "network.timeout=5", "network.wait_log_interval=1"}),
        {{"RANK", std::to_string(r)},
         {"WORLD_SIZE", "2"},
         {"MASTER_ADDR", "127.0.0.1"},
         {"MASTER_PORT", port},
         {"OMP_NUM_THREADS", "1"}}));
  const auto t0 = Clock::now();
  while (seconds_since(t0) < 60 && last_train_iter(out_dir / "metrics.jsonl") < 3)
    std::this_thread::sleep_for(2ms);
  ASSERT_GE(last_train_iter(out_dir / "metrics.jsonl"), 3) << test::read_file(kids[0].out_path);
  ASSERT_EQ(kill(kids[0].pid, SIGSTOP), 0);
  const auto stopped = Clock::now();
  std::vector<test::Child> rank1 = {kids[1]};
  const bool in_time = test::wait_all(rank1, 30s);
  const double took = seconds_since(stopped);
  kill(kids[0].pid, SIGKILL);
  std::vector<test::Child> rank0 = {kids[0]};
  test::wait_all(rank0, 5s);
  const std::string out = test::read_file(kids[1].out_path);
  for (auto& k : kids) std::remove(k.out_path.c_str());
  std::printf("rank 1 stopped %.1f s after rank 0 (and its store) was stopped:\n%s", took,
              out.c_str());
  EXPECT_TRUE(in_time) << out;
  EXPECT_EQ(rank1[0].status, 1) << out;
  EXPECT_LT(took, 5.0 + 4.0) << out;
  EXPECT_TRUE(contains(out, "rank 1 is still waiting in collective #")) << out;
  EXPECT_TRUE(contains(out, "has not answered for")) << out;
  EXPECT_TRUE(contains(
      out, "(the store at 127.0.0.1:" + port + " (hosted by rank 0) does not answer either"))
      << out;
}

// Ranks given different configs (solver.max_iters) stop at start-up naming
// the key; ranks with the same config but different data stop naming the
// schedule. Before, they hung for the timeout and ended in "Connection closed".
TEST(TrainFaults, RanksThatDisagreeStopAtStartUp) {
  tcv::testing::TempDir tmp("disagree");
  write_small_fmnist(tmp.root() / "d0" / "data", 2048, 256);
  write_small_fmnist(tmp.root() / "d1" / "data", 1024, 256);
  std::vector<std::string> cmd =
      train_cmd(tmp.path("d0/data"), tmp.path("out"), {"network.timeout=60"});
  std::string line = "exec";
  for (const auto& a : cmd) line += " '" + a + "'";
  const RunResult r = run_to_end(
      under_tcv_run({}, {"/bin/sh", "-c", line + " --set solver.max_iters=$((10 + RANK))"}), {},
      60s);
  std::printf("different max_iters: exit %d after %.2f s\n", r.status, r.seconds);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_LT(r.seconds, 20.0) << r.out;
  EXPECT_TRUE(contains(r.out, "ranks disagree on the config")) << r.out;
  EXPECT_TRUE(contains(r.out, "solver.max_iters: 10 on rank 0; 11 on rank 1")) << r.out;

  // The same config, run from two directories: data.data_dir = "data" is
  // another data set on each rank.
  cmd = train_cmd("data", tmp.path("out2"), {"network.timeout=60"});
  line = "cd '" + tmp.path() + "/d'$RANK && exec";
  for (const auto& a : cmd) line += " '" + a + "'";
  const RunResult d = run_to_end(under_tcv_run({}, {"/bin/sh", "-c", line}), {}, 60s);
  std::printf("different data: exit %d after %.2f s\n", d.status, d.seconds);
  EXPECT_EQ(d.status, 2) << d.out;
  EXPECT_LT(d.seconds, 20.0) << d.out;
  EXPECT_TRUE(contains(d.out, "ranks disagree on the training schedule")) << d.out;
  EXPECT_TRUE(contains(d.out, "16 on rank 0; 8 on rank 1")) << d.out;
}

// WORLD_SIZE > 1 (or a Slurm task other than the first) without
// network.distributed is refused; before, every rank trained alone into the
// same run directory.
TEST(TrainFaults, SeveralProcessesWithoutDistributedAreRefused) {
  tcv::testing::TempDir tmp("nodist");
  std::vector<std::string> cmd = train_cmd("/nonexistent", tmp.path("out"), {});
  cmd.insert(cmd.end(), {"--set", "network.distributed=false"});
  const RunResult r = run_to_end(
      cmd, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}},
      30s);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "network.distributed is false, but WORLD_SIZE=2")) << r.out;
  EXPECT_FALSE(fs::exists(tmp.root() / "out" / "metrics.jsonl"));
  const RunResult s = run_to_end(
      cmd, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}, 30s);
  EXPECT_EQ(s.status, 2) << s.out;
  EXPECT_TRUE(contains(s.out, "Slurm task SLURM_PROCID=1 of SLURM_NTASKS=2")) << s.out;
}

// WORLD_SIZE=2 with only rank 0 started: it says it waits for rank 1 and
// stops after network.timeout.
TEST(TrainFaults, MissingRankStopsAfterTheTimeoutNamingIt) {
  tcv::testing::TempDir tmp("missing");
  const std::string port = std::to_string(dist::pick_free_port());
  const RunResult r = run_to_end(
      train_cmd("/nonexistent", tmp.path("out"),
                {"network.timeout=2", "network.wait_log_interval=0.5"}),
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
      30s);
  std::printf("rank 0 alone: exit %d after %.2f s:\n%s", r.status, r.seconds, r.out.c_str());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "rank 0 is still waiting for rank 1 to join the gloo group"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "timed out after 2000 ms waiting for rank 1 to join")) << r.out;
  EXPECT_LT(r.seconds, 10.0) << r.out;
}

#endif
