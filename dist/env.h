// Where a process sits in a distributed job, read from its environment: the
// env:// variables as torchrun (and tcv-run) set them (RANK, LOCAL_RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or Slurm's when srun started the
// process (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace tcv::dist {

/// Which launcher's variables described the job.
enum class DistSource : uint8_t { env, slurm };

/// Where this process sits in the job and where rank 0's store listens.
struct DistEnv {
  int rank = 0;                           // RANK: global rank in [0, world_size)
  int local_rank = 0;                     // LOCAL_RANK: rank on this node (picks the GPU)
  int world_size = 1;                     // WORLD_SIZE: number of processes in the job
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: host of rank 0's store
  int master_port = 29500;                // MASTER_PORT: port of rank 0's store
  DistSource source = DistSource::env;
  /// TCV_STORE_PREFIX: set by tcv-run, whose agent hosts the store at
  /// MASTER_ADDR:MASTER_PORT for the whole job; this start's keys live under
  /// it. Empty: rank 0 hosts the store (torchrun's, srun's or a hand launch).
  std::string store_prefix{};
};

/// Environment variables by name (a test's stand-in for the process environment).
using EnvMap = std::map<std::string, std::string>;

/// Parses the rendezvous variables from `env`. RANK, WORLD_SIZE, MASTER_ADDR and
/// MASTER_PORT are required; LOCAL_RANK defaults to RANK when absent. Throws
/// tcv::Error naming the variable and its value when one is missing, not a
/// decimal integer, or out of range (world_size >= 1, 0 <= rank < world_size,
/// 0 <= local_rank < world_size, 1 <= port <= 65535).
DistEnv parse_dist_env(const EnvMap& env);

/// The job as srun describes it: RANK = SLURM_PROCID, WORLD_SIZE = SLURM_NTASKS,
/// LOCAL_RANK = SLURM_LOCALID (default: SLURM_PROCID), MASTER_ADDR = the
/// MASTER_ADDR variable, else the first host of SLURM_STEP_NODELIST,
/// SLURM_JOB_NODELIST or SLURM_NODELIST (the node of task 0); MASTER_PORT = the
/// MASTER_PORT variable, else slurm_default_port(). Errors name the variable.
DistEnv parse_slurm_env(const EnvMap& env);

/// MASTER_PORT under Slurm when none is set: 15000 + the last four digits of
/// SLURM_JOB_ID (so jobs sharing a node rarely collide), or 29500 without a
/// numeric job id.
int slurm_default_port(const EnvMap& env);

/// True when Slurm's task variables are present: SLURM_PROCID and SLURM_NTASKS.
bool has_slurm_env(const EnvMap& env);

/// The job this process belongs to: the env:// variables when WORLD_SIZE is set
/// (they win over Slurm's, as when tcv-run runs inside an allocation), else
/// Slurm's. Throws tcv::Error when neither describes a job.
DistEnv resolve_dist_env(const EnvMap& env);

/// Expands a Slurm host list: "node[01-03,07],gpu-a[1-2]x,login5" is node01,
/// node02, node03, node07, gpu-a1x, gpu-a2x, login5 (zero padding kept; several
/// bracket groups in one name multiply). Throws tcv::Error naming `what` (the
/// variable) on malformed lists or more than `max_hosts` names.
std::vector<std::string> expand_hostlist(const std::string& list,
                                         const std::string& what = "host list",
                                         size_t max_hosts = size_t{1} << 20);

/// The first host of a Slurm host list, without expanding the rest.
std::string first_host(const std::string& list, const std::string& what = "host list");

/// The variables that describe a job, present in the process environment:
/// the env:// ones, Slurm's, and TCV_DIST_TIMEOUT / TCV_DIST_WAIT_LOG_INTERVAL.
EnvMap process_dist_env();

/// OpenMP threads for each of the LOCAL_WORLD_SIZE processes that share this
/// node's `cpus`: the cpus divided evenly among them (at least 1), or all of
/// them without LOCAL_WORLD_SIZE. (Each of 2 ranks on 2 cores taking both
/// made a segmentation run 2.3x slower than one process: 4 threads spinning at
/// barriers on 2 cores. torchrun sets one thread per process instead, which
/// leaves cores idle on larger nodes.) Throws tcv::Error naming the variable
/// when it is not a positive decimal integer.
int threads_per_local_process(const EnvMap& env, int cpus);

/// resolve_dist_env(process_dist_env()).
DistEnv read_dist_env();

/// True when the environment describes a distributed launch (WORLD_SIZE is set,
/// or srun's task variables are), so a program can fall back to a single
/// process otherwise.
bool has_dist_env(const EnvMap& env);

/// Time limits of the rendezvous and of collectives, and how often a waiting
/// rank says what it waits for (0: never).
struct DistTimeouts {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds wait_log_interval{std::chrono::seconds(30)};
};

/// TCV_DIST_TIMEOUT and TCV_DIST_WAIT_LOG_INTERVAL (seconds, decimals allowed)
/// over `defaults`. Errors name the variable and its value.
DistTimeouts timeouts_from_env(const EnvMap& env, DistTimeouts defaults = {});

/// Seconds (positive, or >= 0 with allow_zero) as milliseconds; errors name `what`.
std::chrono::milliseconds seconds_to_ms(double seconds, const std::string& what, bool allow_zero);

}  // namespace tcv::dist
