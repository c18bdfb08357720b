#include "data/det/coco.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <unordered_map>

#include "data/det/coco_json.h"
#include "data/idx.h"

namespace tcv::data {

namespace fs = std::filesystem;
using nlohmann::json;

using namespace coco_json;

CocoFile parse_coco(const std::string& text, const std::string& name) {
  CocoDocument d = read_coco_document(text, name);
  CocoFile f;
  for_each_annotation(d, name, true, [&](const json& j, const Where& w, const AnnotationHead& h) {
    CocoObject o = annotation_of<CocoObject>(h);
    o.bbox = read_bbox(member(j, "bbox", w), w);
    o.area = read_area(j, o.bbox, w);
    f.annotations.push_back(std::move(o));
  });
  f.images = std::move(d.images);
  f.categories = std::move(d.categories);
  return f;
}

std::string format_coco(const CocoFile& f) {
  json doc = json::object();
  json images = json::array();
  for (const CocoImage& im : f.images)
    images.push_back(
        {{"id", im.id}, {"file_name", im.file_name}, {"width", im.width}, {"height", im.height}});
  std::unordered_map<int64_t, const CocoImage*> image_of;
  for (const CocoImage& im : f.images) image_of[im.id] = &im;
  json anns = json::array();
  for (const CocoObject& o : f.annotations) {
    json a = {{"id", o.id},
              {"image_id", o.image_id},
              {"category_id", o.category_id},
              {"bbox", {o.bbox[0], o.bbox[1], o.bbox[2], o.bbox[3]}},
              {"area", o.area},
              {"iscrowd", o.iscrowd ? 1 : 0}};
    if (!o.rle_counts.empty()) {
      const auto it = image_of.find(o.image_id);
      TCV_CHECK(it != image_of.end(), "[format_coco] annotation ", o.id, " of unknown image ",
                o.image_id);
      a["segmentation"] = {{"counts", o.rle_counts},
                           {"size", {it->second->height, it->second->width}}};
    }
    anns.push_back(std::move(a));
  }
  json cats = json::array();
  for (const CocoCategory& c : f.categories)
    cats.push_back({{"id", c.id}, {"name", c.name}, {"supercategory", c.supercategory}});
  doc["images"] = std::move(images);
  doc["annotations"] = std::move(anns);
  doc["categories"] = std::move(cats);
  return doc.dump();
}

CocoLabels coco_labels(const CocoFile& f, const std::string& file) {
  TCV_CHECK(!f.categories.empty(), file, ": no categories");
  std::vector<const CocoCategory*> cats;
  for (const CocoCategory& c : f.categories) cats.push_back(&c);
  std::sort(cats.begin(), cats.end(), [](auto* a, auto* b) { return a->id < b->id; });
  CocoLabels l;
  for (const CocoCategory* c : cats) {
    l.category_ids.push_back(c->id);
    l.names.push_back(c->name);
  }
  return l;
}

int64_t CocoLabels::label_of(int64_t category_id, const std::string& what) const {
  const auto it = std::lower_bound(category_ids.begin(), category_ids.end(), category_id);
  TCV_CHECK(it != category_ids.end() && *it == category_id, what, ": category id ", category_id,
            " is not among the ", category_ids.size(), " categories of the ground truth");
  return (it - category_ids.begin()) + 1;
}

CocoTruth coco_truth(const CocoFile& f, const std::string& file) {
  CocoTruth t;
  t.labels = coco_labels(f, file);
  std::unordered_map<int64_t, size_t> at;
  for (const CocoImage& im : f.images) {
    at[im.id] = t.image_ids.size();
    t.image_ids.push_back(im.id);
  }
  t.targets.resize(t.image_ids.size());
  for (const CocoObject& o : f.annotations) {
    const auto [x, y, w, h] = o.bbox;
    const std::string what = file + ": annotation id " + std::to_string(o.id);
    t.targets[at.at(o.image_id)].add({x, y, x + w, y + h}, t.labels.label_of(o.category_id, what),
                                     false, o.iscrowd, o.area);
  }
  return t;
}

int64_t CocoTruth::index_of(int64_t image_id) const {
  for (size_t i = 0; i < image_ids.size(); ++i)
    if (image_ids[i] == image_id) return static_cast<int64_t>(i);
  return -1;
}

DetDataset read_coco(const CocoOptions& opts) {
  const std::string& file = opts.annotation_file;
  const CocoFile f = parse_coco(read_maybe_gzip(file), file);
  CocoLabels labels = coco_labels(f, file);
  std::unordered_map<int64_t, std::vector<const CocoObject*>> objects_of;
  for (const CocoObject& o : f.annotations) objects_of[o.image_id].push_back(&o);

  std::vector<DetRecord> records;
  int64_t skipped = 0;
  std::string first_skipped;
  for (const CocoImage& im : f.images) {
    DetRecord r;
    r.image_path = (fs::path(opts.image_dir) / im.file_name).string();
    r.image_id = im.id;
    r.height = im.height;
    r.width = im.width;
    r.source = file + " (image id " + std::to_string(im.id) + ", " + im.file_name + ")";
    bool usable = false;
    try {
      TCV_CHECK(path_exists(r.image_path), r.image_path, ": image file not found (listed in ",
                r.source, ")");
      const auto it = objects_of.find(im.id);
      if (it != objects_of.end())
        for (const CocoObject* o : it->second) {
          const auto [x, y, w, h] = o->bbox;
          // COCO's boxes come from polygons and may overshoot the border by rounding.
          TCV_CHECK(x >= -1 && y >= -1 && x + w <= static_cast<double>(im.width) + 1 &&
                        y + h <= static_cast<double>(im.height) + 1,
                    file, ": annotation id ", o->id, " of image id ", im.id, " (", im.file_name,
                    ") has bbox [", x, ", ", y, ", ", w, ", ", h,
                    "], more than one pixel outside the ", im.width, "x", im.height, " image");
          r.target.add({x, y, x + w, y + h}, labels.label_of(o->category_id, file), false,
                       o->iscrowd, o->area);
          usable = usable || (!o->iscrowd && w > 0 && h > 0);
        }
    } catch (const Error& e) {
      if (opts.on_corrupt == OnCorrupt::error) throw;
      if (skipped++ == 0) first_skipped = e.what();
      continue;
    }
    if (!usable && opts.empty_images == EmptyImages::skip) continue;
    records.push_back(std::move(r));
  }
  return DetDataset(std::move(records), std::move(labels.names), std::move(labels.category_ids),
                    opts.on_corrupt, file, skipped, first_skipped, opts.limits);
}

}  // namespace tcv::data
