// What tcv-run does: start one process per local rank with the env://
// variables set, label or silence the output of ranks other than 0, stop every
// rank when one fails (and restart them all, up to max_restarts times, as
// torchrun's elastic agent does), forward SIGINT/SIGTERM, and take the ranks
// down with it when it dies (PR_SET_PDEATHSIG).
//
// The job's store lives in the first machine's tcv-run (node rank 0), at
// MASTER_ADDR:MASTER_PORT, for the whole job, as torchrun's agent store does:
// the ranks are its clients, each start ("round") under its own key prefix
// (TCV_STORE_PREFIX), so a restarted rank never meets an earlier round's keys.
// The machines' tcv-runs meet there: every round starts once all --nnodes
// machines have joined it and agree on the job's shape; a failure on any
// machine is published there, and every machine stops its ranks and, while
// restarts are left, joins the next round.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dist/env.h"

namespace tcv::dist {

struct LaunchOptions {
  int nproc_per_node = 1;                 ///< ranks started on this node
  int nnodes = 1;                         ///< nodes in the job
  int node_rank = 0;                      ///< this node's index in [0, nnodes)
  std::string master_addr = "127.0.0.1";  ///< host of rank 0's store
  /// 0: a free port (single node; a new one for each restart) or 29500.
  int master_port = 0;
  /// Drop the output of every rank but each machine's first local rank.
  bool quiet_others = false;
  /// Times the whole group is restarted after a rank fails (0: none).
  int max_restarts = 0;
  /// Between SIGTERM and SIGKILL when the ranks are being stopped.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(5)};
  /// How long a machine waits for the others to join a round, and for the
  /// store on the first machine to answer (--rdzv-timeout; default
  /// TCV_DIST_TIMEOUT, else 300 s).
  std::chrono::milliseconds rdzv_timeout{std::chrono::seconds(300)};
  /// How often a waiting tcv-run says what it waits for (TCV_DIST_WAIT_LOG_INTERVAL, 30 s).
  std::chrono::milliseconds wait_log_interval{std::chrono::seconds(30)};
  std::vector<std::string> command{};  ///< the program and its arguments
  /// Set by launch(): the read end of the pipe the ranks watch (TCV_LAUNCHER_FD).
  int launcher_fd = -1;
};

/// Parses `--nproc-per-node N [--nnodes M --node-rank R --master-addr A
/// --master-port P] [--max-restarts K] [--rdzv-timeout S] [--quiet-others]
/// [--] CMD ARGS...`. Without --master-port, MASTER_PORT from `env` (the
/// launcher's environment) is used when set; TCV_DIST_TIMEOUT and
/// TCV_DIST_WAIT_LOG_INTERVAL set the waits. Throws tcv::Error naming the flag
/// or variable on a bad command line.
LaunchOptions parse_launch_args(const std::vector<std::string>& args, const EnvMap& env = {});

/// An unused TCP port on this host (bound with port 0, then released).
int pick_free_port();

/// The variables set for local rank `local_rank`: RANK, LOCAL_RANK, WORLD_SIZE,
/// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TCV_STORE_PREFIX (this round's
/// keys in tcv-run's store), TCV_RESTART_COUNT (this start's number, 0 first)
/// and TCV_MAX_RESTARTS (as torchrun's TORCHELASTIC_*), and
/// CUDA_VISIBLE_DEVICES = the local_rank-th entry of `cuda_visible_devices`
/// when that is non-empty (the user's setting); without it no device variable
/// is set and each rank uses cuda:LOCAL_RANK. `o.master_port` must be resolved
/// (non-zero).
EnvMap rank_env(const LaunchOptions& o, int local_rank, const std::string& cuda_visible_devices,
                int restart_count = 0);

/// Starts the ranks and waits for them. Output of rank 0 passes through;
/// other ranks' lines get a "[rank N] " prefix, or are dropped with
/// quiet_others (but those of each machine's first local rank). When a rank exits non-zero (or is killed), the others get
/// SIGTERM (and SIGCONT, so a stopped rank sees it), then SIGKILL after
/// kill_grace, on every machine; then, while restarts are left, every machine
/// starts its ranks again in a new round, saying on stderr which rank failed,
/// on which machine, how and why (the error a tcv program wrote to
/// TCV_ERROR_FILE), and which restart this is. Otherwise launch() returns the
/// failed rank's exit code (128 + signal for a signal). SIGINT/SIGTERM sent to
/// this process are forwarded to the ranks and end the job on every machine
/// without a restart. Each rank gets SIGKILL if the launcher dies
/// (PR_SET_PDEATHSIG), so no rank outlives a `kill -9` of it; the other
/// machines then stop too. Returns 0 when every rank succeeded.
int launch(LaunchOptions o);

/// In a process that tcv-run started (TCV_LAUNCHER_FD set: the read end of a
/// pipe whose write end only tcv-run holds): a thread that notices tcv-run's
/// death, even by SIGKILL and whatever wrapper sits in between (a shell
/// script), says so, and kills this rank's process group, wrapper included
/// (PR_SET_PDEATHSIG reaches only tcv-run's direct children). A no-op
/// elsewhere; only the first call starts the thread.
void watch_launcher();

}  // namespace tcv::dist
