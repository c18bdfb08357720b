// The JSON document of a COCO annotation file (instances or person keypoints),
// read with nlohmann-json for data/det/coco.cpp and data/pose/coco.cpp: the
// typed reads whose errors name the file, the entry and the key, and the
// "images" and "categories" both files share. Not part of the installed API
// (no public header includes it).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/det/coco.h"

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

/// The "images" and "categories" of a COCO file, each id once.
struct ImagesAndCategories {
  std::vector<CocoImage> images;
  std::vector<CocoCategory> categories;
  /// Index in `images` / `categories` of each id.
  std::unordered_map<int64_t, size_t> image_at, category_at;
};
/// Reads them from `doc` (file `name`): a missing array or key, a mistyped
/// value, a size that is not positive or a repeated id is an error naming the
/// entry.
ImagesAndCategories read_images_and_categories(const json& doc, const std::string& name);

}  // namespace coco_json
}  // namespace tcv::data
