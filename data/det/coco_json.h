// The JSON document of a COCO annotation file (instances or person keypoints),
// read with nlohmann-json for data/det/coco.cpp and data/pose/coco.cpp: the
// typed reads whose errors name the file, the entry and the key, and the
// "images" and "categories" both files share. Not part of the installed API
// (no public header includes it).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/det/coco.h"
#include "engine/error.h"

namespace tcv::data {

/// Parses `text`; a syntax error is a tcv::Error naming `name` and the byte,
/// a number beyond a double (nlohmann's out_of_range) names `name` too, and
/// nlohmann's message (which quotes the last token read) is cut to 200 characters.
nlohmann::json parse_coco_json(const std::string& text, const std::string& name);

namespace coco_json {

using nlohmann::json;

/// Where a value sits, for messages "<file>: <at> ...".
struct Where {
  const std::string& file;
  std::string at;
};

/// `v` as JSON for an error message: shallow and short (nesting below 4 levels
/// and text beyond about 100 characters become "...", and nothing recurses
/// deeper than that, whatever the file holds).
std::string shown(const json& v);

/// obj[key]; its absence is an error.
const json& member(const json& obj, const char* key, const Where& w);
/// An integer in int64's range.
int64_t int_value(const json& v, const char* key, const Where& w);
/// A finite number.
double number_value(const json& v, const char* key, const Where& w);
std::string string_value(const json& v, const char* key, const Where& w);
/// int_value / string_value of member(obj, key, w).
int64_t int_member(const json& obj, const char* key, const Where& w);
std::string string_member(const json& obj, const char* key, const Where& w);
/// The top-level array doc[key] of file `file`.
const json& array_member(const json& doc, const char* key, const std::string& file);

/// A COCO file's document with its "images" and "categories" read, each id once.
struct CocoDocument {
  json doc;
  std::vector<CocoImage> images;
  std::vector<CocoCategory> categories;
  /// Index in `images` / `categories` of each id.
  std::unordered_map<int64_t, size_t> image_at, category_at;
};
/// Parses `text` (file `name`) and reads its images and categories: bad JSON,
/// a top level that is not an object, a missing array or key, a mistyped
/// value, a size that is not positive or a repeated id is an error naming
/// the entry.
CocoDocument read_coco_document(const std::string& text, const std::string& name);

/// What every entry of "annotations" holds.
struct AnnotationHead {
  int64_t id = 0, image_id = 0, category_id = 0;
  /// Index of its image in CocoDocument::images.
  size_t image = 0;
  /// "iscrowd" (0 or 1; false when absent).
  bool iscrowd = false;
};
/// Reads object `j` of "annotations": its id (appended to w.at as " (id N)"),
/// an image and a category the file lists, and iscrowd.
AnnotationHead read_annotation_head(const CocoDocument& d, const json& j, Where& w);
/// An annotation of either file kind (CocoObject, CocoPersonAnnotation) with
/// the head's ids and iscrowd.
template <typename Annotation>
Annotation annotation_of(const AnnotationHead& h) {
  Annotation a;
  a.id = h.id;
  a.image_id = h.image_id;
  a.category_id = h.category_id;
  a.iscrowd = h.iscrowd;
  return a;
}

/// "bbox" [x, y, w, h]: four finite numbers, w and h not negative.
std::array<double, 4> read_bbox(const json& bb, const Where& w);
/// Entry j's "area", or bbox's w·h where it has none; finite.
double read_area(const json& j, const std::array<double, 4>& bbox, const Where& w);

/// fn(j, w) for each entry j of the top-level array doc[key] of file `name`,
/// in order, w naming it ("images[3]"); an entry that is not an object is an
/// error.
template <typename F>
void for_each_entry(const json& doc, const char* key, const std::string& name, F&& fn) {
  const json& entries = array_member(doc, key, name);
  for (size_t k = 0; k < entries.size(); ++k) {
    const Where w{name, std::string(key) + "[" + std::to_string(k) + "]"};
    TCV_CHECK(entries[k].is_object(), name, ": ", w.at, " is not an object");
    fn(entries[k], w);
  }
}

/// fn(j, w, head) for each entry of d.doc["annotations"] (for_each_entry, its
/// head read and w naming its id too); nothing when `optional` and the file
/// has no "annotations".
template <typename F>
void for_each_annotation(const CocoDocument& d, const std::string& name, bool optional, F&& fn) {
  if (optional && !d.doc.contains("annotations")) return;
  for_each_entry(d.doc, "annotations", name, [&](const json& j, const Where& entry) {
    Where w = entry;
    const AnnotationHead head = read_annotation_head(d, j, w);
    fn(j, w, head);
  });
}

}  // namespace coco_json
}  // namespace tcv::data
