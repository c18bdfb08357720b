#include "data/det/dataset.h"

#include "data/image.h"

namespace tcv::data {

void DetTarget::add(const Box& box, int64_t label, bool is_difficult, bool is_crowd,
                    double object_area) {
  boxes.push_back(box);
  labels.push_back(label);
  difficult.push_back(is_difficult ? 1 : 0);
  iscrowd.push_back(is_crowd ? 1 : 0);
  area.push_back(object_area >= 0 ? object_area : (box[2] - box[0]) * (box[3] - box[1]));
}

void DetTarget::filter(const std::vector<uint8_t>& keep) {
  TCV_CHECK(keep.size() == boxes.size(), "[DetTarget::filter] ", keep.size(), " flags for ",
            boxes.size(), " objects");
  size_t o = 0;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (!keep[i]) continue;
    boxes[o] = boxes[i];
    labels[o] = labels[i];
    difficult[o] = difficult[i];
    iscrowd[o] = iscrowd[i];
    area[o] = area[i];
    ++o;
  }
  boxes.resize(o);
  labels.resize(o);
  difficult.resize(o);
  iscrowd.resize(o);
  area.resize(o);
}

DetDataset::DetDataset(std::vector<DetRecord> records, std::vector<std::string> class_names,
                       std::vector<int64_t> label_ids, OnCorrupt on_corrupt, std::string name,
                       int64_t skipped_at_load, std::string first_skipped, ImageLimits limits)
    : RecordSet(std::move(records), std::move(name), on_corrupt, limits, skipped_at_load,
                std::move(first_skipped)),
      class_names_(std::move(class_names)),
      label_ids_(std::move(label_ids)) {
  TCV_CHECK(!class_names_.empty(), name_, ": no object classes");
  TCV_CHECK(label_ids_.empty() || label_ids_.size() == class_names_.size(), name_, ": ",
            label_ids_.size(), " label ids for ", class_names_.size(), " classes");
  const auto K = static_cast<int64_t>(class_names_.size());
  for (const DetRecord& r : records_) {
    const DetTarget& t = r.target;
    const size_t n = t.boxes.size();
    TCV_CHECK(t.labels.size() == n && t.difficult.size() == n && t.iscrowd.size() == n &&
                  t.area.size() == n,
              r.source, ": the target's boxes, labels and flags differ in length");
    for (int64_t l : t.labels)
      TCV_CHECK(l >= 1 && l <= K, r.source, ": label ", l, " outside [1, ", K, "]");
  }
}

DetSample DetDataset::load(int64_t i) const {
  return annotated_sample<DetSample>(i, [&](const DetRecord& r, DetSample& s) {
    s.target = r.target;
    s.image = annotated_image(r);
  });
}

DetDataset DetDataset::head(int64_t n) const {
  return DetDataset(first_records(n), class_names_, label_ids_, on_corrupt_, name_, 0, "", limits_);
}

}  // namespace tcv::data
