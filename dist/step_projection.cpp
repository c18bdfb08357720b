#include "dist/step_projection.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "engine/json.h"

namespace tcv::dist {

double StepTimeline::total_bytes() const {
  double b = 0;
  for (const ParamTiming& p : params) b += p.bytes;
  return b;
}

StepTimeline read_step_timeline(const std::string& path) {
  std::ifstream f(path);
  TCV_CHECK(f.good(), "[read_step_timeline] cannot read ", path,
            " (write one with TCV_TIMELINE=FILE or tcv-ddp-bench --timeline FILE)");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    const Json j = json_parse(ss.str());
    const Json& other = json_at(j, "otherData");
    TCV_CHECK(other.contains("step_ms") && other.contains("params"),
              "the timeline has no step_ms or params (written by an older tcv?)");
    StepTimeline t;
    t.world = json_int(other, "world");
    t.backend = json_string(other, "backend");
    t.step_s = 1e-3 * json_double(other, "step_ms");
    t.forward_s = 1e-3 * json_double(other, "forward_ms");
    t.backward_s = 1e-3 * json_double(other, "backward_ms");
    t.exposed_s = 1e-3 * json_double(other, "exposed_ms");
    const double begin_us = json_double(other, "backward_begin_us");
    const double end_us = json_double(other, "backward_end_us");
    for (const Json& p : json_at(other, "params")) {
      double r = json_double(p, "ready_us");
      if (r < 0) r = end_us;  // never ready in that backward
      t.params.push_back({(r - begin_us) * 1e-6, static_cast<double>(json_int(p, "bytes"))});
    }
    std::stable_sort(
        t.params.begin(), t.params.end(),
        [](const ParamTiming& a, const ParamTiming& b) { return a.ready_s < b.ready_s; });
    if (other.contains("allreduce_cost")) {
      const Json& c = json_at(other, "allreduce_cost");
      t.calibrated =
          AllReduceCost{1e-6 * json_double(c, "latency_us"), 1e9 * json_double(c, "gbytes_per_s")};
    }
    struct Ev {
      int64_t bucket;
      BucketTiming timing;
      double run_s;
    };
    std::vector<Ev> evs;
    for (const Json& e : json_at(j, "traceEvents")) {
      if (json_string(e, "ph") != "X" || !e.contains("args")) continue;
      const Json& a = json_at(e, "args");
      if (!a.contains("bucket")) continue;
      const double ts = json_double(e, "ts"), dur = json_double(e, "dur");
      const double run = a.contains("started_us") ? ts + dur - json_double(a, "started_us") : -1e6;
      evs.push_back({json_int(a, "bucket"),
                     {(ts - begin_us) * 1e-6, static_cast<double>(json_int(a, "bytes"))},
                     run * 1e-6});
    }
    std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.bucket < b.bucket; });
    for (const Ev& e : evs) {
      t.buckets.push_back(e.timing);
      t.bucket_run_s.push_back(e.run_s < 0 ? -1 : e.run_s);
    }
    TCV_CHECK(!t.params.empty() && t.step_s > 0, "the timeline has no parameters or no step time");
    return t;
  } catch (const Error& e) {
    TCV_THROW("[read_step_timeline] ", path, ": ", e.what());
  }
}

std::optional<AllReduceCost> fit_timeline_cost(const StepTimeline& t) {
  // A bucket's run also holds any wait for a peer that was behind, so the
  // fit follows the fast runs: the Theil-Sen slope (the median of the
  // pairwise slopes) and the 20th percentile of what is left as the latency.
  std::vector<std::pair<double, double>> s;
  for (size_t k = 0; k < t.buckets.size(); ++k)
    if (t.bucket_run_s[k] > 0) s.emplace_back(t.buckets[k].bytes, t.bucket_run_s[k]);
  std::vector<double> slopes;
  for (size_t a = 0; a < s.size(); ++a)
    for (size_t b = a + 1; b < s.size(); ++b)
      if (s[a].first != s[b].first)
        slopes.push_back((s[b].second - s[a].second) / (s[b].first - s[a].first));
  if (slopes.empty()) return std::nullopt;
  std::nth_element(slopes.begin(), slopes.begin() + static_cast<std::ptrdiff_t>(slopes.size() / 2),
                   slopes.end());
  const double slope = slopes[slopes.size() / 2];
  if (slope <= 0) return fit_allreduce_cost(s);  // no size trend: its fallback
  std::vector<double> rest;
  for (const auto& [x, y] : s) rest.push_back(y - slope * x);
  std::sort(rest.begin(), rest.end());
  AllReduceCost c;
  c.latency_s = std::max(0.0, rest[rest.size() / 5]);
  c.bytes_per_s = 1.0 / slope;
  return c;
}

Projection project_step(const StepTimeline& t, const ProjectionOptions& o) {
  TCV_CHECK(o.compute_scale > 0, "[project_step] compute_scale must be positive");
  const double k = o.compute_scale;
  const AllReduceCost cost = cluster_allreduce_cost(o.algo, o.links);
  std::vector<BucketTiming> buckets;
  if (o.replan || t.buckets.empty()) {
    std::vector<ParamTiming> ps = t.params;
    for (ParamTiming& p : ps) p.ready_s *= k;
    size_t i = 0;
    for (size_t count : plan_buckets(ps, cost, o.plan)) {
      BucketTiming b;
      for (size_t e = i + count; i < e; ++i) {
        b.ready_s = std::max(b.ready_s, ps[i].ready_s);
        b.bytes += ps[i].bytes;
      }
      buckets.push_back(b);
    }
  } else {
    for (const BucketTiming& b : t.buckets) buckets.push_back({b.ready_s * k, b.bytes});
  }
  const OverlapResult sim = simulate_overlap(buckets, t.backward_s * k, cost);
  Projection p;
  p.ranks = o.links.ranks();
  p.buckets = static_cast<int64_t>(buckets.size());
  p.compute_s = t.compute_s() * k;
  for (const BucketTiming& b : buckets) p.comm_s += p.ranks > 1 ? cost.seconds(b.bytes) : 0.0;
  p.exposed_s = p.ranks > 1 ? sim.exposed_s : 0.0;
  p.step_s = p.compute_s + p.exposed_s;
  p.efficiency = p.compute_s / p.step_s;
  p.allreduce_all_s = p.ranks > 1 ? cost.seconds(t.total_bytes()) : 0.0;
  return p;
}

}  // namespace tcv::dist
