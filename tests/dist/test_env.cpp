#include <gtest/gtest.h>

#include <string>

#include "dist/env.h"
#include "kernels/base.h"

using namespace tcv;
using namespace tcv::dist;

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
