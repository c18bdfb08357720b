// The all-reduce cost model, in one place for the two things that need it:
// the Reducer's bucket planner (which buckets make the exposed tail after
// backward smallest on this group) and the scaling projection of
// `tcv-bench ddp --project` (what a measured step becomes on N machines).
//
// An all-reduce of B bytes costs latency + B / bandwidth. On one group the two
// numbers are fitted to timed all-reduces; on a cluster they follow from its
// links through a ring or a tree (NCCL's two algorithms). Buckets all-reduce
// one after another, in index order, each once it and every bucket before it
// are ready (simulate_overlap); the planner chooses their boundaries
// (plan_buckets).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tcv::dist {

/// The time of one all-reduce: latency_s + bytes / bytes_per_s.
struct AllReduceCost {
  double latency_s = 0;
  double bytes_per_s = 1e9;
  double seconds(double bytes) const { return latency_s + bytes / bytes_per_s; }
};

/// Least-squares fit of latency + bytes / bandwidth to (bytes, seconds)
/// samples. The latency is clamped to >= 0 (the bandwidth is then refitted
/// through the origin); with every sample at one size the latency is 0. When
/// the time does not grow with the size (noise), the latency is the fastest
/// sample and the bandwidth the largest sample's bytes per second.
/// Throws tcv::Error without samples or with a non-positive time.
AllReduceCost fit_allreduce_cost(const std::vector<std::pair<double, double>>& bytes_seconds);

/// NCCL's two all-reduce algorithms, as cost models.
enum class AllReduceAlgo : uint8_t {
  ring,  ///< one ring through every rank: bandwidth-optimal, latency linear in the ranks
  tree,  ///< chains in each machine, a binary tree between machines: latency logarithmic
};

const char* allreduce_algo_name(AllReduceAlgo algo);

/// A cluster: `machines` machines of `ranks_per_machine` ranks each.
struct ClusterLinks {
  int64_t machines = 1;
  int64_t ranks_per_machine = 1;
  double inter_bytes_per_s = 50e9;   ///< each machine's network, per direction (400 Gb/s)
  double inter_latency_s = 5e-6;     ///< one hop between machines
  double intra_bytes_per_s = 150e9;  ///< between two ranks of one machine, per direction
  double intra_latency_s = 2e-6;     ///< one hop inside a machine
  int64_t ranks() const { return machines * ranks_per_machine; }
};

/// The cost of one all-reduce on `c` with P = c.ranks() ranks, N machines of G:
///   ring: 2(P-1) steps, each paced by the slowest hop (between machines when
///         N > 1): latency 2(P-1)·α, and every rank sends and receives
///         2(P-1)/P·B over the slowest link: bandwidth β·P / (2(P-1));
///   tree: the G ranks of a machine chained, the machines in a (double) binary
///         tree, reduce up then broadcast down, pipelined: latency
///         2(ceil(log2 N)·α_inter + (G-1)·α_intra), and about 2B over the
///         slowest link: bandwidth β / 2.
/// β is the network's bandwidth when N > 1 (or the intra-machine one when
/// lower), else the intra-machine one. One rank: zero latency, no transfer.
AllReduceCost cluster_allreduce_cost(AllReduceAlgo algo, const ClusterLinks& c);

/// The link parameters that make a ring of `ranks` ranks on one machine cost
/// `measured` (the inverse of cluster_allreduce_cost for N = 1): how a group's
/// fitted cost becomes the intra-machine link of a projection.
std::pair<double, double> ring_link_from_cost(const AllReduceCost& measured, int64_t ranks);

/// One bucket as the overlap simulation sees it; times from the start of backward.
struct BucketTiming {
  double ready_s = 0;  ///< when its last gradient became ready
  double bytes = 0;
};

/// What the all-reduces of one backward did, simulated.
struct OverlapResult {
  std::vector<double> launch_s;  ///< once it and every bucket before it are ready
  std::vector<double> start_s;   ///< once, too, the previous all-reduce finished
  std::vector<double> finish_s;
  double comm_s = 0;     ///< union of the [launch, finish] intervals
  double hidden_s = 0;   ///< the part of comm_s before backward ends
  double exposed_s = 0;  ///< how long after backward's end the last all-reduce finishes
};

/// Runs the buckets' all-reduces one at a time in index order, bucket k
/// launching once buckets 0..k are ready and starting once bucket k-1 is
/// done, against a backward that ends at backward_end_s.
OverlapResult simulate_overlap(const std::vector<BucketTiming>& buckets, double backward_end_s,
                               const AllReduceCost& cost);

/// A parameter as the planner sees it, in the order gradients became ready.
struct ParamTiming {
  double ready_s = 0;
  double bytes = 0;
};

struct BucketPlanOptions {
  /// No bucket grows past this (a single larger parameter is its own bucket).
  double max_bucket_bytes = 25.0 * 1024 * 1024;
  /// Costs are multiplied by this while planning: all-reduces run slower
  /// while backward competes for the same cores (CPU) or memory, and ranks
  /// drift apart; the measured cost is an idle one.
  double safety = 2.0;
  /// At each cut, among the candidates that finish within this fraction of
  /// one (safety-scaled) latency of the earliest, the one with the fewest
  /// buckets wins: a bucket saved is a latency saved on the wire.
  double latency_slack = 0.0;
};

/// Splits parameters, given in the order their gradients became ready, into
/// contiguous buckets so that the last all-reduce finishes as early as
/// possible under safety × cost (simulate_overlap's rules). A dynamic program
/// over the prefixes: the best plan for the first j parameters extends the
/// best plan for some shorter prefix (a later finish never helps what follows),
/// so every prefix of the gradients is also reduced as early as the model
/// allows, which keeps the plan robust when a bucket runs late. O(n^2) in the
/// parameters (fewer when max_bucket_bytes cuts the candidates). Returns the
/// number of parameters in each bucket, in order.
std::vector<size_t> plan_buckets(const std::vector<ParamTiming>& params, const AllReduceCost& cost,
                                 const BucketPlanOptions& opts = {});

}  // namespace tcv::dist
