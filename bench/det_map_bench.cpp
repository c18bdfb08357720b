// tcv-map-bench: times tcv's detection evaluation on a COCO ground-truth file
// and a COCO results file (bench/compare/det_map.py runs it beside pycocotools).
//
//   tcv-map-bench --gt instances.json --dets results.json [--metric coco|voc07|voc]
//                 [--repeat N] [--json]
//
// Timed: adding every image's ground truth and detections to a fresh
// DetectionEvaluator and computing its metrics (pycocotools' evaluate() and
// accumulate()); reading the JSON files is not. Prints the median of N runs,
// wall-clock and CPU time (summed over threads).
// Threads: OMP_NUM_THREADS (categories run in parallel).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>

#include "data/det/coco.h"
#include "data/idx.h"
#include "train/eval/coco_results.h"
#include "train/eval/det_map.h"

namespace {

struct Args {
  std::string gt, dets, metric = "coco";
  int repeat = 5;
  bool json = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      TCV_CHECK(i + 1 < argc, s, " needs a value");
      return argv[++i];
    };
    if (s == "--gt")
      a.gt = value();
    else if (s == "--dets")
      a.dets = value();
    else if (s == "--metric")
      a.metric = value();
    else if (s == "--repeat")
      a.repeat = std::max(1, std::stoi(value()));
    else if (s == "--json")
      a.json = true;
    else
      TCV_THROW("unknown argument '", s,
                "' (usage: tcv-map-bench --gt GT.json --dets DETS.json [--metric coco|voc07|voc] "
                "[--repeat N] [--json])");
  }
  TCV_CHECK(!a.gt.empty() && !a.dets.empty(), "tcv-map-bench needs --gt and --dets");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    using namespace tcv;
    const data::CocoTruth truth =
        data::coco_truth(data::parse_coco(data::read_maybe_gzip(a.gt), a.gt), a.gt);
    const std::vector<train::CocoDetection> res =
        train::parse_coco_results(data::read_maybe_gzip(a.dets), a.dets);
    const std::vector<train::ImageDetections> dets = train::coco_detections(res, truth, a.dets);
    const std::vector<int64_t>& ids = truth.image_ids;
    std::vector<std::string> names;  // the category ids, as the per-class keys
    for (int64_t id : truth.labels.category_ids) names.push_back(std::to_string(id));

    const train::DetEvalOptions opts{.metric = train::parse_det_metric(a.metric),
                                     .class_names = names};
    std::vector<double> ms, cpu_ms;
    train::Metrics m;
    for (int rep = 0; rep < a.repeat; ++rep) {
      const std::clock_t c0 = std::clock();
      const auto t0 = std::chrono::steady_clock::now();
      train::DetectionEvaluator ev(opts);
      for (size_t i = 0; i < ids.size(); ++i) ev.add(ids[i], truth.targets[i], dets[i]);
      m = ev.finish();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      cpu_ms.push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    }
    auto median_of = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double median = median_of(ms), median_cpu = median_of(cpu_ms);
    if (a.json) {
      nlohmann::json j = {{"images", ids.size()},        {"detections", res.size()},
                          {"metric", a.metric},          {"median_ms", median},
                          {"median_cpu_ms", median_cpu}, {"runs_ms", ms}};
      nlohmann::json stats = nlohmann::json::object();
      for (const auto& [k, v] : m)
        if (k.rfind("ap/", 0) != 0) stats[k] = v;
      j["metrics"] = stats;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "tcv-map-bench: " << ids.size() << " images, " << res.size() << " detections, "
                << a.metric << ": median " << median << " ms (CPU time " << median_cpu
                << " ms) over " << a.repeat << " runs\n";
      for (const auto& [k, v] : m)
        if (k.rfind("ap/", 0) != 0) std::cout << "  " << k << " " << v << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tcv-map-bench: error: " << e.what() << "\n";
    return 1;
  }
}
