// tcv-map-bench: times tcv's detection evaluation on a COCO ground-truth file
// and a COCO results file (bench/compare/det_map.py runs it beside pycocotools).
//
//   tcv-map-bench --gt instances.json --dets results.json [--metric coco|voc07|voc]
//                 [--repeat N] [--json]
//   tcv-map-bench --keypoints IMAGES [--repeat N] [--json]
//
// Timed: adding every image's ground truth and detections to a fresh
// DetectionEvaluator and computing its metrics (pycocotools' evaluate() and
// accumulate()); reading the JSON files is not. Prints the median of N runs,
// wall-clock and CPU time (summed over threads).
// --keypoints times the COCO keypoint evaluation (KeypointEvaluator, OKS) the
// same way on IMAGES generated images: 0..8 people each with COCO's 17
// keypoints, some hidden, some crowds, and per person 0..2 detections that
// move its keypoints by a few pixels, plus false positives (a fixed seed).
// Threads: OMP_NUM_THREADS.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <string>

#include "data/det/coco.h"
#include "data/idx.h"
#include "train/eval/coco_results.h"
#include "train/eval/det_map.h"
#include "train/eval/keypoint_ap.h"

namespace {

struct Args {
  std::string gt, dets, metric = "coco";
  int64_t keypoints = 0;  // images of the keypoint benchmark; 0: boxes from files
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
    else if (s == "--keypoints")
      a.keypoints = std::max(1, std::stoi(value()));
    else if (s == "--json")
      a.json = true;
    else
      TCV_THROW("unknown argument '", s,
                "' (usage: tcv-map-bench --gt GT.json --dets DETS.json [--metric coco|voc07|voc] "
                "[--repeat N] [--json], or tcv-map-bench --keypoints IMAGES [--repeat N] "
                "[--json])");
  }
  TCV_CHECK(a.keypoints > 0 || (!a.gt.empty() && !a.dets.empty()),
            "tcv-map-bench needs --gt and --dets, or --keypoints");
  return a;
}

// splitmix64: the same data on every machine.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

struct KeypointImage {
  std::vector<tcv::train::KeypointTruth> truth;
  std::vector<tcv::train::KeypointDetection> dets;
};

std::vector<KeypointImage> keypoint_images(int64_t n) {
  using namespace tcv::train;
  Rng rng{20261202};
  std::vector<KeypointImage> out(static_cast<size_t>(n));
  for (KeypointImage& im : out) {
    const int64_t people = rng.below(9);
    for (int64_t p = 0; p < people; ++p) {
      KeypointTruth t;
      const double w = rng.uniform(20, 300), h = rng.uniform(40, 400);
      const double x = rng.uniform(0, 640 - w), y = rng.uniform(0, 480 - h);
      t.bbox = {x, y, w, h};
      t.area = w * h * rng.uniform(0.5, 0.9);
      t.crowd = rng.below(40) == 0;
      for (int k = 0; k < 17; ++k) {
        const bool labelled = !t.crowd && rng.below(4) != 0;
        t.keypoints.insert(
            t.keypoints.end(),
            {labelled ? x + rng.uniform(0, w) : 0.0, labelled ? y + rng.uniform(0, h) : 0.0,
             labelled ? static_cast<double>(1 + rng.below(2)) : 0.0});
        t.num_keypoints += labelled;
      }
      const int64_t found = t.crowd ? 0 : rng.below(3);
      for (int64_t d = 0; d < found; ++d) {
        KeypointDetection det;
        const double jitter = rng.uniform(0.5, 12);
        for (int k = 0; k < 17; ++k) {
          const bool labelled = t.keypoints[3 * k + 2] > 0;
          det.keypoints.insert(det.keypoints.end(),
                               {(labelled ? t.keypoints[3 * k] : x + rng.uniform(0, w)) +
                                    rng.uniform(-jitter, jitter),
                                (labelled ? t.keypoints[3 * k + 1] : y + rng.uniform(0, h)) +
                                    rng.uniform(-jitter, jitter),
                                1.0});
        }
        det.score = static_cast<double>(rng.below(1024)) / 1024.0;
        im.dets.push_back(std::move(det));
      }
      im.truth.push_back(std::move(t));
    }
    for (int64_t f = rng.below(4); f > 0; --f) {  // false positives
      KeypointDetection det;
      const double x = rng.uniform(0, 600), y = rng.uniform(0, 440);
      for (int k = 0; k < 17; ++k)
        det.keypoints.insert(det.keypoints.end(),
                             {x + rng.uniform(0, 60), y + rng.uniform(0, 120), 1.0});
      det.score = static_cast<double>(rng.below(1024)) / 1024.0;
      im.dets.push_back(std::move(det));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    using namespace tcv;
    // What is timed: a fresh evaluator given every image, then its metrics.
    std::function<train::Metrics()> evaluate;
    std::string what;  // the data, for the text line
    nlohmann::json j = nlohmann::json::object();
    std::vector<KeypointImage> images;
    data::CocoTruth truth;
    std::vector<train::ImageDetections> dets;
    train::DetEvalOptions opts;
    if (a.keypoints > 0) {
      images = keypoint_images(a.keypoints);
      size_t people = 0, found = 0;
      for (const KeypointImage& im : images) {
        people += im.truth.size();
        found += im.dets.size();
      }
      j = {{"images", images.size()},
           {"people", people},
           {"detections", found},
           {"metric", "keypoints"}};
      what = std::to_string(images.size()) + " images, " + std::to_string(people) + " people, " +
             std::to_string(found) + " detections, keypoints";
      evaluate = [&] {
        train::KeypointEvaluator ev;
        for (size_t i = 0; i < images.size(); ++i)
          ev.add(static_cast<int64_t>(i), images[i].truth, images[i].dets);
        return ev.finish();
      };
    } else {
      truth = data::coco_truth(data::parse_coco(data::read_maybe_gzip(a.gt), a.gt), a.gt);
      const std::vector<train::CocoDetection> res =
          train::parse_coco_results(data::read_maybe_gzip(a.dets), a.dets);
      dets = train::coco_detections(res, truth, a.dets);
      std::vector<std::string> names;  // the category ids, as the per-class keys
      for (int64_t id : truth.labels.category_ids) names.push_back(std::to_string(id));
      opts = {.metric = train::parse_det_metric(a.metric), .class_names = names};
      j = {{"images", truth.image_ids.size()}, {"detections", res.size()}, {"metric", a.metric}};
      what = std::to_string(truth.image_ids.size()) + " images, " + std::to_string(res.size()) +
             " detections, " + a.metric;
      evaluate = [&] {
        train::DetectionEvaluator ev(opts);
        for (size_t i = 0; i < truth.image_ids.size(); ++i)
          ev.add(truth.image_ids[i], truth.targets[i], dets[i]);
        return ev.finish();
      };
    }
    std::vector<double> ms, cpu_ms;
    train::Metrics m;
    for (int rep = 0; rep < a.repeat; ++rep) {
      const std::clock_t c0 = std::clock();
      const auto t0 = std::chrono::steady_clock::now();
      m = evaluate();
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
      j["median_ms"] = median;
      j["median_cpu_ms"] = median_cpu;
      j["runs_ms"] = ms;
      nlohmann::json stats = nlohmann::json::object();
      for (const auto& [k, v] : m)
        if (k.rfind("ap/", 0) != 0) stats[k] = v;
      j["metrics"] = stats;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "tcv-map-bench: " << what << ": median " << median << " ms (CPU time "
                << median_cpu << " ms) over " << a.repeat << " runs\n";
      for (const auto& [k, v] : m)
        if (k.rfind("ap/", 0) != 0) std::cout << "  " << k << " " << v << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tcv-map-bench: error: " << e.what() << "\n";
    return 1;
  }
}
