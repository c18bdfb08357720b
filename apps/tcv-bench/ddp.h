// tcv-bench ddp --project: what a measured DDP step becomes on N machines of G
// GPUs (dist/step_projection.h), as a table per machine count and all-reduce
// algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/step_projection.h"

namespace tcv::bench {

struct DdpProjectOptions {
  std::string timeline;                                           ///< --project FILE
  std::vector<int64_t> machines = {1, 2, 4, 8, 16, 32, 64, 128};  ///< --machines
  int64_t gpus_per_machine = 8;                                   ///< --gpus-per-machine
  double link_gbps = 400;                                         ///< --link-gbps (Gb/s)
  double link_latency_us = 10;                                    ///< --link-latency-us
  double intra_gbps = 2400;                                       ///< --intra-gbps (Gb/s)
  double intra_latency_us = 3;                                    ///< --intra-latency-us
  std::string intra_from;  ///< --intra-from FILE (--intra-from-timeline: the --project file)
  std::vector<dist::AllReduceAlgo> algos = {dist::AllReduceAlgo::ring,
                                            dist::AllReduceAlgo::tree};  ///< --algo
  double compute_scale = 1;                                              ///< --compute-scale
  double compute_ms = 0;  ///< --compute-ms (0: use compute_scale)
  bool replan = false;    ///< --replan
  int64_t batch = 0;      ///< --batch: per-rank batch, for images/s (0: not shown)
  bool json = false;      ///< --json
};

/// Parses the arguments after "ddp". Throws apps::UsageError.
DdpProjectOptions parse_ddp_args(const std::vector<std::string>& args);

/// Prints the projection table; returns the exit status.
int run_ddp_project(const DdpProjectOptions& opts);

/// The usage text of the subcommand.
extern const char* const kDdpUsage;

}  // namespace tcv::bench
