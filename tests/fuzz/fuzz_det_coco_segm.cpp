// COCO instances files on the detection path, seeded with what real files
// carry beside the boxes: segmentations (polygons, crowd RLE, compressed RLE),
// iscrowd and area. read_coco (images found in a directory of empty files,
// data.skip_corrupt's skip) gives a data set or a tcv::Error; its boxes lie on
// their images; and COCO's and VOC's evaluation of those boxes, crowd regions
// and areas against detections on the same boxes gives metrics in [0, 1] (-1
// without ground truth; up to rounding), never NaN. (Detection keeps a
// segmentation's box, crowd flag and area; it does not decode the mask:
// fuzz_coco_rle and fuzz_pose_keypoints do.)
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/det/coco.h"
#include "fuzz_support.h"
#include "train/eval/det_map.h"

namespace {

namespace fs = std::filesystem;
using namespace tcv;

const std::string& image_dir() {
  static const std::string dir =
      tcv::fuzz::empty_image_dir({"a.jpg", "b.jpg", "c.jpg", "000000397133.jpg"});
  return dir;
}

// A metric in [0, 1] up to rounding (VOC07's mean of 11 points may end an ulp
// above 1), or -1 (no ground truth).
void expect_metric(double v) {
  TCV_FUZZ_EXPECT(v == -1.0 || (v >= 0.0 && v <= 1.0 + 1e-12));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string text(reinterpret_cast<const char*>(bytes), size);
  data::CocoOptions o{.annotation_file = fuzz::write_input(text, ".json"),
                      .image_dir = image_dir()};
  o.on_corrupt = data::OnCorrupt::skip;
  std::unique_ptr<data::DetDataset> ds;
  try {
    ds = std::make_unique<data::DetDataset>(data::read_coco(o));
  } catch (const Error&) {
    return 0;
  }
  const std::vector<std::string>& names = ds->class_names();
  TCV_FUZZ_EXPECT(!names.empty());
  for (const data::DetRecord& r : ds->records()) {
    const auto W = static_cast<double>(r.width), H = static_cast<double>(r.height);
    const data::DetTarget& t = r.target;
    TCV_FUZZ_EXPECT(t.labels.size() == t.boxes.size() && t.area.size() == t.boxes.size());
    for (size_t k = 0; k < t.boxes.size(); ++k) {
      const data::Box& b = t.boxes[k];
      TCV_FUZZ_EXPECT(b[0] >= -1 && b[1] >= -1 && b[2] <= W + 1 && b[3] <= H + 1 && b[0] <= b[2] &&
                      b[1] <= b[3]);
      TCV_FUZZ_EXPECT(t.labels[k] >= 1 && t.labels[k] <= static_cast<int64_t>(names.size()));
    }
  }
  for (const train::DetMetric m : {train::DetMetric::voc07, train::DetMetric::coco}) {
    train::DetectionEvaluator ev({.metric = m, .class_names = names});
    for (const data::DetRecord& r : ds->records()) {
      train::ImageDetections d;
      const data::DetTarget& t = r.target;
      for (size_t k = 0; k < t.boxes.size(); ++k) {
        d.boxes.push_back(t.boxes[k]);
        d.scores.push_back(1.0 / static_cast<double>(k + 1));
        d.labels.push_back(t.labels[k]);
      }
      ev.add(r.image_id, t, d);
    }
    for (const auto& [name, v] : ev.finish()) expect_metric(v);
    if (m == train::DetMetric::coco)
      for (double v : ev.coco().stats) expect_metric(v);
  }
  return 0;
}
