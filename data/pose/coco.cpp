#include "data/pose/coco.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include "data/det/coco_json.h"
#include "data/idx.h"

namespace tcv::data {

namespace fs = std::filesystem;
using nlohmann::json;

using namespace coco_json;

namespace {

Segmentation parse_segmentation(const json& j, int64_t img_h, int64_t img_w, const Where& w) {
  Segmentation s;
  if (j.is_array()) {
    for (size_t p = 0; p < j.size(); ++p) {
      const json& poly = j[p];
      TCV_CHECK(poly.is_array() && poly.size() >= 6 && poly.size() % 2 == 0, w.file, ": ", w.at,
                " \"segmentation\"[", p,
                "] must be a polygon: an even number (at least 6) of coordinates, got ",
                shown(poly));
      std::vector<double> xy(poly.size());
      for (size_t k = 0; k < poly.size(); ++k) xy[k] = number_value(poly[k], "segmentation", w);
      s.polygons.push_back(std::move(xy));
    }
    return s;
  }
  TCV_CHECK(j.is_object(), w.file, ": ", w.at,
            " \"segmentation\" must be a list of polygons or {\"counts\", \"size\"}, got ",
            shown(j));
  const json& size = member(j, "size", {w.file, w.at + " \"segmentation\""});
  TCV_CHECK(size.is_array() && size.size() == 2 && size[0].is_number_integer() &&
                size[1].is_number_integer(),
            w.file, ": ", w.at, " \"segmentation\" \"size\" must be [height, width], got ",
            shown(size));
  s.rle_height = size[0].get<int64_t>();
  s.rle_width = size[1].get<int64_t>();
  TCV_CHECK(s.rle_height == img_h && s.rle_width == img_w, w.file, ": ", w.at,
            " \"segmentation\" \"size\" ", shown(size), " differs from its image's [", img_h, ", ",
            img_w, "]");
  const std::string what = w.file + ": " + w.at + " \"segmentation\"";
  const int64_t pixels = mask_pixels(s.rle_height, s.rle_width, what);
  const json& counts = member(j, "counts", {w.file, w.at + " \"segmentation\""});
  if (counts.is_string()) {
    s.rle = decode_coco_rle(counts.get<std::string>(), what);
  } else {
    TCV_CHECK(counts.is_array(), what, " \"counts\" must be a list of run lengths or a string");
    s.rle.reserve(counts.size());
    for (const json& c : counts) {
      const bool run = c.is_number_unsigned() || (c.is_number_integer() && c.get<int64_t>() >= 0);
      TCV_CHECK(run, what, " \"counts\" holds ", shown(c), ", not a run length");
      TCV_CHECK(!c.is_number_unsigned() ||
                    c.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()},
                what, " \"counts\" holds ", shown(c), ", more than the mask's ", pixels, " pixels");
      s.rle.push_back(c.get<int64_t>());
    }
  }
  // Runs from a file may sum past int64 and wrap around to the mask's size:
  // total <= pixels throughout, so pixels - total cannot overflow.
  int64_t total = 0;
  for (size_t k = 0; k < s.rle.size(); ++k) {
    TCV_CHECK(s.rle[k] <= pixels - total, what, " runs cover more than the mask's ", pixels,
              " pixels (", s.rle_height, "x", s.rle_width, "; run ", k, " is ", s.rle[k], ", ",
              pixels - total, " pixels were left)");
    total += s.rle[k];
  }
  TCV_CHECK(total == pixels, what, " runs cover ", total, " pixels, the mask has ", pixels);
  return s;
}

json segmentation_json(const Segmentation& s) {
  if (!s.rle.empty()) return {{"counts", s.rle}, {"size", {s.rle_height, s.rle_width}}};
  json polys = json::array();
  for (const auto& p : s.polygons) polys.push_back(p);
  return polys;
}

}  // namespace

CocoKeypointFile parse_coco_keypoints(const std::string& text, const std::string& name) {
  CocoDocument d = read_coco_document(text, name);
  CocoKeypointFile f;
  for_each_annotation(d, name, false, [&](const json& j, const Where& w, const AnnotationHead& h) {
    CocoPersonAnnotation a = annotation_of<CocoPersonAnnotation>(h);
    const CocoImage& im = d.images[h.image];
    if (j.contains("keypoints") || !a.iscrowd) {
      const json& kp = member(j, "keypoints", w);
      TCV_CHECK(kp.is_array() && kp.size() == 3 * kCocoKeypoints, name, ": ", w.at,
                " \"keypoints\" must be 17 (x, y, v) triples (51 numbers), got ",
                kp.is_array() ? std::to_string(kp.size()) + " values" : shown(kp));
      for (size_t p = 0; p < static_cast<size_t>(kCocoKeypoints); ++p) {
        Keypoint& q = a.keypoints[p];
        const double v = number_value(kp[3 * p + 2], "keypoints", w);
        TCV_CHECK(v == 0 || v == 1 || v == 2, name, ": ", w.at, " \"keypoints\" visibility of ",
                  coco_keypoint_names()[p], " is ", shown(kp[3 * p + 2]), ", expected 0, 1 or 2");
        q.v = static_cast<int>(v);
        q.x = number_value(kp[3 * p], "keypoints", w) + 0.5;
        q.y = number_value(kp[3 * p + 1], "keypoints", w) + 0.5;
        if (!q.labelled()) q.x = q.y = 0;
        a.num_keypoints += q.labelled();
      }
    }
    if (j.contains("num_keypoints")) {
      const int64_t n = int_value(j["num_keypoints"], "num_keypoints", w);
      TCV_CHECK(n == a.num_keypoints, name, ": ", w.at, " \"num_keypoints\" is ", n, " but ",
                a.num_keypoints, " keypoints are labelled");
    }
    if (j.contains("bbox")) {
      a.bbox = read_bbox(j["bbox"], w);
    } else {
      const Box b = keypoint_box(a.keypoints);
      a.bbox = {b[0], b[1], b[2] - b[0], b[3] - b[1]};
    }
    a.area = read_area(j, a.bbox, w);
    if (j.contains("segmentation"))
      a.segmentation = parse_segmentation(j["segmentation"], im.height, im.width, w);
    f.annotations.push_back(std::move(a));
  });
  f.images = std::move(d.images);
  f.categories = std::move(d.categories);
  return f;
}

std::string format_coco_keypoints(const CocoKeypointFile& f) {
  json images = json::array();
  for (const CocoImage& im : f.images)
    images.push_back(
        {{"id", im.id}, {"file_name", im.file_name}, {"width", im.width}, {"height", im.height}});
  json anns = json::array();
  for (const CocoPersonAnnotation& a : f.annotations) {
    json kp = json::array();
    for (const Keypoint& q : a.keypoints) {
      kp.push_back(q.labelled() ? q.x - 0.5 : 0.0);
      kp.push_back(q.labelled() ? q.y - 0.5 : 0.0);
      kp.push_back(q.v);
    }
    json e = {{"id", a.id},
              {"image_id", a.image_id},
              {"category_id", a.category_id},
              {"bbox", {a.bbox[0], a.bbox[1], a.bbox[2], a.bbox[3]}},
              {"area", a.area},
              {"iscrowd", a.iscrowd ? 1 : 0},
              {"num_keypoints", a.num_keypoints},
              {"keypoints", std::move(kp)}};
    if (!a.segmentation.empty()) e["segmentation"] = segmentation_json(a.segmentation);
    anns.push_back(std::move(e));
  }
  json cats = json::array();
  for (const CocoCategory& c : f.categories) {
    json e = {{"id", c.id}, {"name", c.name}, {"supercategory", c.supercategory}};
    if (c.name == "person") {
      e["keypoints"] = coco_keypoint_names();
      e["skeleton"] = coco_skeleton();
    }
    cats.push_back(std::move(e));
  }
  json doc = json::object();
  doc["images"] = std::move(images);
  doc["annotations"] = std::move(anns);
  doc["categories"] = std::move(cats);
  return doc.dump();
}

PoseRecord pose_record(const CocoImage& im, const std::vector<const CocoPersonAnnotation*>& anns,
                       const PoseSelection& sel) {
  PoseRecord r;
  r.image_id = im.id;
  r.height = im.height;
  r.width = im.width;
  // Centres and longer sides of the people trained on so far.
  std::vector<std::array<double, 3>> centres;
  for (const CocoPersonAnnotation* a : anns) {
    if (a->iscrowd) {
      r.crowds.push_back(a->segmentation);
      continue;
    }
    const auto [x, y, w, h] = a->bbox;
    const double cx = x + w / 2.0, cy = y + h / 2.0;
    bool keep = a->num_keypoints >= sel.min_keypoints && a->area >= sel.min_area;
    for (size_t k = 0; k < centres.size() && keep; ++k)
      keep = std::hypot(cx - centres[k][0], cy - centres[k][1]) >=
             centres[k][2] * sel.min_centre_distance;
    if (!keep) {
      Segmentation s = a->segmentation;
      if (s.empty()) s.polygons.push_back({x, y, x + w, y, x + w, y + h, x, y + h});
      r.ignored.push_back(std::move(s));
      continue;
    }
    centres.push_back({cx, cy, std::max(w, h)});
    PosePerson p;
    p.keypoints = a->keypoints;
    p.box = {x, y, x + w, y + h};
    p.area = a->area;
    p.segmentation = a->segmentation;
    r.people.push_back(std::move(p));
  }
  return r;
}

PoseDataset read_coco_keypoints(const PoseCocoOptions& opts) {
  const std::string& file = opts.annotation_file;
  const CocoKeypointFile f = parse_coco_keypoints(read_maybe_gzip(file), file);
  std::unordered_map<int64_t, std::vector<const CocoPersonAnnotation*>> anns_of;
  for (const CocoPersonAnnotation& a : f.annotations) anns_of[a.image_id].push_back(&a);
  static const std::vector<const CocoPersonAnnotation*> none;
  std::vector<PoseRecord> records;
  int64_t skipped = 0;
  std::string first_skipped;
  for (const CocoImage& im : f.images) {
    const auto it = anns_of.find(im.id);
    const std::vector<const CocoPersonAnnotation*>& anns = it == anns_of.end() ? none : it->second;
    PoseRecord r = pose_record(im, anns, opts.selection);
    r.image_path = (fs::path(opts.image_dir) / im.file_name).string();
    r.source = file + " (image id " + std::to_string(im.id) + ", " + im.file_name + ")";
    try {
      TCV_CHECK(path_exists(r.image_path), r.image_path, ": image file not found (listed in ",
                r.source, ")");
      const auto W = static_cast<double>(im.width), H = static_cast<double>(im.height);
      // As read_coco (detection) checks them: the crop and scale of training
      // follow a person's box, which must lie on the image.
      for (const CocoPersonAnnotation* a : anns) {
        const auto [x, y, w, h] = a->bbox;
        TCV_CHECK(x >= -1 && y >= -1 && x + w <= W + 1 && y + h <= H + 1, file, ": annotation id ",
                  a->id, " of image id ", im.id, " (", im.file_name, ") has bbox [", x, ", ", y,
                  ", ", w, ", ", h, "], more than one pixel outside the ", im.width, "x", im.height,
                  " image");
      }
      for (const PosePerson& p : r.people)
        for (size_t k = 0; k < p.keypoints.size(); ++k) {
          const Keypoint& q = p.keypoints[k];
          TCV_CHECK(!q.labelled() || (q.x >= -1 && q.y >= -1 && q.x <= W + 1 && q.y <= H + 1),
                    r.source, ": keypoint ", coco_keypoint_names()[k], " at (", q.x - 0.5, ", ",
                    q.y - 0.5, ") lies more than one pixel outside the ", im.width, "x", im.height,
                    " image");
        }
    } catch (const Error& e) {
      if (opts.on_corrupt == OnCorrupt::error) throw;
      if (skipped++ == 0) first_skipped = e.what();
      continue;
    }
    if (r.people.empty() && opts.empty_images == EmptyImages::skip) continue;
    records.push_back(std::move(r));
  }
  return PoseDataset(std::move(records), opts.on_corrupt, file, skipped, first_skipped,
                     opts.limits);
}

}  // namespace tcv::data
