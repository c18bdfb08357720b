// Trainer-side glue for data-parallel training (network.distributed = true
// under tcv-run or torchrun): rendezvous from the environment, the process
// group (Gloo for CPU, NCCL for CUDA), the DDP wrapper (with SyncBatchNorm
// when network.sync_bn), and the reductions the trainer needs.
#pragma once

#include <memory>
#include <vector>

#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/store.h"
#include "engine/device.h"
#include "train/config.h"
#include "train/metrics.h"

namespace tcv::train {

/// This process's place in a data-parallel run.
class DistContext {
 public:
  /// Reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, connects to rank 0's
  /// TcpStore and builds the group: NCCL on a CUDA device, Gloo otherwise.
  /// Throws ConfigError (naming network.distributed) when the environment does
  /// not describe a distributed launch.
  DistContext(const Config& cfg, Device device);

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  const std::shared_ptr<dist::ProcessGroup>& group() const { return group_; }

  /// Wraps `model` in DDP (converting its BatchNorm2d layers to SyncBatchNorm
  /// first when network.sync_bn), with network.bucket_cap_mb and
  /// network.find_unused_parameters.
  std::shared_ptr<dist::DistributedDataParallel> wrap(const Config& cfg,
                                                      std::shared_ptr<nn::Module> model);

  /// Sums `values` over the ranks, in place (f64 on the CPU).
  void all_reduce_sum(std::vector<double>& values);
  void barrier();
  /// Sums the ranks' evaluation counts (correct top-1/top-5, images, loss) into
  /// every rank's meters.
  void reduce_eval(AccuracyMeter& acc, AverageMeter& loss);

 private:
  dist::DistEnv env_;
  Device device_;
  std::shared_ptr<dist::TcpStore> store_;
  std::shared_ptr<dist::ProcessGroup> group_;
};

/// One line on the reducer's last step: buckets, all-reduce time and the part
/// of it hidden behind backward.
std::string ddp_summary(dist::DistributedDataParallel& ddp);

/// A DistContext when cfg says network.distributed, else null.
std::unique_ptr<DistContext> init_distributed(const Config& cfg, Device device);

}  // namespace tcv::train
