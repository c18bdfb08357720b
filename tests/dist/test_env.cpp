#include <gtest/gtest.h>

#include <string>

#include "dist/env.h"
#include "kernels/base.h"
#include "support/error_of.h"

using namespace tcv;
using namespace tcv::dist;
using tcv::testing::error_of;

namespace {

EnvMap torchrun_env() {
  return {{"RANK", "3"},
          {"LOCAL_RANK", "1"},
          {"WORLD_SIZE", "4"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

// The message of the tcv::Error that parsing `env` throws ("" when none).
std::string parse_error(const EnvMap& env) {
  try {
    parse_dist_env(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DistEnv, ParsesTorchrunVariables) {
  const DistEnv d = parse_dist_env(torchrun_env());
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_EQ(d.master_addr, "127.0.0.1");
  EXPECT_EQ(d.master_port, 29500);
  EXPECT_TRUE(has_dist_env(torchrun_env()));
  EXPECT_FALSE(has_dist_env({}));
}

TEST(DistEnv, LocalRankDefaultsToRank) {
  EnvMap env = torchrun_env();
  env.erase("LOCAL_RANK");
  EXPECT_EQ(parse_dist_env(env).local_rank, 3);
}

TEST(DistEnv, MissingVariableIsNamed) {
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    EnvMap env = torchrun_env();
    env.erase(name);
    const std::string msg = parse_error(env);
    EXPECT_NE(msg.find(std::string(name) + " is not set"), std::string::npos) << msg;
  }
}

TEST(DistEnv, BadValuesNameVariableAndValue) {
  struct Case {
    const char* name;
    const char* value;
    const char* expect;
  };
  const Case cases[] = {
      {"RANK", "4", "RANK='4' must be in [0, WORLD_SIZE=4)"},
      {"RANK", "-1", "RANK='-1' must be in [0, WORLD_SIZE=4)"},
      {"RANK", "1x", "RANK='1x' is not a decimal integer"},
      {"RANK", "", "RANK='' is not a decimal integer"},
      {"RANK", " 1", "RANK=' 1' is not a decimal integer"},
      {"LOCAL_RANK", "9", "LOCAL_RANK='9' must be in [0, WORLD_SIZE=4)"},
      {"WORLD_SIZE", "0", "WORLD_SIZE='0' must be at least 1"},
      {"WORLD_SIZE", "two", "WORLD_SIZE='two' is not a decimal integer"},
      {"WORLD_SIZE", "99999999999", "WORLD_SIZE='99999999999' is not a decimal integer"},
      {"MASTER_PORT", "0", "MASTER_PORT='0' must be in [1, 65535]"},
      {"MASTER_PORT", "65536", "MASTER_PORT='65536' must be in [1, 65535]"},
      {"MASTER_PORT", "http", "MASTER_PORT='http' is not a decimal integer"},
      {"MASTER_ADDR", "", "MASTER_ADDR is set but empty"},
  };
  for (const Case& c : cases) {
    EnvMap env = torchrun_env();
    env[c.name] = c.value;
    const std::string msg = parse_error(env);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << "=" << c.value << ": " << msg;
  }
}

TEST(DistEnv, BoundaryValuesAccepted) {
  const DistEnv d = parse_dist_env({{"RANK", "0"},
                                    {"LOCAL_RANK", "0"},
                                    {"WORLD_SIZE", "1"},
                                    {"MASTER_ADDR", "node0"},
                                    {"MASTER_PORT", "65535"}});
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.world_size, 1);
  EXPECT_EQ(d.master_addr, "node0");
  EXPECT_EQ(d.master_port, 65535);
}

TEST(DistEnv, ReadsProcessEnvironment) {
  setenv("RANK", "1", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "localhost", 1);
  setenv("MASTER_PORT", "1234", 1);
  const EnvMap env = process_dist_env();
  EXPECT_EQ(env.size(), 5u);
  const DistEnv d = read_dist_env();
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.local_rank, 0);
  EXPECT_EQ(d.world_size, 2);
  EXPECT_EQ(d.master_addr, "localhost");
  EXPECT_EQ(d.master_port, 1234);
  for (const char* n : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    unsetenv(n);
  EXPECT_TRUE(process_dist_env().empty());
}

namespace {

EnvMap srun_env() {
  return {{"SLURM_PROCID", "5"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_JOB_ID", "123456"},
          {"SLURM_JOB_NODELIST", "gpu[07-08,12],login1"}};
}

}  // namespace

TEST(SlurmEnv, ExpandsHostLists) {
  EXPECT_EQ(expand_hostlist("node[01-03,07]"),
            (std::vector<std::string>{"node01", "node02", "node03", "node07"}));
  EXPECT_EQ(expand_hostlist("a1,b[9-11]x,c"),
            (std::vector<std::string>{"a1", "b9x", "b10x", "b11x", "c"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[001-002]"),
            (std::vector<std::string>{"r1n001", "r1n002", "r2n001", "r2n002"}));
  EXPECT_EQ(expand_hostlist("single"), (std::vector<std::string>{"single"}));
  EXPECT_EQ(expand_hostlist("n[8-10]"), (std::vector<std::string>{"n8", "n9", "n10"}));
  EXPECT_EQ(first_host("node[01-03,07],other"), "node01");
  EXPECT_EQ(first_host("x-[5,2]-y[3-4]"), "x-5-y3");
  // The first host of a huge range without expanding it.
  EXPECT_EQ(first_host("n[0000001-9999999]"), "n0000001");
}

TEST(SlurmEnv, MalformedHostListsNameTheVariable) {
  for (const char* bad : {"node[01-03", "node01-03]", "node[]", "node[3-1]", "node[a-b]",
                          "node[1-2],,x", "node[[1]]", ""}) {
    const std::string msg = error_of([&] { expand_hostlist(bad, "SLURM_JOB_NODELIST"); });
    EXPECT_NE(msg.find("SLURM_JOB_NODELIST"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("malformed host list"), std::string::npos) << bad << ": " << msg;
  }
  const std::string msg =
      error_of([&] { expand_hostlist("n[1-100000]", "SLURM_JOB_NODELIST", 1000); });
  EXPECT_NE(msg.find("more than 1000 hosts"), std::string::npos) << msg;
}

TEST(SlurmEnv, RankEnvironmentFromSrun) {
  const EnvMap env = srun_env();
  EXPECT_TRUE(has_dist_env(env));
  const DistEnv d = resolve_dist_env(env);
  EXPECT_EQ(d.source, DistSource::slurm);
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.world_size, 8);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.master_addr, "gpu07");
  EXPECT_EQ(d.master_port, 15000 + 3456);  // from the job id
  // The step's node list wins over the job's; MASTER_ADDR/MASTER_PORT over both.
  EnvMap step = env;
  step["SLURM_STEP_NODELIST"] = "gpu[12]";
  EXPECT_EQ(resolve_dist_env(step).master_addr, "gpu12");
  step["MASTER_ADDR"] = "10.1.2.3";
  step["MASTER_PORT"] = "4000";
  EXPECT_EQ(resolve_dist_env(step).master_addr, "10.1.2.3");
  EXPECT_EQ(resolve_dist_env(step).master_port, 4000);
  // No job id: the usual default port; no SLURM_LOCALID: the global rank.
  EnvMap bare = env;
  bare.erase("SLURM_JOB_ID");
  bare.erase("SLURM_LOCALID");
  EXPECT_EQ(resolve_dist_env(bare).master_port, 29500);
  EXPECT_EQ(resolve_dist_env(bare).local_rank, 5);
}

TEST(SlurmEnv, ExplicitRankVariablesWin) {
  EnvMap env = srun_env();
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = "29501";
  const DistEnv d = resolve_dist_env(env);
  EXPECT_EQ(d.source, DistSource::env);
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.world_size, 2);
  EXPECT_EQ(d.master_port, 29501);
}

TEST(SlurmEnv, BadValuesNameTheVariable) {
  struct Case {
    const char* name;
    const char* value;
    const char* expect;
  };
  const Case cases[] = {
      {"SLURM_PROCID", "8", "SLURM_PROCID='8' must be in [0, SLURM_NTASKS=8)"},
      {"SLURM_NTASKS", "x", "SLURM_NTASKS='x' is not a decimal integer"},
      {"SLURM_LOCALID", "-1", "SLURM_LOCALID='-1' must be in [0, SLURM_NTASKS=8)"},
      {"SLURM_JOB_NODELIST", "gpu[07-", "SLURM_JOB_NODELIST: malformed host list"},
      {"MASTER_PORT", "0", "MASTER_PORT='0' must be in [1, 65535]"},
  };
  for (const Case& c : cases) {
    EnvMap env = srun_env();
    env[c.name] = c.value;
    const std::string msg = error_of([&] { resolve_dist_env(env); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << "=" << c.value << ": " << msg;
  }
  EnvMap no_nodes = srun_env();
  no_nodes.erase("SLURM_JOB_NODELIST");
  const std::string msg = error_of([&] { resolve_dist_env(no_nodes); });
  EXPECT_NE(msg.find("MASTER_ADDR or SLURM_JOB_NODELIST must be set"), std::string::npos) << msg;
}

TEST(DistEnv, TimeoutsFromEnvironment) {
  const DistTimeouts d = timeouts_from_env({});
  EXPECT_EQ(d.timeout, std::chrono::seconds(300));
  EXPECT_EQ(d.wait_log_interval, std::chrono::seconds(30));
  const DistTimeouts t =
      timeouts_from_env({{"TCV_DIST_TIMEOUT", "2.5"}, {"TCV_DIST_WAIT_LOG_INTERVAL", "0"}});
  EXPECT_EQ(t.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(t.wait_log_interval, std::chrono::milliseconds(0));
  for (const char* bad : {"0", "-1", "abc", "", "nan", "1e10"}) {
    const std::string msg = error_of([&] { timeouts_from_env({{"TCV_DIST_TIMEOUT", bad}}); });
    EXPECT_NE(msg.find("TCV_DIST_TIMEOUT"), std::string::npos) << bad << ": " << msg;
  }
}

TEST(DistEnv, ThreadsSharedAmongLocalProcesses) {
  EXPECT_EQ(threads_per_local_process({}, 16), 16);  // no launcher: every core
  EXPECT_EQ(threads_per_local_process({{"LOCAL_WORLD_SIZE", "2"}}, 2), 1);
  EXPECT_EQ(threads_per_local_process({{"LOCAL_WORLD_SIZE", "4"}}, 16), 4);
  EXPECT_EQ(threads_per_local_process({{"LOCAL_WORLD_SIZE", "3"}}, 16), 5);  // the rest idle
  EXPECT_EQ(threads_per_local_process({{"LOCAL_WORLD_SIZE", "8"}}, 2), 1);   // at least one
  EXPECT_EQ(threads_per_local_process({{"LOCAL_WORLD_SIZE", "1"}}, 0), 1);
  EXPECT_EQ(error_of([] {
              threads_per_local_process({{"LOCAL_WORLD_SIZE", "two"}}, 2);
            }),
            "[dist env] LOCAL_WORLD_SIZE='two' is not a decimal integer");
  EXPECT_EQ(error_of([] {
              threads_per_local_process({{"LOCAL_WORLD_SIZE", "0"}}, 2);
            }),
            "[dist env] LOCAL_WORLD_SIZE='0' must be at least 1");
}
