// COCO box evaluation of a results file against a ground-truth file, without a
// model: what pycocotools' COCO(gt).loadRes(res) + COCOeval(..., "bbox")
// .evaluate(), .accumulate(), .summarize() print, and the AP per category.
//
//   evaluate_coco instances_val2017.json detections.json [--per-class]
#include <tcv/eval.h>

#include <cstdio>
#include <exception>
#include <string>

using namespace tcv;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: evaluate_coco GT.json RESULTS.json [--per-class]\n");
    return 2;
  }
  const std::string gt_file = argv[1], res_file = argv[2];
  const bool per_class = argc > 3 && std::string(argv[3]) == "--per-class";
  try {
    // Ground truth: categories in increasing id order become labels 1..K.
    const data::CocoTruth truth =
        data::coco_truth(data::parse_coco(data::read_maybe_gzip(gt_file), gt_file), gt_file);
    // Results: [x, y, w, h] boxes become corners, w x h their area, as loadRes does.
    const std::vector<train::ImageDetections> dets = train::coco_detections(
        train::parse_coco_results(data::read_maybe_gzip(res_file), res_file), truth, res_file);

    train::DetectionEvaluator ev(
        {.metric = train::DetMetric::coco, .class_names = truth.labels.names});
    for (size_t i = 0; i < dets.size(); ++i) ev.add(truth.image_ids[i], truth.targets[i], dets[i]);
    const train::CocoSummary s = ev.coco();
    std::fputs(train::format_coco_summary(s.stats).c_str(), stdout);
    if (per_class)
      for (size_t k = 0; k < s.per_class.size(); ++k)
        std::printf("%-24s %0.3f\n", truth.labels.names[k].c_str(), s.per_class[k]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evaluate_coco: %s\n", e.what());
    return 1;
  }
}
