// What tcv-run does: start one process per local rank with the env://
// variables set, label or silence the output of ranks other than 0, stop every
// rank when one fails (and restart them all, up to max_restarts times, as
// torchrun's elastic agent does), forward SIGINT/SIGTERM, and take the ranks
// down with it when it dies (PR_SET_PDEATHSIG).
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
  bool quiet_others = false;  ///< drop the output of every rank but 0
  /// Times the whole group is restarted after a rank fails (0: none).
  int max_restarts = 0;
  /// Between SIGTERM and SIGKILL when the ranks are being stopped.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(5)};
  std::vector<std::string> command{};  ///< the program and its arguments
};

/// Parses `--nproc-per-node N [--nnodes M --node-rank R --master-addr A
/// --master-port P] [--max-restarts K] [--quiet-others] [--] CMD ARGS...`.
/// Without --master-port, MASTER_PORT from `env` (the launcher's environment)
/// is used when set. Throws tcv::Error naming the flag or variable on a bad
/// command line.
LaunchOptions parse_launch_args(const std::vector<std::string>& args, const EnvMap& env = {});

/// An unused TCP port on this host (bound with port 0, then released).
int pick_free_port();

/// The variables set for local rank `local_rank`: RANK, LOCAL_RANK, WORLD_SIZE,
/// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TCV_RESTART_COUNT (this start's
/// number, 0 first) and TCV_MAX_RESTARTS (as torchrun's TORCHELASTIC_*), and
/// CUDA_VISIBLE_DEVICES = the local_rank-th entry of `cuda_visible_devices`
/// when that is non-empty (the user's setting); without it no device variable
/// is set and each rank uses cuda:LOCAL_RANK. `o.master_port` must be resolved
/// (non-zero).
EnvMap rank_env(const LaunchOptions& o, int local_rank, const std::string& cuda_visible_devices,
                int restart_count = 0);

/// Starts the ranks and waits for them. Output of rank 0 passes through;
/// other ranks' lines get a "[rank N] " prefix, or are dropped with
/// quiet_others. When a rank exits non-zero (or is killed), the others get
/// SIGTERM (and SIGCONT, so a stopped rank sees it), then SIGKILL after
/// kill_grace; then, while restarts are left, every rank is started again
/// (a new rendezvous: a new free port unless the port was given), saying on
/// stderr which rank failed, how, and which restart this is. Otherwise
/// launch() returns the failed rank's exit code (128 + signal for a signal).
/// SIGINT/SIGTERM sent to this process are forwarded to the ranks and end the
/// job without a restart. Each rank gets SIGKILL if the launcher dies
/// (PR_SET_PDEATHSIG), so no rank outlives a `kill -9` of it. Returns 0 when
/// every rank succeeded.
int launch(LaunchOptions o);

}  // namespace tcv::dist
