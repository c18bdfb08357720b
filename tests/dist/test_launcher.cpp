// tcv-run: argument parsing and rank environments in-process; the launcher
// itself through fork+exec of the tcv-run binary (shell one-liners as ranks),
// and `tcv-bench allreduce -c 1` under it with two Gloo ranks.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "dist/launcher.h"
#include "dist/spawn.h"
#include "kernels/base.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::dist;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  int status = -1;
  std::string out;
  double seconds = 0;
};

#ifdef TCV_RUN
Result run(const std::vector<std::string>& argv, std::map<std::string, std::string> env = {},
           std::chrono::milliseconds timeout = 40s) {
  env.emplace("OMP_NUM_THREADS", "1");
  const auto t0 = Clock::now();
  std::vector<test::Child> kids = {test::spawn(argv, env)};
  test::wait_all(kids, timeout);
  Result r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.status = kids[0].status;
  r.out = test::read_file(kids[0].out_path);
  std::remove(kids[0].out_path.c_str());
  return r;
}
#endif

}  // namespace

TEST(Launcher, ParsesArguments) {
  const auto o = parse_launch_args({"--nproc-per-node", "4", "--nnodes=2", "--node-rank", "1",
                                    "--master-addr", "10.0.0.1", "--master-port", "1234",
                                    "--quiet-others", "--", "prog", "--flag", "x"});
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_TRUE(o.quiet_others);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--flag", "x"}));
  EXPECT_THROW(parse_launch_args({"--", "prog"}), Error);                        // no nproc
  EXPECT_THROW(parse_launch_args({"--nproc-per-node", "2"}), Error);             // no command
  EXPECT_THROW(parse_launch_args({"--nproc-per-node", "0", "--", "p"}), Error);  // range
  EXPECT_THROW(parse_launch_args({"--nproc-per-node", "2", "--bogus", "--", "p"}), Error);
  EXPECT_THROW(
      parse_launch_args({"--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2", "--", "p"}),
      Error);
  EXPECT_EQ(parse_launch_args({"--nproc-per-node", "2", "--", "p"}).max_restarts, 0);
  EXPECT_EQ(
      parse_launch_args({"--nproc-per-node", "2", "--max-restarts=3", "--", "p"}).max_restarts, 3);
  EXPECT_THROW(parse_launch_args({"--nproc-per-node", "2", "--max-restarts", "-1", "--", "p"}),
               Error);
}

TEST(Launcher, MasterPortFromTheEnvironment) {
  // Used when no flag is given; the flag wins; a bad value names the variable.
  EXPECT_EQ(parse_launch_args({"--nproc-per-node", "2", "--", "p"}, {{"MASTER_PORT", "29600"}})
                .master_port,
            29600);
  EXPECT_EQ(parse_launch_args({"--nproc-per-node", "2", "--master-port", "29700", "--", "p"},
                              {{"MASTER_PORT", "29600"}})
                .master_port,
            29700);
  EXPECT_EQ(parse_launch_args({"--nproc-per-node", "2", "--", "p"}).master_port, 0);
  try {
    parse_launch_args({"--nproc-per-node", "2", "--", "p"}, {{"MASTER_PORT", "port"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT='port'"), std::string::npos) << e.what();
  }
}

TEST(Launcher, RankEnvironment) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "host0";
  o.master_port = 4321;
  const auto e = rank_env(o, 1, "");
  EXPECT_EQ(e.at("RANK"), "3");
  EXPECT_EQ(e.at("LOCAL_RANK"), "1");
  EXPECT_EQ(e.at("WORLD_SIZE"), "4");
  EXPECT_EQ(e.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(e.at("MASTER_ADDR"), "host0");
  EXPECT_EQ(e.at("MASTER_PORT"), "4321");
  EXPECT_EQ(e.at("TCV_RESTART_COUNT"), "0");
  EXPECT_EQ(e.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(rank_env(o, 1, "", 2).at("TCV_RESTART_COUNT"), "2");
  EXPECT_EQ(rank_env(o, 1, "5,7").at("CUDA_VISIBLE_DEVICES"), "7");
  EXPECT_THROW(rank_env(o, 1, "5"), Error);  // fewer devices than ranks
  // what the ranks read back
  const auto d = parse_dist_env(e);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_GT(pick_free_port(), 0);
}

#ifdef TCV_RUN

TEST(Launcher, StartsRanksWithEnvAndPrefixesOutput) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "3", "--", "/bin/sh", "-c",
                      "echo \"env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR "
                      "$MASTER_PORT\"; echo to-stderr >&2"},
                     {{"CUDA_VISIBLE_DEVICES", "3,4,5"}});
  ASSERT_EQ(r.status, 0) << r.out;
  const std::regex port_re("env 0 0 3 3 127\\.0\\.0\\.1 ([0-9]+)\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, port_re)) << r.out;
  const std::string port = m[1];
  EXPECT_NE(port, "0");
  EXPECT_NE(r.out.find("[rank 1] env 1 1 3 3 127.0.0.1 " + port + "\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[rank 2] env 2 2 3 3 127.0.0.1 " + port + "\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[rank 2] to-stderr\n"), std::string::npos) << r.out;
  // rank 0's lines are not prefixed
  EXPECT_EQ(r.out.find("[rank 0]"), std::string::npos) << r.out;

  const auto g = run({TCV_RUN, "--nproc-per-node", "2", "--", "/bin/sh", "-c",
                      "echo \"gpu $RANK $CUDA_VISIBLE_DEVICES\""},
                     {{"CUDA_VISIBLE_DEVICES", "3,4"}});
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("gpu 0 3\n"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("[rank 1] gpu 1 4\n"), std::string::npos) << g.out;
}

TEST(Launcher, QuietOthers) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "3", "--quiet-others", "--", "/bin/sh", "-c",
                      "echo \"hello from $RANK\""});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("hello from 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hello from 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hello from 2"), std::string::npos) << r.out;
}

TEST(Launcher, FailingRankStopsOthersAndSetsExitCode) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "3", "--", "/bin/sh", "-c",
                      "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 7; fi; exec sleep 30"});
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_LT(r.seconds, 10.0) << "the other ranks were not stopped";
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with code 7"), std::string::npos) << r.out;
}

TEST(Launcher, ForwardsSigint) {
  std::vector<test::Child> kids = {
      test::spawn({TCV_RUN, "--nproc-per-node", "2", "--", "/bin/sh", "-c", "exec sleep 30"}, {})};
  std::this_thread::sleep_for(500ms);
  kill(kids[0].pid, SIGINT);
  const auto t0 = Clock::now();
  EXPECT_TRUE(test::wait_all(kids, 15s));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
  EXPECT_EQ(kids[0].status, 128 + SIGINT) << test::read_file(kids[0].out_path);
  std::remove(kids[0].out_path.c_str());
}

TEST(Launcher, BenchAllreduceTwoGlooRanksHasNoWrongElements) {
  const auto r = run({TCV_RUN,     "--nproc-per-node",
                      "2",         "--",
                      TCV_BENCH,   "allreduce",
                      "--backend", "gloo",
                      "-b",        "8",
                      "-e",        "1M",
                      "-f",        "32",
                      "-n",        "3",
                      "-w",        "1",
                      "-c",        "1"});
  ASSERT_EQ(r.status, 0) << r.out;
  // rows: size count type redop time algbw busbw #wrong
  const std::regex row(R"(\n\s+(\d+)\s+(\d+)\s+float\s+sum\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+(\d+))");
  int rows = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), row);
       it != std::sregex_iterator(); ++it) {
    ++rows;
    EXPECT_EQ((*it)[3], "0") << r.out;
  }
  EXPECT_EQ(rows, 4) << r.out;  // 8, 256, 8K, 256K (1M is not reached by x32 steps)
  EXPECT_NE(r.out.find("Avg bus bandwidth"), std::string::npos) << r.out;

  const auto j = run({TCV_RUN,     "--nproc-per-node",
                      "2",         "--",
                      TCV_BENCH,   "allreduce",
                      "--backend", "gloo",
                      "-b",        "4K",
                      "-e",        "4K",
                      "-n",        "2",
                      "-w",        "0",
                      "-d",        "bfloat16",
                      "--op",      "avg",
                      "--json"});
  ASSERT_EQ(j.status, 0) << j.out;
  EXPECT_NE(j.out.find("\"wrong\":0"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"type\":\"bfloat16\""), std::string::npos) << j.out;
}

// Whether process `pid` is gone (or a zombie nobody has reaped yet).
bool is_dead(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return true;
  const auto close = stat.rfind(')');
  return close == std::string::npos || stat.substr(close + 2, 1) == "Z";
}

TEST(Launcher, UsageErrorIsShortAndStaysInView) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "2", "--bogus", "--", "true"});
  EXPECT_EQ(r.status, 2) << r.out;
  int lines = 0;
  for (char c : r.out) lines += c == '\n';
  EXPECT_LE(lines, 4) << r.out;
  EXPECT_EQ(r.out.rfind("tcv-run: error: [tcv-run] unknown flag '--bogus'", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("Run 'tcv-run --help'"), std::string::npos) << r.out;
}

TEST(Launcher, UsesMasterPortFromTheEnvironment) {
  const std::string port = std::to_string(pick_free_port());
  const auto r = run(
      {TCV_RUN, "--nproc-per-node", "2", "--", "/bin/sh", "-c", "echo \"port $RANK $MASTER_PORT\""},
      {{"MASTER_PORT", port}});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("port 0 " + port + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] port 1 " + port + "\n"), std::string::npos) << r.out;
}

// kill -9 of the launcher takes its ranks down (PR_SET_PDEATHSIG); before,
// they kept running as orphans.
TEST(Launcher, RanksDieWithTheLauncher) {
  const tcv::testing::TempDir tmp("orphans");
  const auto dir = tmp.root();
  std::vector<test::Child> kids = {
      test::spawn({TCV_RUN, "--nproc-per-node", "2", "--", "/bin/sh", "-c",
                   "echo $$ > " + dir.string() + "/pid.$RANK.tmp && mv " + dir.string() +
                       "/pid.$RANK.tmp " + dir.string() + "/pid.$RANK && exec sleep 60"},
                  {})};
  std::vector<pid_t> ranks;
  const auto deadline = Clock::now() + 20s;
  while (ranks.size() < 2 && Clock::now() < deadline) {
    ranks.clear();
    for (int r = 0; r < 2; ++r) {
      std::ifstream f(dir / ("pid." + std::to_string(r)));
      pid_t pid = 0;
      if (f >> pid) ranks.push_back(pid);
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(kill(kids[0].pid, SIGKILL), 0);
  const auto t0 = Clock::now();
  test::wait_all(kids, 5s);
  bool all_dead = false;
  while (!all_dead && Clock::now() - t0 < 5s) {
    all_dead = is_dead(ranks[0]) && is_dead(ranks[1]);
    std::this_thread::sleep_for(10ms);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("ranks gone %.3f s after kill -9 of tcv-run\n", s);
  for (pid_t p : ranks) kill(p, SIGKILL);  // cleanup when the test fails
  std::remove(kids[0].out_path.c_str());
  EXPECT_TRUE(all_dead) << "the ranks outlived tcv-run";
  EXPECT_LT(s, 2.0);
}

// A rank that is stopped (SIGSTOP) when another fails gets SIGTERM and
// SIGCONT, so it ends at once instead of at the SIGKILL 5 s later.
TEST(Launcher, StoppedRankIsTerminatedWithoutTheGracePeriod) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "2", "--", "/bin/sh", "-c",
                      "if [ \"$RANK\" = 0 ]; then sleep 0.3; exit 3; fi; kill -STOP $$; sleep 30"});
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_LT(r.seconds, 3.0) << r.out;
}

TEST(Launcher, RestartsEveryRankAfterAFailure) {
  // Rank 1 fails in the first start only; every start prints its restart count and port.
  const auto r =
      run({TCV_RUN, "--nproc-per-node", "2", "--max-restarts", "2", "--", "/bin/sh", "-c",
           "echo \"start $RANK $TCV_RESTART_COUNT $TCV_MAX_RESTARTS $MASTER_PORT\"; "
           "echo \"prefix $RANK $TCV_STORE_PREFIX\"; "
           "if [ \"$RANK\" = 1 ] && [ \"$TCV_RESTART_COUNT\" = 0 ]; then sleep 0.3; exit 5; fi; "
           "sleep 0.2"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("tcv-run: rank 1 (pid "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(") exited with code 5; stopping the other ranks"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tcv-run: restart 1 of 2: starting all 2 local rank(s) again"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("restart 2 of 2"), std::string::npos) << r.out;
  // A new round of tcv-run's store: the same port, the keys under another prefix.
  const std::regex start_re(R"(start 0 (\d) 2 (\d+)\n)");
  std::vector<std::string> ports;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), start_re);
       it != std::sregex_iterator(); ++it)
    ports.push_back((*it)[2]);
  ASSERT_EQ(ports.size(), 2u) << r.out;
  EXPECT_EQ(ports[0], ports[1]) << r.out;
  EXPECT_NE(r.out.find("prefix 0 /r0/\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefix 0 /r1/\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] start 1 1 2 " + ports[1]), std::string::npos) << r.out;
}

// Two tcv-runs on this host as the two machines of a job (both on 127.0.0.1):
// a rank failing on the second stops the first, which names it; with a
// restart, both start their ranks again in the next round.
TEST(Launcher, TwoMachinesStopAndRestartTogether) {
  const std::string port = std::to_string(pick_free_port());
  auto node = [&](int k, const std::string& restarts, const std::string& script) {
    return test::spawn(
        {TCV_RUN, "--nnodes", "2", "--node-rank", std::to_string(k), "--nproc-per-node", "1",
         "--master-addr", "127.0.0.1", "--master-port", port, "--max-restarts", restarts,
         "--rdzv-timeout", "10", "--", "/bin/sh", "-c", script},
        {});
  };
  // Rank 1 (node 1) fails in round 0: both machines stop; no restart.
  const std::string fail =
      "echo \"round $TCV_RESTART_COUNT rank $RANK\"; "
      "if [ \"$RANK\" = 1 ]; then sleep 0.3; echo boom >&2; exit 3; fi; "
      "exec sleep 30";
  std::vector<test::Child> kids = {node(0, "0", fail), node(1, "0", fail)};
  const auto t0 = Clock::now();
  ASSERT_TRUE(test::wait_all(kids, 30s));
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string out0 = test::read_file(kids[0].out_path),
                    out1 = test::read_file(kids[1].out_path);
  for (auto& k : kids) std::remove(k.out_path.c_str());
  std::printf("node 0:\n%snode 1:\n%s", out0.c_str(), out1.c_str());
  EXPECT_EQ(kids[0].status, 3) << out0;
  EXPECT_EQ(kids[1].status, 3) << out1;
  EXPECT_LT(took, 8.0);
  EXPECT_NE(out1.find("tcv-run (node 1): rank 1 (local rank 0, pid "), std::string::npos) << out1;
  EXPECT_NE(out0.find("tcv-run (node 0): node 1 reports: rank 1 (local rank 0, pid "),
            std::string::npos)
      << out0;
  EXPECT_NE(out0.find(") exited with code 3; stopping the local ranks"), std::string::npos) << out0;

  // The same failure with a restart left: round 1 runs on both machines.
  const std::string once =
      "echo \"round $TCV_RESTART_COUNT rank $RANK prefix $TCV_STORE_PREFIX\"; "
      "if [ \"$RANK\" = 1 ] && [ \"$TCV_RESTART_COUNT\" = 0 ]; then "
      "sleep 0.3; exit 3; fi; sleep 0.3";
  kids = {node(0, "1", once), node(1, "1", once)};
  ASSERT_TRUE(test::wait_all(kids, 30s));
  const std::string r0 = test::read_file(kids[0].out_path), r1 = test::read_file(kids[1].out_path);
  for (auto& k : kids) std::remove(k.out_path.c_str());
  EXPECT_EQ(kids[0].status, 0) << r0;
  EXPECT_EQ(kids[1].status, 0) << r1;
  EXPECT_NE(r0.find("round 1 rank 0 prefix /r1/"), std::string::npos) << r0;
  EXPECT_NE(r1.find("[rank 1] round 1 rank 1 prefix /r1/"), std::string::npos) << r1;
  EXPECT_NE(r0.find("tcv-run (node 0): restart 1 of 1"), std::string::npos) << r0;
  EXPECT_NE(r1.find("tcv-run (node 1): restart 1 of 1"), std::string::npos) << r1;
}

// --quiet-others keeps each machine's first local rank: its wait lines and
// errors are all that machine says.
TEST(Launcher, QuietOthersKeepsEachMachinesFirstRank) {
  const std::string port = std::to_string(pick_free_port());
  std::vector<test::Child> kids;
  for (int k = 0; k < 2; ++k)
    kids.push_back(
        test::spawn({TCV_RUN, "--nnodes", "2", "--node-rank", std::to_string(k), "--nproc-per-node",
                     "2", "--master-addr", "127.0.0.1", "--master-port", port, "--quiet-others",
                     "--", "/bin/sh", "-c", "echo \"hello from $RANK\""},
                    {}));
  ASSERT_TRUE(test::wait_all(kids, 30s));
  const std::string out0 = test::read_file(kids[0].out_path),
                    out1 = test::read_file(kids[1].out_path);
  for (auto& k : kids) std::remove(k.out_path.c_str());
  EXPECT_NE(out0.find("hello from 0\n"), std::string::npos) << out0;
  EXPECT_EQ(out0.find("hello from 1"), std::string::npos) << out0;
  EXPECT_NE(out1.find("[rank 2] hello from 2\n"), std::string::npos) << out1;
  EXPECT_EQ(out1.find("hello from 3"), std::string::npos) << out1;
}

TEST(Launcher, GivesUpWhenNoRestartIsLeft) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "2", "--max-restarts", "1", "--", "/bin/sh",
                      "-c", "if [ \"$RANK\" = 1 ]; then exit 5; fi; sleep 30"});
  EXPECT_EQ(r.status, 5) << r.out;
  EXPECT_NE(r.out.find("restart 1 of 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tcv-run: no restarts left (1 used); exiting with code 5"),
            std::string::npos)
      << r.out;
  EXPECT_LT(r.seconds, 15.0) << r.out;
}

TEST(Launcher, BenchAllreduceRejectsSizesBelowOneElement) {
  const auto r = run({TCV_BENCH, "allreduce", "--backend", "gloo", "-b", "3", "-e", "3"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("-b/--minbytes 3 is smaller than one element of float (4 bytes)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Avg bus bandwidth"), std::string::npos) << r.out;
  const auto half = run({TCV_BENCH, "allreduce", "--backend", "gloo", "-b", "3", "-e", "3", "-d",
                         "half", "-n", "1", "-w", "0"});
  EXPECT_EQ(half.status, 0) << half.out;  // 3 bytes hold one half
}

// Ranks given different sizes stop with a message naming both, not an abort
// (an uncaught gloo::EnforceNotMet on rank 0) or a hang.
TEST(Launcher, BenchAllreduceRanksWithDifferentSizesFailWithAMessage) {
  const auto r = run({TCV_RUN, "--nproc-per-node", "2", "--", "/bin/sh", "-c",
                      std::string("exec ") + TCV_BENCH +
                          " allreduce --backend gloo -b $((4 << RANK)) -e 64 -n 1 -w 0"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_LT(r.seconds, 15.0) << r.out;
  EXPECT_NE(r.out.find("ranks were given different arguments"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 0: --backend gloo -b 4 -e 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: --backend gloo -b 8 -e 64"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("EnforceNotMet"), std::string::npos) << r.out;
}

#endif
