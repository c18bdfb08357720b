// The env:// rendezvous variables as torchrun (and tcv-run) set them: RANK,
// LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, read and validated.
#pragma once

#include <map>
#include <string>

namespace tcv::dist {

/// Where this process sits in the job and where rank 0's store listens.
struct DistEnv {
  int rank = 0;                           // RANK: global rank in [0, world_size)
  int local_rank = 0;                     // LOCAL_RANK: rank on this node (picks the GPU)
  int world_size = 1;                     // WORLD_SIZE: number of processes in the job
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: host of rank 0's store
  int master_port = 29500;                // MASTER_PORT: port of rank 0's store
};

/// Environment variables by name (a test's stand-in for the process environment).
using EnvMap = std::map<std::string, std::string>;

/// Parses the rendezvous variables from `env`. RANK, WORLD_SIZE, MASTER_ADDR and
/// MASTER_PORT are required; LOCAL_RANK defaults to RANK when absent. Throws
/// tcv::Error naming the variable and its value when one is missing, not a
/// decimal integer, or out of range (world_size >= 1, 0 <= rank < world_size,
/// 0 <= local_rank < world_size, 1 <= port <= 65535).
DistEnv parse_dist_env(const EnvMap& env);

/// The rendezvous variables present in the process environment (only those of
/// the five names that are set).
EnvMap process_dist_env();

/// parse_dist_env(process_dist_env()).
DistEnv read_dist_env();

/// True when the environment describes a distributed launch (WORLD_SIZE is set),
/// so a program can fall back to a single process otherwise.
bool has_dist_env(const EnvMap& env);

}  // namespace tcv::dist
