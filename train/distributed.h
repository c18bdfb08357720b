// Trainer-side glue for data-parallel training (network.distributed = true
// under tcv-run, torchrun or srun): rendezvous from the environment, the
// process group (Gloo for CPU, NCCL for CUDA) with network.timeout, the DDP
// wrapper (with SyncBatchNorm when network.sync_bn), the checks that every
// rank runs the same config and schedule, and the reductions the trainer needs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/store.h"
#include "engine/device.h"
#include "train/config.h"

namespace tcv::train {

/// This process's place in a data-parallel run.
class DistContext {
 public:
  /// Reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (or Slurm's SLURM_PROCID,
  /// SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST), connects to rank 0's
  /// TcpStore and builds the group: NCCL on a CUDA device, Gloo otherwise, both
  /// with network.timeout and network.wait_log_interval. Then checks that every
  /// rank resolved the same config (data.workers aside). Throws ConfigError
  /// (naming network.distributed) when the environment does not describe a
  /// distributed launch, and naming the keys when ranks' configs differ.
  DistContext(const Config& cfg, Device device);

  /// The device this rank trains on: the one given, except that a CUDA device
  /// becomes cuda:(LOCAL_RANK mod the visible devices) (made current), so the
  /// ranks of a node spread over its GPUs when each sees them all.
  Device device() const { return device_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  const std::shared_ptr<dist::ProcessGroup>& group() const { return group_; }

  /// Wraps `model` in DDP (converting its BatchNorm2d layers to SyncBatchNorm
  /// first when network.sync_bn), with network.bucket_cap_mb and
  /// network.find_unused_parameters, and registers network.comm_hook (with
  /// network.powersgd.*) unless it is "none".
  std::shared_ptr<dist::DistributedDataParallel> wrap(const Config& cfg,
                                                      std::shared_ptr<nn::Module> model);

  /// Throws ConfigError naming the quantities and each rank's value unless every
  /// rank has the same `values` (e.g. iterations per epoch, max_iters, the
  /// resumed iteration), so ranks that would issue different numbers of
  /// collectives stop at start-up instead of hanging at the end. `what` names
  /// the set in the message. Collective.
  void check_same(const std::string& what,
                  const std::vector<std::pair<std::string, std::string>>& values);

  /// Sums `values` over the ranks, in place (f64 on the CPU).
  void all_reduce_sum(std::vector<double>& values);
  void barrier();

 private:
  dist::DistEnv env_;
  Device device_;
  std::shared_ptr<dist::TcpStore> store_;
  std::shared_ptr<dist::ProcessGroup> group_;
};

/// One line on the reducer's last step: buckets, all-reduce time and the part
/// of it hidden behind backward, and the gradient bytes on the wire (with a
/// comm hook: how many times fewer than the buckets' own bytes).
std::string ddp_summary(dist::DistributedDataParallel& ddp);

/// A DistContext when cfg says network.distributed, else null. Without
/// network.distributed, a process launched as one of several (WORLD_SIZE > 1,
/// or a Slurm task other than the first) is refused with a ConfigError: its
/// ranks would each train alone and write the same run directory.
std::unique_ptr<DistContext> init_distributed(const Config& cfg, Device device);

}  // namespace tcv::train
