#include "train/eval/coco_results.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "engine/json.h"

namespace tcv::train {

namespace {

// The entries of a results file: a JSON list, each parsed by `one` (errors
// name the file and the entry).
template <typename T, typename F>
std::vector<T> parse_results_list(const std::string& json, const std::string& name, F one) {
  Json doc;
  try {
    doc = json_parse(json);
  } catch (const Error& e) {
    TCV_THROW(name, ": ", e.what());
  }
  TCV_CHECK(doc.is_array(), name, ": a COCO results file is a JSON list of results, got ",
            doc.type_name());
  std::vector<T> out;
  out.reserve(doc.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    try {
      out.push_back(one(doc[i]));
    } catch (const Error& err) {
      TCV_THROW(name, ": detection ", i, ": ", err.what());
    }
  }
  return out;
}

// A result with its "image_id", "category_id" and a finite "score" read.
template <typename R>
R with_id_and_score(const Json& e) {
  R r;
  r.image_id = json_int(e, "image_id");
  r.category_id = json_int(e, "category_id");
  r.score = json_double(e, "score");
  TCV_CHECK(std::isfinite(r.score), "score is ", r.score);
  return r;
}

}  // namespace

std::vector<CocoDetection> parse_coco_results(const std::string& json, const std::string& name) {
  return parse_results_list<CocoDetection>(json, name, [](const Json& e) {
    CocoDetection d = with_id_and_score<CocoDetection>(e);
    const Json& b = json_at(e, "bbox");
    TCV_CHECK(b.is_array() && b.size() == 4, "\"bbox\" must be [x, y, w, h]");
    for (size_t k = 0; k < 4; ++k) {
      TCV_CHECK(b[k].is_number(), "\"bbox\" must hold four numbers");
      d.bbox[k] = b[k].get<double>();
      TCV_CHECK(std::isfinite(d.bbox[k]), "\"bbox\" holds ", d.bbox[k]);
    }
    TCV_CHECK(d.bbox[2] >= 0 && d.bbox[3] >= 0, "\"bbox\" has a negative size [", d.bbox[0], ", ",
              d.bbox[1], ", ", d.bbox[2], ", ", d.bbox[3], "]");
    return d;
  });
}

std::vector<CocoKeypointResult> parse_coco_keypoint_results(const std::string& json,
                                                            const std::string& name,
                                                            int64_t num_keypoints) {
  return parse_results_list<CocoKeypointResult>(json, name, [&](const Json& e) {
    CocoKeypointResult r = with_id_and_score<CocoKeypointResult>(e);
    const Json& k = json_at(e, "keypoints");
    TCV_CHECK(k.is_array() && static_cast<int64_t>(k.size()) == 3 * num_keypoints,
              "\"keypoints\" must hold ", 3 * num_keypoints, " numbers (x, y, v per keypoint)");
    for (const Json& v : k) {
      TCV_CHECK(v.is_number(), "\"keypoints\" must hold numbers");
      r.keypoints.push_back(v.get<double>());
      TCV_CHECK(std::isfinite(r.keypoints.back()), "\"keypoints\" holds ", r.keypoints.back());
    }
    return r;
  });
}

std::vector<ImageDetections> coco_detections(const std::vector<CocoDetection>& results,
                                             const data::CocoTruth& truth,
                                             const std::string& name) {
  std::unordered_map<int64_t, size_t> at;
  for (size_t i = 0; i < truth.image_ids.size(); ++i) at[truth.image_ids[i]] = i;
  std::vector<ImageDetections> out(truth.image_ids.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const CocoDetection& r = results[i];
    const std::string what = name + ": detection " + std::to_string(i);
    const auto it = at.find(r.image_id);
    TCV_CHECK(it != at.end(), what, ": image id ", r.image_id, " is not among the ground truth's ",
              truth.image_ids.size(), " images");
    ImageDetections& d = out[it->second];
    const auto [x, y, w, h] = r.bbox;
    d.boxes.push_back({x, y, x + w, y + h});
    d.areas.push_back(w * h);
    d.scores.push_back(r.score);
    d.labels.push_back(truth.labels.label_of(r.category_id, what));
  }
  return out;
}

std::string format_coco_results(const std::vector<std::pair<int64_t, ImageDetections>>& detections,
                                const std::vector<int64_t>& category_ids) {
  Json out = Json::array();
  for (const auto& [id, d] : detections)
    for (size_t k = 0; k < d.boxes.size(); ++k) {
      const int64_t label = d.labels[k];
      TCV_CHECK(label >= 1 && label <= static_cast<int64_t>(category_ids.size()),
                "[format_coco_results] label ", label, " of image ", id, " has no category id (",
                category_ids.size(), " given)");
      const data::Box& b = d.boxes[k];
      out.push_back({{"image_id", id},
                     {"category_id", category_ids[static_cast<size_t>(label - 1)]},
                     {"bbox", {b[0], b[1], b[2] - b[0], b[3] - b[1]}},
                     {"score", d.scores[k]}});
    }
  return json_dump(out);
}

std::string format_coco_keypoint_results(
    const std::vector<std::pair<int64_t, std::vector<KeypointDetection>>>& people) {
  Json out = Json::array();
  for (const auto& [id, ps] : people)
    for (const KeypointDetection& p : ps)
      out.push_back(
          {{"image_id", id}, {"category_id", 1}, {"keypoints", p.keypoints}, {"score", p.score}});
  return json_dump(out);
}

std::string format_coco_summary(const std::vector<double>& stats) {
  TCV_CHECK(stats.size() == 12, "[format_coco_summary] expects COCOeval's 12 stats, got ",
            stats.size());
  struct Line {
    bool ap;
    const char* iou;
    const char* area;
    int max_dets;
  };
  static constexpr Line kLines[12] = {
      {true, "0.50:0.95", "all", 100},     {true, "0.50", "all", 100},
      {true, "0.75", "all", 100},          {true, "0.50:0.95", "small", 100},
      {true, "0.50:0.95", "medium", 100},  {true, "0.50:0.95", "large", 100},
      {false, "0.50:0.95", "all", 1},      {false, "0.50:0.95", "all", 10},
      {false, "0.50:0.95", "all", 100},    {false, "0.50:0.95", "small", 100},
      {false, "0.50:0.95", "medium", 100}, {false, "0.50:0.95", "large", 100},
  };
  std::string out;
  char line[128];
  for (int i = 0; i < 12; ++i) {
    const Line& l = kLines[i];
    // pycocotools: ' {:<18} {} @[ IoU={:<9} | area={:>6s} | maxDets={:>3d} ] = {:0.3f}'
    std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  l.ap ? "Average Precision" : "Average Recall", l.ap ? "(AP)" : "(AR)", l.iou,
                  l.area, l.max_dets, stats[static_cast<size_t>(i)]);
    out += line;
  }
  return out;
}

}  // namespace tcv::train
