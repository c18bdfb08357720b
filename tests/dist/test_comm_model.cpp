// The all-reduce cost model and the bucket planner (dist/comm_model.h), in
// closed form and against brute force on synthetic timelines.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "dist/comm_model.h"
#include "engine/error.h"

namespace tcv::dist {
namespace {

TEST(FitAllReduceCost, RecoversLatencyAndBandwidthFromExactSamples) {
  const AllReduceCost truth{100e-6, 2e9};
  std::vector<std::pair<double, double>> s;
  for (double b : {32768.0, 524288.0, 4194304.0}) s.emplace_back(b, truth.seconds(b));
  const AllReduceCost c = fit_allreduce_cost(s);
  EXPECT_NEAR(c.latency_s, 100e-6, 1e-12);
  EXPECT_NEAR(c.bytes_per_s, 2e9, 1e-3);
}

TEST(FitAllReduceCost, LeastSquaresThroughNoisySamples) {
  // t = 1 + x (units), with +-0.5 on alternate samples at x = 0, 1, 2, 3:
  // the least-squares line through (0,1.5) (1,1.5) (2,3.5) (3,3.5) is 1.3 + 0.8x.
  const AllReduceCost c = fit_allreduce_cost({{0, 1.5}, {1, 1.5}, {2, 3.5}, {3, 3.5}});
  EXPECT_NEAR(c.latency_s, 1.3, 1e-12);
  EXPECT_NEAR(c.bytes_per_s, 1.0 / 0.8, 1e-12);
}

TEST(FitAllReduceCost, NegativeInterceptIsClampedAndOneSizeIsPureBandwidth) {
  // A line with intercept -1: refitted through the origin.
  const AllReduceCost a = fit_allreduce_cost({{1, 1}, {2, 3}, {3, 5}});
  EXPECT_EQ(a.latency_s, 0.0);
  EXPECT_NEAR(1.0 / a.bytes_per_s, (1 * 1 + 2 * 3 + 3 * 5) / 14.0, 1e-12);
  const AllReduceCost b = fit_allreduce_cost({{1000, 2e-3}, {1000, 4e-3}});
  EXPECT_EQ(b.latency_s, 0.0);
  EXPECT_NEAR(b.bytes_per_s, 1000 * 2000.0 / (2 + 4), 1e-6);
  // Time falling with size is noise: fastest sample, largest one's rate.
  const AllReduceCost c = fit_allreduce_cost({{1000, 3e-3}, {4000, 2e-3}});
  EXPECT_EQ(c.latency_s, 2e-3);
  EXPECT_NEAR(c.bytes_per_s, 4000 / 2e-3, 1e-3);
  EXPECT_THROW(fit_allreduce_cost({}), Error);
  EXPECT_THROW(fit_allreduce_cost({{10, 0.0}}), Error);
}

TEST(ClusterAllReduceCost, RingAndTreeInClosedForm) {
  ClusterLinks c;
  c.inter_bytes_per_s = 50e9;
  c.inter_latency_s = 10e-6;
  c.intra_bytes_per_s = 300e9;
  c.intra_latency_s = 3e-6;

  c.machines = 1;
  c.ranks_per_machine = 1;
  EXPECT_EQ(cluster_allreduce_cost(AllReduceAlgo::ring, c).seconds(1e9), 0.0);

  // One machine of 2: one hop each way, every rank sends B/2 twice.
  c.ranks_per_machine = 2;
  AllReduceCost r = cluster_allreduce_cost(AllReduceAlgo::ring, c);
  EXPECT_DOUBLE_EQ(r.latency_s, 2 * 3e-6);
  EXPECT_DOUBLE_EQ(r.bytes_per_s, 300e9);

  // 16 machines of 8: 2(P-1) steps paced by the network.
  c.machines = 16;
  c.ranks_per_machine = 8;
  r = cluster_allreduce_cost(AllReduceAlgo::ring, c);
  EXPECT_DOUBLE_EQ(r.latency_s, 2 * 127 * 10e-6);
  EXPECT_DOUBLE_EQ(r.bytes_per_s, 50e9 * 128 / 254);

  // Tree: depth ceil(log2 16) = 4 between machines, a chain of 8 inside.
  AllReduceCost t = cluster_allreduce_cost(AllReduceAlgo::tree, c);
  EXPECT_DOUBLE_EQ(t.latency_s, 2 * (4 * 10e-6 + 7 * 3e-6));
  EXPECT_DOUBLE_EQ(t.bytes_per_s, 25e9);
  c.machines = 3;  // not a power of two: depth 2
  t = cluster_allreduce_cost(AllReduceAlgo::tree, c);
  EXPECT_DOUBLE_EQ(t.latency_s, 2 * (2 * 10e-6 + 7 * 3e-6));

  // A network faster than the machine's own links is capped by them.
  c.inter_bytes_per_s = 1e12;
  EXPECT_DOUBLE_EQ(cluster_allreduce_cost(AllReduceAlgo::tree, c).bytes_per_s, 150e9);
  c.machines = 0;
  EXPECT_THROW(cluster_allreduce_cost(AllReduceAlgo::ring, c), Error);
}

TEST(ClusterAllReduceCost, RingLinkFromMeasuredCostInvertsOneMachine) {
  const AllReduceCost measured{150e-6, 3e9};
  for (int64_t p : {2, 3, 8}) {
    const auto [lat, bw] = ring_link_from_cost(measured, p);
    ClusterLinks c;
    c.machines = 1;
    c.ranks_per_machine = p;
    c.intra_latency_s = lat;
    c.intra_bytes_per_s = bw;
    const AllReduceCost back = cluster_allreduce_cost(AllReduceAlgo::ring, c);
    EXPECT_NEAR(back.latency_s, measured.latency_s, 1e-15) << p;
    EXPECT_NEAR(back.bytes_per_s, measured.bytes_per_s, 1e-3) << p;
  }
  EXPECT_THROW(ring_link_from_cost(measured, 1), Error);
}

TEST(SimulateOverlap, QueueAndTailByHand) {
  // Cost 0.5 + bytes (seconds). Bucket 0 ready at 1 runs [1, 2.5]; bucket 1,
  // ready at 2, waits for it: [2.5, 5]; bucket 2 ready at 10 runs [10, 11.5];
  // backward ends at 10.
  const AllReduceCost cost{0.5, 1.0};
  const OverlapResult r = simulate_overlap({{1, 1}, {2, 2}, {10, 1}}, 10.0, cost);
  ASSERT_EQ(r.finish_s.size(), 3u);
  EXPECT_DOUBLE_EQ(r.start_s[1], 2.5);
  EXPECT_DOUBLE_EQ(r.finish_s[1], 5.0);
  EXPECT_DOUBLE_EQ(r.finish_s[2], 11.5);
  EXPECT_DOUBLE_EQ(r.comm_s, 4.0 + 1.5);  // [1, 5] and [10, 11.5]
  EXPECT_DOUBLE_EQ(r.hidden_s, 4.0);
  EXPECT_DOUBLE_EQ(r.exposed_s, 1.5);
  // Index order: a bucket ready before the one ahead of it launches with it.
  const OverlapResult o = simulate_overlap({{5, 1}, {3, 1}}, 6.0, cost);
  EXPECT_DOUBLE_EQ(o.launch_s[1], 5.0);
  EXPECT_DOUBLE_EQ(o.start_s[1], 6.5);
  EXPECT_DOUBLE_EQ(o.exposed_s, 2.0);
}

// Every contiguous split of `ps` (within the cap) and the last finish of each.
double best_finish_brute(const std::vector<ParamTiming>& ps, const AllReduceCost& cost,
                         double cap) {
  const size_t n = ps.size();
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {  // bit i: cut after param i
    std::vector<BucketTiming> bs;
    BucketTiming cur;
    size_t in_cur = 0;
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      cur.ready_s = std::max(cur.ready_s, ps[i].ready_s);
      cur.bytes += ps[i].bytes;
      ++in_cur;
      if (i + 1 == n || (mask >> i & 1u)) {
        ok = ok && (in_cur == 1 || cur.bytes <= cap);
        bs.push_back(cur);
        cur = {};
        in_cur = 0;
      }
    }
    if (!ok) continue;
    best = std::min(best, simulate_overlap(bs, 0.0, cost).finish_s.back());
  }
  return best;
}

std::vector<BucketTiming> as_buckets(const std::vector<ParamTiming>& ps,
                                     const std::vector<size_t>& sizes) {
  std::vector<BucketTiming> bs;
  size_t i = 0;
  for (size_t c : sizes) {
    BucketTiming b;
    for (size_t e = i + c; i < e; ++i) {
      b.ready_s = std::max(b.ready_s, ps[i].ready_s);
      b.bytes += ps[i].bytes;
    }
    bs.push_back(b);
  }
  return bs;
}

TEST(PlanBuckets, EveryPrefixFinishesAsEarlyAsBruteForceAllows) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> gap(0.0, 2e-3), size(1e3, 2e6);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<ParamTiming> ps;
    double t = 0;
    for (int i = 0; i < 10; ++i) {
      t += gap(rng);
      ps.push_back({t, size(rng)});
    }
    const AllReduceCost cost{trial % 2 ? 300e-6 : 50e-6, trial % 3 ? 2e9 : 5e8};
    BucketPlanOptions po;
    po.safety = 1.0;
    po.latency_slack = 0.0;
    po.max_bucket_bytes = trial % 4 ? 4e6 : 1e12;
    const auto sizes = plan_buckets(ps, cost, po);
    size_t total = 0;
    for (size_t c : sizes) total += c;
    ASSERT_EQ(total, ps.size());
    const OverlapResult r = simulate_overlap(as_buckets(ps, sizes), 0.0, cost);
    // The whole, and each prefix ending at a cut, as early as any split.
    size_t end = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      end += sizes[k];
      const std::vector<ParamTiming> prefix(ps.begin(), ps.begin() + static_cast<long>(end));
      EXPECT_NEAR(r.finish_s[k], best_finish_brute(prefix, cost, po.max_bucket_bytes), 1e-12)
          << "trial " << trial << " bucket " << k;
    }
  }
}

TEST(PlanBuckets, SyntheticTimelines) {
  const AllReduceCost cost{1e-3, 1e9};  // 1 ms + 1 ms per MB
  BucketPlanOptions po;
  po.safety = 1.0;
  po.latency_slack = 0.0;
  // 1 MB every 10 ms: each one is reduced before the next is ready.
  std::vector<ParamTiming> spaced;
  for (int i = 0; i < 6; ++i) spaced.push_back({0.01 * i, 1e6});
  EXPECT_EQ(plan_buckets(spaced, cost, po), (std::vector<size_t>{1, 1, 1, 1, 1, 1}));
  // All ready at once: one bucket pays one latency.
  std::vector<ParamTiming> together(6, ParamTiming{0.0, 1e6});
  EXPECT_EQ(plan_buckets(together, cost, po), (std::vector<size_t>{6}));
  // ... unless the cap cuts it.
  po.max_bucket_bytes = 2.5e6;
  EXPECT_EQ(plan_buckets(together, cost, po), (std::vector<size_t>{2, 2, 2}));
  po.max_bucket_bytes = 25e6;
  // A burst of small ones just behind a big one: merged while it runs.
  const std::vector<ParamTiming> burst = {
      {0.0, 4e6}, {0.001, 1e4}, {0.002, 1e4}, {0.003, 1e4}, {0.020, 1e4}};
  EXPECT_EQ(plan_buckets(burst, cost, po), (std::vector<size_t>{1, 3, 1}));
  // The slack trades up to (slack x latency) per cut for fewer buckets.
  po.latency_slack = 2.0;
  const auto fewer = plan_buckets(spaced, cost, po);
  EXPECT_LT(fewer.size(), 6u);
  const double finish = simulate_overlap(as_buckets(spaced, fewer), 0.05, cost).finish_s.back();
  EXPECT_LE(finish, 0.05 + cost.seconds(1e6) + 2.0 * cost.latency_s + 1e-12);
}

// A ResNet-like backward: the last layers' big gradients first, the first
// layers' small ones last. PyTorch's cap rule leaves most bytes in a bucket
// that is ready only when backward ends; the plan leaves a small tail.
TEST(PlanBuckets, ShorterTailThanTheCapRule) {
  std::vector<ParamTiming> ps;
  for (int i = 0; i < 8; ++i) ps.push_back({0.004 * i, 600e3});  // big, early
  for (int i = 0; i < 8; ++i) ps.push_back({0.04 + 0.004 * i, 150e3});
  for (int i = 0; i < 8; ++i) ps.push_back({0.08 + 0.004 * i, 40e3});  // small, last
  const double end = ps.back().ready_s;
  const AllReduceCost cost{300e-6, 1e9};
  // The cap rule: 1 MiB, then 25 MiB.
  std::vector<size_t> cap_sizes;
  double acc = 0;
  size_t in = 0;
  bool first = true;
  for (const ParamTiming& p : ps) {
    acc += p.bytes;
    ++in;
    if (acc >= (first ? 1048576.0 : 26214400.0)) {
      cap_sizes.push_back(in);
      acc = 0;
      in = 0;
      first = false;
    }
  }
  if (in) cap_sizes.push_back(in);
  const double cap_tail = simulate_overlap(as_buckets(ps, cap_sizes), end, cost).exposed_s;
  const auto planned = plan_buckets(ps, cost);
  const OverlapResult r = simulate_overlap(as_buckets(ps, planned), end, cost);
  EXPECT_LT(r.exposed_s, cap_tail / 4) << "cap tail " << cap_tail;
  EXPECT_LE(r.exposed_s, cost.seconds(40e3 * 8) + 1e-12);
  EXPECT_GT(r.hidden_s / r.comm_s, 0.9);
}

}  // namespace
}  // namespace tcv::dist
