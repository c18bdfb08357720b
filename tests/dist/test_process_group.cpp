// ProcessGroup over Gloo with several processes on 127.0.0.1: each rank is a
// fork+exec of tcv_pg_worker; this process hosts the store on a free port.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/spawn.h"
#include "dist/store.h"
#include "engine/tensor.h"

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

RunResult run_workers(int world, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = 45s) {
  TcpStore server("127.0.0.1", 0, {.is_server = true, .world_size = world, .timeout = 30s});
  RunResult run;
  const auto t0 = Clock::now();
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {TCV_PG_WORKER};
    argv.insert(argv.end(), args.begin(), args.end());
    run.kids.push_back(test::spawn(argv, {{"RANK", std::to_string(r)},
                                          {"LOCAL_RANK", std::to_string(r)},
                                          {"WORLD_SIZE", std::to_string(world)},
                                          {"MASTER_ADDR", "127.0.0.1"},
                                          {"MASTER_PORT", std::to_string(server.port())},
                                          {"OMP_NUM_THREADS", "1"}}));
  }
  run.in_time = test::wait_all(run.kids, timeout);
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& k : run.kids) {
    run.out.push_back(test::read_file(k.out_path));
    std::remove(k.out_path.c_str());
  }
  return run;
}

void expect_all_passed(const RunResult& run) {
  EXPECT_TRUE(run.in_time) << "workers had to be killed";
  for (size_t r = 0; r < run.kids.size(); ++r)
    EXPECT_EQ(run.kids[r].status, 0) << "rank " << r << " output:\n" << run.out[r];
}

}  // namespace

TEST(ProcessGroupGloo, CollectivesWorld2) {
  expect_all_passed(run_workers(2, {"collectives"}));
}

TEST(ProcessGroupGloo, CollectivesWorld3) {
  expect_all_passed(run_workers(3, {"collectives"}));
}

TEST(ProcessGroupGloo, TwoAllReducesInFlight) {
  expect_all_passed(run_workers(2, {"async"}));
}

void expect_killed_rank_named(int victim, const std::string& count) {
  RunResult run = run_workers(3, {"kill", std::to_string(victim), count}, 30s);
  EXPECT_TRUE(run.in_time) << "a survivor hung";
  EXPECT_EQ(run.kids[victim].status, 128 + 9);
  for (int r = 0; r < 3; ++r) {
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
