#include "dist/comm_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/error.h"

namespace tcv::dist {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

AllReduceCost fit_allreduce_cost(const std::vector<std::pair<double, double>>& bytes_seconds) {
  TCV_CHECK(!bytes_seconds.empty(),
            "[fit_allreduce_cost] needs at least one (bytes, seconds) sample");
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  for (const auto& [x, t] : bytes_seconds) {
    TCV_CHECK(x >= 0 && t > 0,
              "[fit_allreduce_cost] samples need bytes >= 0 and seconds > 0, got (", x, ", ", t,
              ")");
    sx += x;
    st += t;
    sxx += x * x;
    sxt += x * t;
  }
  const double n = static_cast<double>(bytes_seconds.size());
  const double var = sxx - sx * sx / n;
  AllReduceCost c;
  double slope = 0;  // seconds per byte
  if (var > 1e-12 * std::max(1.0, sxx)) {
    slope = (sxt - sx * st / n) / var;
    c.latency_s = (st - slope * sx) / n;
  }
  if (c.latency_s < 0 || var <= 1e-12 * std::max(1.0, sxx)) {
    // Through the origin: a pure bandwidth (all samples at one size, or a
    // negative intercept from noise).
    c.latency_s = 0;
    slope = sxx > 0 ? sxt / sxx : 0;
  }
  if (slope <= 0) {
    // Time does not grow with size (noise): the fastest sample as the
    // latency, the largest one's bytes per second as the bandwidth.
    double t_min = kInf, x_max = 0, t_at_max = 0;
    for (const auto& [x, t] : bytes_seconds) {
      t_min = std::min(t_min, t);
      if (x >= x_max) {
        x_max = x;
        t_at_max = t;
      }
    }
    c.latency_s = t_min;
    c.bytes_per_s = x_max > 0 ? x_max / t_at_max : 1e30;
  } else {
    c.bytes_per_s = 1.0 / slope;
  }
  return c;
}

const char* allreduce_algo_name(AllReduceAlgo algo) {
  return algo == AllReduceAlgo::ring ? "ring" : "tree";
}

AllReduceCost cluster_allreduce_cost(AllReduceAlgo algo, const ClusterLinks& c) {
  TCV_CHECK(c.machines >= 1 && c.ranks_per_machine >= 1,
            "[cluster_allreduce_cost] needs at least one machine and one rank per machine, got ",
            c.machines, " x ", c.ranks_per_machine);
  TCV_CHECK(c.inter_bytes_per_s > 0 && c.intra_bytes_per_s > 0 && c.inter_latency_s >= 0 &&
                c.intra_latency_s >= 0,
            "[cluster_allreduce_cost] bandwidths must be positive and latencies >= 0");
  const int64_t p = c.ranks();
  AllReduceCost out;
  if (p == 1) {
    out.latency_s = 0;
    out.bytes_per_s = kInf;
    return out;
  }
  const bool multi = c.machines > 1;
  const double beta =
      multi ? std::min(c.inter_bytes_per_s, c.intra_bytes_per_s) : c.intra_bytes_per_s;
  const auto pd = static_cast<double>(p);
  if (algo == AllReduceAlgo::ring) {
    const double alpha = multi ? std::max(c.inter_latency_s, c.intra_latency_s) : c.intra_latency_s;
    out.latency_s = 2.0 * (pd - 1.0) * alpha;
    out.bytes_per_s = beta * pd / (2.0 * (pd - 1.0));
  } else {
    const double depth = std::ceil(std::log2(static_cast<double>(c.machines)));
    out.latency_s = 2.0 * (depth * c.inter_latency_s +
                           static_cast<double>(c.ranks_per_machine - 1) * c.intra_latency_s);
    out.bytes_per_s = beta / 2.0;
  }
  return out;
}

std::pair<double, double> ring_link_from_cost(const AllReduceCost& measured, int64_t ranks) {
  TCV_CHECK(ranks >= 2, "[ring_link_from_cost] needs at least 2 ranks, got ", ranks);
  const auto pd = static_cast<double>(ranks);
  const double latency = measured.latency_s / (2.0 * (pd - 1.0));
  const double bandwidth = measured.bytes_per_s * 2.0 * (pd - 1.0) / pd;
  return {latency, bandwidth};
}

OverlapResult simulate_overlap(const std::vector<BucketTiming>& buckets, double backward_end_s,
                               const AllReduceCost& cost) {
  OverlapResult r;
  double ready = -kInf, prev_finish = -kInf;
  for (const BucketTiming& b : buckets) {
    ready = std::max(ready, b.ready_s);
    const double start = std::max(ready, prev_finish);
    const double finish = start + cost.seconds(b.bytes);
    r.launch_s.push_back(ready);
    r.start_s.push_back(start);
    r.finish_s.push_back(finish);
    prev_finish = finish;
  }
  // Launches and finishes are both non-decreasing, so the intervals merge in order.
  double cur_b = 0, cur_e = -kInf;
  auto flush = [&] {
    if (cur_e <= cur_b) return;
    r.comm_s += cur_e - cur_b;
    r.hidden_s += std::max(0.0, std::min(cur_e, backward_end_s) - cur_b);
  };
  for (size_t k = 0; k < r.launch_s.size(); ++k) {
    if (r.launch_s[k] > cur_e) {
      flush();
      cur_b = r.launch_s[k];
      cur_e = r.finish_s[k];
    } else {
      cur_e = std::max(cur_e, r.finish_s[k]);
    }
  }
  flush();
  if (!r.finish_s.empty()) r.exposed_s = std::max(0.0, r.finish_s.back() - backward_end_s);
  return r;
}

std::vector<size_t> plan_buckets(const std::vector<ParamTiming>& params, const AllReduceCost& cost,
                                 const BucketPlanOptions& opts) {
  const size_t n = params.size();
  if (n == 0) return {};
  TCV_CHECK(opts.max_bucket_bytes > 0 && opts.safety > 0 && opts.latency_slack >= 0,
            "[plan_buckets] max_bucket_bytes and safety must be positive, latency_slack >= 0");
  // Prefix sums of bytes; ready times made non-decreasing (a bucket launches
  // once it and the ones before it are ready).
  std::vector<double> bytes = {0.0}, ready;
  double total = 0, r = -kInf;
  for (const ParamTiming& p : params) {
    total += p.bytes;
    bytes.push_back(total);
    r = std::max(r, p.ready_s);
    ready.push_back(r);
  }
  // f[j]: when the all-reduce of parameters [0, j) finishes, cut as planned;
  // from[j]: where the last bucket of that plan begins; count[j]: its buckets.
  // The last finish only grows with the finish before it, so the best plan of
  // [0, j) extends a best plan of some [0, i): every prefix of the chosen plan
  // is reduced as early as the model allows, not only the whole.
  std::vector<double> f = {-kInf};
  std::vector<size_t> from = {0}, count = {0};
  const double slack = opts.latency_slack * opts.safety * cost.latency_s;
  for (size_t j = 1; j <= n; ++j) {
    double best = kInf;
    size_t best_from = j - 1, best_count = 0;
    // Candidates from the smallest last bucket (one parameter) upwards.
    std::vector<std::pair<double, size_t>> cand;
    for (size_t i = j; i-- > 0;) {
      const double b = bytes[j] - bytes[i];
      if (j - i > 1 && b > opts.max_bucket_bytes) break;
      cand.emplace_back(std::max(ready[j - 1], f[i]) + opts.safety * cost.seconds(b), i);
      best = std::min(best, cand.back().first);
    }
    // Within the slack of the earliest, the fewest buckets (then the earliest).
    double chosen = kInf;
    for (const auto& [fin, i] : cand) {
      if (fin > best + slack + 1e-12 * std::abs(best)) continue;
      if (best_count == 0 || count[i] + 1 < best_count ||
          (count[i] + 1 == best_count && fin < chosen)) {
        chosen = fin;
        best_from = i;
        best_count = count[i] + 1;
      }
    }
    f.push_back(chosen);
    from.push_back(best_from);
    count.push_back(best_count);
  }
  std::vector<size_t> sizes;
  for (size_t j = n; j > 0; j = from[j]) sizes.push_back(j - from[j]);
  std::reverse(sizes.begin(), sizes.end());
  return sizes;
}

}  // namespace tcv::dist
