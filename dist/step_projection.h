// What a measured DDP step becomes on a cluster: the scaling projection behind
// `tcv-bench ddp --project`. It reads the step timeline DistributedDataParallel
// writes (TCV_TIMELINE), keeps each rank's compute as measured (forward,
// backward and the optimizer: weak scaling, the per-rank batch fixed) and
// replaces the all-reduces by the cost model of dist/comm_model.h on the
// cluster's links, run against the measured gradient ready times.
//
// Assumptions (README "Scaling projection"): compute does not slow down with
// the world (no stragglers, no contention between compute and communication
// on the target); all-reduces run one at a time, in bucket order; the links
// are as given, with no congestion from other jobs; the one-machine
// all-reduce in the timeline (measured at its own world) stands for nothing
// on the target unless asked (--intra-from-timeline).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/comm_model.h"

namespace tcv::dist {

/// One measured step, times in seconds.
struct StepTimeline {
  int64_t world = 1;
  std::string backend;
  double step_s = 0;      ///< this forward's start to the next forward's start
  double forward_s = 0;   ///< the forward span
  double backward_s = 0;  ///< first gradient ready to the end of backward
  double exposed_s = 0;   ///< all-reduce time after backward ended (measured)
  /// Gradients in the order they became ready, from the first one.
  std::vector<ParamTiming> params;
  /// The step's buckets in index order: when the last of each one's
  /// gradients was ready (from the first one), and bytes.
  std::vector<BucketTiming> buckets;
  /// Each bucket's all-reduce as the backend ran it (start to finish; -1
  /// where the backend could not tell).
  std::vector<double> bucket_run_s;
  /// The all-reduce cost the reducer fitted on its group, when it planned.
  std::optional<AllReduceCost> calibrated;

  /// The step without communication: what one rank alone would take.
  double compute_s() const { return step_s - exposed_s; }
  double total_bytes() const;
};

/// Reads the Chrome trace JSON DistributedDataParallel::write_timeline wrote.
/// Errors name the file and the missing or malformed field.
StepTimeline read_step_timeline(const std::string& path);

/// The cost of the timeline's own all-reduces, fitted to its buckets' runs
/// (start to finish, while backward ran): as a run also holds any wait for a
/// peer that was behind, the fit follows the fast ones (Theil-Sen slope, the
/// 20th percentile of the rest as latency). nullopt with fewer than two
/// sizes or no start times.
std::optional<AllReduceCost> fit_timeline_cost(const StepTimeline& t);

struct ProjectionOptions {
  AllReduceAlgo algo = AllReduceAlgo::ring;
  ClusterLinks links{};
  /// Multiplies every compute time (forward, backward, ready times, the
  /// rest): a timeline measured on one device standing for a faster one.
  double compute_scale = 1.0;
  /// Re-cut the buckets for the target's cost (plan_buckets) instead of
  /// keeping the measured ones.
  bool replan = false;
  /// The planner's options for replan; the model is the target's truth here,
  /// so no safety margin by default.
  BucketPlanOptions plan{.max_bucket_bytes = 25.0 * 1024 * 1024, .safety = 1.0};
};

struct Projection {
  int64_t ranks = 1;
  int64_t buckets = 0;
  double compute_s = 0;        ///< the step without communication (scaled)
  double comm_s = 0;           ///< the all-reduces' total run time
  double exposed_s = 0;        ///< after backward ends
  double step_s = 0;           ///< compute_s + exposed_s
  double efficiency = 1;       ///< compute_s / step_s: throughput per rank against one rank alone
  double allreduce_all_s = 0;  ///< one all-reduce of every gradient at once, for reference
};

/// The timeline's step on `o.links` with `o.algo`.
Projection project_step(const StepTimeline& t, const ProjectionOptions& o);

}  // namespace tcv::dist
