#include "apps/tcv-bench/ddp.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "apps/cli.h"
#include "engine/json.h"

namespace tcv::bench {

const char* const kDdpUsage =
    "ddp --project FILE: the scaling projection of a measured DDP step. FILE is the step\n"
    "timeline DistributedDataParallel writes (TCV_TIMELINE=FILE, or tcv-ddp-bench --timeline\n"
    "FILE): forward, backward, each gradient's ready time and bytes, each bucket's all-reduce.\n"
    "Each rank keeps the measured compute (weak scaling: the per-rank batch is fixed); the\n"
    "all-reduces follow the cost model of dist/comm_model.h on N machines of G ranks, one\n"
    "bucket at a time against the measured ready times. Prints, per machine count and\n"
    "algorithm: step time, communication, the part exposed after backward and the scaling\n"
    "efficiency (per-rank throughput against one rank alone). README: 'Scaling projection'.\n"
    "  --project FILE          the timeline (required)\n"
    "  --machines LIST         machine counts, comma-separated (1,2,4,8,16,32,64,128)\n"
    "  --gpus-per-machine G    ranks per machine (8)\n"
    "  --link-gbps X           each machine's network, Gb/s per direction (400)\n"
    "  --link-latency-us X     one hop between machines, microseconds (10)\n"
    "  --intra-gbps X          between two ranks of a machine, Gb/s per direction (2400)\n"
    "  --intra-latency-us X    one hop inside a machine, microseconds (3)\n"
    "  --intra-from FILE       the intra-machine link from the all-reduces of timeline FILE\n"
    "                          (of 2+ ranks: the reducer's calibration, else a fit to its\n"
    "                          buckets' runs); a timeline of one rank projected with the link\n"
    "                          of a timeline of two checks the model against that measurement\n"
    "  --intra-from-timeline   the same from the --project timeline itself\n"
    "  --algo ring|tree|both   all-reduce cost model (both)\n"
    "  --compute-scale X       multiply every compute time by X (1): a timeline from one\n"
    "                          device standing for another\n"
    "  --compute-ms T          or scale so that the step without communication takes T ms\n"
    "  --replan                re-cut the buckets for the target's cost (the reducer's\n"
    "                          planner) instead of keeping the measured buckets\n"
    "  --batch B               per-rank batch: adds global images/s\n"
    "  --json                  one JSON object per row instead of the table\n";

namespace {

using apps::parse_double;
using apps::parse_int;
using apps::UsageError;

std::vector<int64_t> parse_list(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_int(flag, item, 1));
  if (out.empty()) throw UsageError{flag + " expects a comma-separated list like 1,2,4"};
  return out;
}

double positive(const std::string& flag, const std::string& text) {
  const double v = parse_double(flag, text);
  if (!(v > 0)) throw UsageError{flag + " must be positive, got " + text};
  return v;
}

double non_negative(const std::string& flag, const std::string& text) {
  const double v = parse_double(flag, text);
  if (!(v >= 0)) throw UsageError{flag + " must be >= 0, got " + text};
  return v;
}

}  // namespace

DdpProjectOptions parse_ddp_args(const std::vector<std::string>& args) {
  DdpProjectOptions o;
  bool intra_from_timeline = false;
  auto into = [](double& dst, auto check) {
    return [&dst, check](const std::string& f, const std::string& v) { dst = check(f, v); };
  };
  apps::Flags()
      .text("--project", o.timeline)
      .with_value("--machines", [&](const std::string& f,
                                    const std::string& v) { o.machines = parse_list(f, v); })
      .integer("--gpus-per-machine", o.gpus_per_machine, 1)
      .with_value("--link-gbps", into(o.link_gbps, positive))
      .with_value("--link-latency-us", into(o.link_latency_us, non_negative))
      .with_value("--intra-gbps", into(o.intra_gbps, positive))
      .with_value("--intra-latency-us", into(o.intra_latency_us, non_negative))
      .text("--intra-from", o.intra_from)
      .toggle("--intra-from-timeline", intra_from_timeline)
      .with_value("--algo",
                  [&](const std::string&, const std::string& v) {
                    if (v == "ring")
                      o.algos = {dist::AllReduceAlgo::ring};
                    else if (v == "tree")
                      o.algos = {dist::AllReduceAlgo::tree};
                    else if (v == "both")
                      o.algos = {dist::AllReduceAlgo::ring, dist::AllReduceAlgo::tree};
                    else
                      throw UsageError{"--algo expects ring, tree or both, got '" + v + "'"};
                  })
      .with_value("--compute-scale", into(o.compute_scale, positive))
      .with_value("--compute-ms", into(o.compute_ms, positive))
      .toggle("--replan", o.replan)
      .integer("--batch", o.batch, 1)
      .toggle("--json", o.json)
      .parse(args);
  if (o.timeline.empty())
    throw UsageError{
        "ddp needs --project FILE (a step timeline: TCV_TIMELINE=FILE, or "
        "tcv-ddp-bench --timeline FILE)"};
  if (intra_from_timeline) o.intra_from = o.timeline;
  return o;
}

int run_ddp_project(const DdpProjectOptions& opts) {
  const dist::StepTimeline t = dist::read_step_timeline(opts.timeline);
  dist::ProjectionOptions po;
  po.replan = opts.replan;
  po.compute_scale =
      opts.compute_ms > 0 ? 1e-3 * opts.compute_ms / t.compute_s() : opts.compute_scale;
  dist::ClusterLinks links;
  links.ranks_per_machine = opts.gpus_per_machine;
  links.inter_bytes_per_s = opts.link_gbps * 1e9 / 8;
  links.inter_latency_s = opts.link_latency_us * 1e-6;
  links.intra_bytes_per_s = opts.intra_gbps * 1e9 / 8;
  links.intra_latency_s = opts.intra_latency_us * 1e-6;
  std::string intra_source = "as given";
  if (!opts.intra_from.empty()) {
    const dist::StepTimeline l =
        opts.intra_from == opts.timeline ? t : dist::read_step_timeline(opts.intra_from);
    // The reducer's calibration (ranks in step, nothing else running) over
    // the buckets' runs, which also hold any wait for a peer that was behind.
    std::optional<dist::AllReduceCost> c = l.calibrated;
    intra_source = "the reducer's calibration in " + opts.intra_from;
    if (!c) {
      c = dist::fit_timeline_cost(l);
      intra_source = "fitted to the bucket all-reduces of " + opts.intra_from;
    }
    TCV_CHECK(c.has_value() && l.world >= 2, "[tcv-bench ddp] ", opts.intra_from,
              ": --intra-from needs a timeline of 2 or more ranks with timed buckets of two "
              "sizes or a planned (calibrated) reducer");
    const auto [lat, bw] = dist::ring_link_from_cost(*c, l.world);
    links.intra_latency_s = lat;
    links.intra_bytes_per_s = bw;
  }

  const double measured_ms = 1e3 * t.step_s;
  if (!opts.json) {
    std::printf(
        "timeline %s: world %lld (%s), step %.2f ms = compute %.2f ms + exposed all-reduce %.2f "
        "ms; backward %.2f ms; %zu gradients, %.2f MiB; %zu buckets\n",
        opts.timeline.c_str(), static_cast<long long>(t.world), t.backend.c_str(), measured_ms,
        1e3 * t.compute_s(), 1e3 * t.exposed_s, 1e3 * t.backward_s, t.params.size(),
        t.total_bytes() / (1024.0 * 1024.0), t.buckets.size());
    std::printf(
        "compute x %.4g; links: between machines %.4g Gb/s, %.3g us per hop; inside %.4g Gb/s, "
        "%.3g us per hop (%s); buckets %s\n",
        po.compute_scale, links.inter_bytes_per_s * 8e-9, links.inter_latency_s * 1e6,
        links.intra_bytes_per_s * 8e-9, links.intra_latency_s * 1e6, intra_source.c_str(),
        opts.replan ? "re-planned for each target" : "as measured");
    std::printf("%9s %6s %5s %8s %11s %11s %11s %11s %8s%s\n", "machines", "ranks", "algo",
                "buckets", "allred(ms)", "comm(ms)", "exposed(ms)", "step(ms)", "eff(%)",
                opts.batch > 0 ? "     images/s" : "");
  }
  for (const int64_t m : opts.machines) {
    for (const dist::AllReduceAlgo algo : opts.algos) {
      links.machines = m;
      po.links = links;
      po.algo = algo;
      const dist::Projection p = dist::project_step(t, po);
      const double ips =
          opts.batch > 0 ? static_cast<double>(opts.batch * p.ranks) / p.step_s : 0.0;
      if (opts.json) {
        Json j = Json::object();
        j["machines"] = m;
        j["ranks"] = p.ranks;
        j["algo"] = dist::allreduce_algo_name(algo);
        j["buckets"] = p.buckets;
        j["allreduce_all_ms"] = 1e3 * p.allreduce_all_s;
        j["comm_ms"] = 1e3 * p.comm_s;
        j["exposed_ms"] = 1e3 * p.exposed_s;
        j["compute_ms"] = 1e3 * p.compute_s;
        j["step_ms"] = 1e3 * p.step_s;
        j["efficiency"] = p.efficiency;
        if (opts.batch > 0) j["images_per_sec"] = ips;
        std::printf("%s\n", json_dump(j).c_str());
      } else {
        std::printf("%9lld %6lld %5s %8lld %11.3f %11.3f %11.3f %11.3f %8.1f",
                    static_cast<long long>(m), static_cast<long long>(p.ranks),
                    dist::allreduce_algo_name(algo), static_cast<long long>(p.buckets),
                    1e3 * p.allreduce_all_s, 1e3 * p.comm_s, 1e3 * p.exposed_s, 1e3 * p.step_s,
                    100.0 * p.efficiency);
        if (opts.batch > 0) std::printf(" %12.1f", ips);
        std::printf("\n");
      }
      if (!opts.json && m == 1 && p.ranks == t.world && opts.intra_from == opts.timeline &&
          po.compute_scale == 1.0 && algo == opts.algos.front())
        std::printf(
            "  check: measured step %.3f ms, projected %.3f ms (%+.1f%%); exposed %.3f "
            "ms measured, %.3f ms projected\n",
            measured_ms, 1e3 * p.step_s, 100.0 * (1e3 * p.step_s / measured_ms - 1.0),
            1e3 * t.exposed_s, 1e3 * p.exposed_s);
    }
  }
  return 0;
}

}  // namespace tcv::bench
