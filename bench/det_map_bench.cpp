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
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>

#include "data/det/coco.h"
#include "data/idx.h"
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
    const data::CocoFile gt = data::parse_coco(data::read_maybe_gzip(a.gt), a.gt);
    // Labels: categories in increasing id order, as read_coco numbers them.
    std::vector<int64_t> cat_ids;
    for (const auto& c : gt.categories) cat_ids.push_back(c.id);
    std::sort(cat_ids.begin(), cat_ids.end());
    std::unordered_map<int64_t, int64_t> label_of;
    std::vector<std::string> names;
    for (size_t k = 0; k < cat_ids.size(); ++k) {
      label_of[cat_ids[k]] = static_cast<int64_t>(k) + 1;
      names.push_back(std::to_string(cat_ids[k]));
    }
    std::unordered_map<int64_t, size_t> at;
    std::vector<int64_t> ids;
    for (const auto& im : gt.images) {
      at[im.id] = ids.size();
      ids.push_back(im.id);
    }
    std::vector<data::DetTarget> truth(ids.size());
    for (const auto& o : gt.annotations) {
      const auto [x, y, w, h] = o.bbox;
      truth[at.at(o.image_id)].add({x, y, x + w, y + h}, label_of.at(o.category_id), false,
                                   o.iscrowd, o.area);
    }
    std::vector<train::ImageDetections> dets(ids.size());
    const nlohmann::json res = nlohmann::json::parse(data::read_maybe_gzip(a.dets));
    for (const auto& r : res) {
      auto& d = dets[at.at(r["image_id"].get<int64_t>())];
      const auto& b = r["bbox"];
      const double x = b[0].get<double>(), y = b[1].get<double>();
      d.boxes.push_back({x, y, x + b[2].get<double>(), y + b[3].get<double>()});
      d.scores.push_back(r["score"].get<double>());
      d.labels.push_back(label_of.at(r["category_id"].get<int64_t>()));
    }

    const train::DetEvalOptions opts{.metric = train::parse_det_metric(a.metric),
                                     .class_names = names};
    std::vector<double> ms, cpu_ms;
    train::Metrics m;
    for (int rep = 0; rep < a.repeat; ++rep) {
      const std::clock_t c0 = std::clock();
      const auto t0 = std::chrono::steady_clock::now();
      train::DetectionEvaluator ev(opts);
      for (size_t i = 0; i < ids.size(); ++i) ev.add(ids[i], truth[i], dets[i]);
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
