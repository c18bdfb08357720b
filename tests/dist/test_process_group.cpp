// ProcessGroup over Gloo with several processes on 127.0.0.1: each rank is a
// fork+exec of tcv_pg_worker; this process hosts the store on a free port.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/spawn.h"
#include "dist/store.h"
#include "engine/tensor.h"
#include "support/run_files.h"

using namespace tcv;
using namespace tcv::dist;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct RunResult {
  std::vector<test::Child> kids;
  std::vector<std::string> out;
  bool in_time = false;
  double seconds = 0;
};

using Env = std::map<std::string, std::string>;

// Rank r's variables, as tcv-run sets them.
Env torchrun_env(int r, int world, int port) {
  return {{"RANK", std::to_string(r)},
          {"LOCAL_RANK", std::to_string(r)},
          {"WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}};
}

// Starts `started` of `world` ranks (0 .. started-1) with env_for(rank, port)
// plus `extra`; `on_start` runs once they are all spawned (e.g. to stop one).
RunResult run_workers(int world, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = 45s, const Env& extra = {},
                      int started = -1, Env (*env_for)(int, int, int) = torchrun_env) {
  TcpStore server("127.0.0.1", 0, {.is_server = true, .world_size = world, .timeout = 30s});
  RunResult run;
  const auto t0 = Clock::now();
  for (int r = 0; r < (started < 0 ? world : started); ++r) {
    std::vector<std::string> argv = {TCV_PG_WORKER};
    argv.insert(argv.end(), args.begin(), args.end());
    Env env = env_for(r, world, server.port());
    env["OMP_NUM_THREADS"] = "1";
    for (const auto& [k, v] : extra) env[k] = v;
    run.kids.push_back(test::spawn(argv, env));
  }
  run.in_time = test::wait_all(run.kids, timeout);
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& k : run.kids) {
    run.out.push_back(test::read_file(k.out_path));
    std::remove(k.out_path.c_str());
  }
  return run;
}

// Seconds from "ERROR after S s" in a worker's output (-1 when absent).
double error_after(const std::string& out) {
  const auto at = out.find("ERROR after ");
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 12));
}

using tcv::testing::contains;

void expect_all_passed(const RunResult& run) {
  EXPECT_TRUE(run.in_time) << "workers had to be killed";
  for (size_t r = 0; r < run.kids.size(); ++r)
    EXPECT_EQ(run.kids[r].status, 0) << "rank " << r << " output:\n" << run.out[r];
}

}  // namespace

TEST(ProcessGroupGloo, CollectivesWorld2) {
  expect_all_passed(run_workers(2, {"collectives"}));
}

// Two ranks on one machine all-reduce through shared memory; the TCP paths
// they would take otherwise (and take between machines) stay checked.
TEST(ProcessGroupGloo, CollectivesWorld2OverTcp) {
  expect_all_passed(run_workers(2, {"collectives"}, 45s, {{"TCV_GLOO_SHM", "0"}}));
}

// Ranks configured differently (only one says TCV_GLOO_SHM=0) agree on TCP
// rather than wait for each other.
TEST(ProcessGroupGloo, MixedSharedMemorySettingsAgreeOnTcp) {
  expect_all_passed(run_workers(2, {"async"}, 45s, {}, -1, [](int r, int world, int port) {
    Env env = torchrun_env(r, world, port);
    if (r == 0) env["TCV_GLOO_SHM"] = "0";
    return env;
  }));
}

TEST(ProcessGroupGloo, CollectivesWorld3) {
  expect_all_passed(run_workers(3, {"collectives"}));
}

TEST(ProcessGroupGloo, TwoAllReducesInFlight) {
  expect_all_passed(run_workers(2, {"async"}));
}

void expect_killed_rank_named(int victim, const std::string& count, int world = 3,
                              const Env& extra = {}) {
  RunResult run = run_workers(world, {"kill", std::to_string(victim), count}, 30s, extra);
  EXPECT_TRUE(run.in_time) << "a survivor hung";
  EXPECT_EQ(run.kids[victim].status, 128 + 9);
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const std::string& out = run.out[r];
    std::printf("rank %d said: %s", r, out.c_str());
    EXPECT_EQ(run.kids[r].status, 3) << "rank " << r << ":\n" << out;
    EXPECT_NE(out.find("ERROR after"), std::string::npos) << out;
    EXPECT_NE(out.find("rank " + std::to_string(victim)), std::string::npos)
        << "the error should name the lost rank:\n"
        << out;
    EXPECT_NE(out.find("SECOND ERROR"), std::string::npos) << out;
    // The collective timeout is 3 s; the error must come well before the test's limit.
    const auto at = out.find("ERROR after ");
    if (at != std::string::npos) {
      const double s = std::stod(out.substr(at + 12));
      EXPECT_LT(s, 8.0) << out;
    }
  }
}

// 16 MiB all-reduces take Gloo's ring path.
TEST(ProcessGroupGloo, KilledRankGivesErrorNamingItOnOthers) {
  expect_killed_rank_named(1, std::to_string(1 << 22));
}

// Small all-reduces take the cached halving-doubling path.
TEST(ProcessGroupGloo, KilledRankDuringSmallAllReduces) {
  expect_killed_rank_named(2, "1000");
}

// Two ranks: the shared-memory path, where no socket closes when the peer
// dies; the survivor sees it exit. No fingerprint checks, which would meet
// the closed socket first.
TEST(ProcessGroupGloo, KilledRankDuringSharedMemoryAllReduces) {
  expect_killed_rank_named(1, std::to_string(1 << 22), 2, {{"TCV_DISTRIBUTED_DEBUG", "OFF"}});
}

// Gloo's writev() to a peer that died raises SIGPIPE; a group of several
// ranks leaves it ignored so that the write fails and the error names the
// lost rank, instead of the signal killing the survivor first. A handler
// the program installed stays.
TEST(ProcessGroupGloo, WriteToAClosedPeerFailsInsteadOfKillingTheRank) {
  RunResult run = run_workers(2, {"sigpipe"});
  expect_all_passed(run);
  for (const auto& out : run.out)
    EXPECT_TRUE(contains(out, "write returned -1 (Broken pipe), 0 SIGPIPE handled")) << out;
  run = run_workers(2, {"sigpipe", "own"});
  expect_all_passed(run);
  for (const auto& out : run.out)
    EXPECT_TRUE(contains(out, "write returned -1 (Broken pipe), 1 SIGPIPE handled")) << out;
}

TEST(ProcessGroupGloo, SingleProcessGroupAndErrors) {
  auto store = std::make_shared<TcpStore>(
      "127.0.0.1", 0, TcpStoreOptions{.is_server = true, .world_size = 1, .timeout = 5s});
  ProcessGroupOptions po;
  po.timeout = 5s;
  auto pg = make_gloo_group(store, 0, 1, po);
  EXPECT_EQ(pg->backend_name(), "gloo");
  Tensor t = full({10}, 3.0);
  pg->all_reduce(t, ReduceOp::avg)->wait();
  EXPECT_EQ(t.to_vector<float>()[9], 3.0f);
  pg->barrier()->wait();
  Tensor strided = zeros({4, 4}).transpose(0, 1);
  EXPECT_THROW(pg->all_reduce(strided), Error);
  EXPECT_THROW(pg->broadcast(t, 1), Error);
  EXPECT_THROW(pg->all_gather(zeros({3}), zeros({2})), Error);
}

TEST(ProcessGroupNccl, ClearErrorWithoutCudaDevice) {
#ifdef TCV_WITH_CUDA
  GTEST_SKIP() << "CUDA build: NCCL is exercised on GPU machines";
#else
  auto store = std::make_shared<TcpStore>(
      "127.0.0.1", 0, TcpStoreOptions{.is_server = true, .world_size = 1, .timeout = 5s});
  try {
    make_nccl_group(store, 0, 1);
    FAIL() << "make_nccl_group should throw in a build without CUDA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TCV_WITH_CUDA"), std::string::npos) << e.what();
  }
#endif
}

// A rank that is stopped (SIGSTOP), not dead: the other one's collective times
// out after TCV_DIST_TIMEOUT and names it; meanwhile it says every
// TCV_DIST_WAIT_LOG_INTERVAL which collective it waits in and that rank 1's
// heartbeat stopped.
TEST(ProcessGroupGloo, StoppedRankIsNamedWithinTheTimeout) {
  TcpStore server("127.0.0.1", 0, {.is_server = true, .world_size = 2, .timeout = 30s});
  std::vector<test::Child> kids;
  for (int r = 0; r < 2; ++r) {
    Env env = torchrun_env(r, 2, server.port());
    env["OMP_NUM_THREADS"] = "1";
    env["TCV_DIST_TIMEOUT"] = "3";
    env["TCV_DIST_WAIT_LOG_INTERVAL"] = "1";
    kids.push_back(test::spawn({TCV_PG_WORKER, "loop"}, env));
  }
  // Let them loop, then stop rank 1.
  const auto deadline = Clock::now() + 20s;
  while (Clock::now() < deadline && !contains(test::read_file(kids[0].out_path), "LOOPING"))
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(contains(test::read_file(kids[0].out_path), "LOOPING"))
      << test::read_file(kids[0].out_path);
  ASSERT_EQ(kill(kids[1].pid, SIGSTOP), 0);
  const auto stopped = Clock::now();
  std::vector<test::Child> rank0 = {kids[0]};
  const bool in_time = test::wait_all(rank0, 15s);
  const double detect_s = std::chrono::duration<double>(Clock::now() - stopped).count();
  kill(kids[1].pid, SIGKILL);
  std::vector<test::Child> rank1 = {kids[1]};
  test::wait_all(rank1, 5s);
  const std::string out = test::read_file(kids[0].out_path);
  std::printf("rank 0 stopped %.2f s after rank 1 was; it said:\n%s", detect_s, out.c_str());
  for (auto& k : kids) std::remove(k.out_path.c_str());
  EXPECT_TRUE(in_time) << "rank 0 hung";
  EXPECT_EQ(rank0[0].status, 3) << out;
  EXPECT_TRUE(contains(out, "lost rank 1 (on 127.0.0.1")) << out;
  // Within the 3 s timeout plus the diagnosis (0.8 s) and slack.
  EXPECT_GE(detect_s, 2.5) << out;
  EXPECT_LT(detect_s, 7.0) << out;
  // While waiting it said what it waits for, and who is silent.
  EXPECT_TRUE(contains(out, "rank 0 is still waiting in collective #")) << out;
  EXPECT_TRUE(contains(out, "all_reduce sum (f32, 1000 elements)")) << out;
  EXPECT_TRUE(contains(out, "): no heartbeat for")) << out;
}

// WORLD_SIZE=2 with only rank 0 started: it says it waits for rank 1 to join,
// and gives up after the timeout naming rank 1.
TEST(ProcessGroupGloo, MissingRankIsNamedWhileWaitingAndInTheError) {
  RunResult run = run_workers(2, {"join"}, 20s,
                              {{"TCV_DIST_TIMEOUT", "2"}, {"TCV_DIST_WAIT_LOG_INTERVAL", "0.5"}},
                              /*started=*/1);
  const std::string& out = run.out[0];
  std::printf("rank 0 said:\n%s", out.c_str());
  EXPECT_TRUE(run.in_time);
  EXPECT_EQ(run.kids[0].status, 3) << out;
  EXPECT_TRUE(contains(out, "rank 0 is still waiting for rank 1 to join the gloo group")) << out;
  EXPECT_TRUE(contains(out, "timed out after 2000 ms waiting for rank 1 to join")) << out;
  const double s = error_after(out);
  EXPECT_GE(s, 1.9) << out;
  EXPECT_LT(s, 5.0) << out;
}

// Ranks that issue different collectives fail with a message naming both
// calls, on every rank, instead of Gloo aborting the process (an uncaught
// gloo::EnforceNotMet) or a hang. Checked before data moves in the first
// collectives; later, each rank sees the other blocked in another collective.
void expect_mismatch_named(const std::vector<std::string>& args, const std::string& rank0_call,
                           const std::string& rank1_call, const std::string& at) {
  RunResult run = run_workers(2, args, 30s, {{"TCV_DIST_TIMEOUT", "20"}});
  EXPECT_TRUE(run.in_time) << "a rank hung";
  for (int r = 0; r < 2; ++r) {
    const std::string& out = run.out[r];
    std::printf("rank %d said: %s", r, out.c_str());
    EXPECT_EQ(run.kids[r].status, 3) << "rank " << r << ":\n" << out;
    EXPECT_TRUE(contains(out, "ranks disagree on collective #" + at)) << out;
    EXPECT_TRUE(contains(out, "rank 0 issued #" + at + " " + rank0_call)) << out;
    EXPECT_TRUE(contains(out, "rank 1 issued #" + at + " " + rank1_call)) << out;
    const double s = error_after(out);
    EXPECT_GE(s, 0.0) << out;
    EXPECT_LT(s, 6.0) << "far below the 20 s timeout:\n" << out;
  }
}

TEST(ProcessGroupGloo, DifferentSizesAtTheFirstCollectiveAreNamed) {
  expect_mismatch_named({"mismatch", "0", "1000", "3000"}, "all_reduce sum (f32, 1000 elements)",
                        "all_reduce sum (f32, 3000 elements)", "0");
}

// Past the first 64 checked collectives: the ring path (tags differ, so no
// data crosses) and the cached halving-doubling path.
TEST(ProcessGroupGloo, DifferentSizesLaterAreNamedWithoutTheTimeout) {
  expect_mismatch_named({"mismatch", "80", "1000", "2000"}, "all_reduce sum (f32, 1000 elements)",
                        "all_reduce sum (f32, 2000 elements)", "80");
  expect_mismatch_named({"mismatch", "80", "100000", "200000"},
                        "all_reduce sum (f32, 100000 elements)",
                        "all_reduce sum (f32, 200000 elements)", "80");
}

// srun's variables alone describe the job: the first host of the node list
// hosts the store.
Env slurm_env(int r, int world, int port) {
  return {{"SLURM_PROCID", std::to_string(r)},
          {"SLURM_NTASKS", std::to_string(world)},
          {"SLURM_LOCALID", std::to_string(r)},
          {"SLURM_JOB_NODELIST", "localhost,node[02-03]"},
          {"MASTER_PORT", std::to_string(port)}};
}

TEST(ProcessGroupGloo, RanksFromSlurmVariables) {
  expect_all_passed(run_workers(2, {"async"}, 45s, {}, -1, slurm_env));
}
