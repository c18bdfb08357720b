#include "data/det/coco_json.h"

#include <cmath>
#include <limits>

#include "engine/error.h"

namespace tcv::data {

using nlohmann::json;

json parse_coco_json(const std::string& text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann's message quotes the token it read last, which may be megabytes long.
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    TCV_THROW(name, ": bad JSON at byte ", e.byte, ": ", what);
  } catch (const json::exception& e) {
    // A number beyond a double ("1e+408") is nlohmann's out_of_range, not a parse_error.
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    TCV_THROW(name, ": bad JSON: ", what);
  }
}

namespace coco_json {

namespace {

// `v` as JSON for an error message: shallow and short. nlohmann's dump()
// recurses once per level, so a value nested a million deep (a 2 MB file)
// would overflow the stack; here nesting below 4 levels and text beyond
// about 100 characters become "...".
void show(const json& v, int depth, std::string& out) {
  if (out.size() > 100) return;
  if (!v.is_structured()) {
    // ASCII (\uXXXX escapes), so that cutting it splits no character.
    const std::string t = v.dump(-1, ' ', true, json::error_handler_t::replace);
    out += t.size() > 100 ? t.substr(0, 100) + "..." : t;
    return;
  }
  const bool obj = v.is_object();
  out += obj ? '{' : '[';
  if (depth >= 4 && !v.empty()) out += "...";
  if (depth < 4) {
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ',';
      first = false;
      if (out.size() > 100) {
        out += "...";
        break;
      }
      if (obj) {
        show(json(it.key()), depth + 1, out);
        out += ':';
      }
      show(*it, depth + 1, out);
    }
  }
  out += obj ? '}' : ']';
}

}  // namespace

std::string shown(const json& v) {
  std::string out;
  show(v, 0, out);
  return out;
}

const json& member(const json& obj, const char* key, const Where& w) {
  const auto it = obj.find(key);
  TCV_CHECK(it != obj.end(), w.file, ": ", w.at, " has no \"", key, "\"");
  return *it;
}

int64_t int_value(const json& v, const char* key, const Where& w) {
  TCV_CHECK(v.is_number_integer(), w.file, ": ", w.at, " \"", key, "\" must be an integer, got ",
            shown(v));
  // Integers above int64's range (nlohmann's unsigned) would wrap.
  TCV_CHECK(
      !v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()},
      w.file, ": ", w.at, " \"", key, "\" is ", v.get<uint64_t>(),
      ", above the largest integer tcv reads (2^63 - 1)");
  return v.get<int64_t>();
}

double number_value(const json& v, const char* key, const Where& w) {
  TCV_CHECK(v.is_number() && std::isfinite(v.get<double>()), w.file, ": ", w.at, " \"", key,
            "\" must be a finite number, got ", shown(v));
  return v.get<double>();
}

std::string string_value(const json& v, const char* key, const Where& w) {
  TCV_CHECK(v.is_string(), w.file, ": ", w.at, " \"", key, "\" must be a string, got ", shown(v));
  return v.get<std::string>();
}

int64_t int_member(const json& obj, const char* key, const Where& w) {
  return int_value(member(obj, key, w), key, w);
}

std::string string_member(const json& obj, const char* key, const Where& w) {
  return string_value(member(obj, key, w), key, w);
}

const json& array_member(const json& doc, const char* key, const std::string& file) {
  const json& v = member(doc, key, {file, "the file"});
  TCV_CHECK(v.is_array(), file, ": \"", key, "\" must be an array");
  return v;
}

CocoDocument read_coco_document(const std::string& text, const std::string& name) {
  CocoDocument d;
  d.doc = parse_coco_json(text, name);
  TCV_CHECK(d.doc.is_object(), name, ": expected a JSON object at the top level");
  for_each_entry(d.doc, "images", name, [&](const json& j, const Where& w) {
    CocoImage im;
    im.id = int_member(j, "id", w);
    im.file_name = string_member(j, "file_name", w);
    im.width = int_member(j, "width", w);
    im.height = int_member(j, "height", w);
    TCV_CHECK(im.width > 0 && im.height > 0, name, ": ", w.at, " (", im.file_name, ") size ",
              im.width, "x", im.height, " is not positive");
    TCV_CHECK(d.image_at.emplace(im.id, d.images.size()).second, name, ": ", w.at,
              " repeats image id ", im.id);
    d.images.push_back(std::move(im));
  });
  for_each_entry(d.doc, "categories", name, [&](const json& j, const Where& w) {
    CocoCategory c;
    c.id = int_member(j, "id", w);
    c.name = string_member(j, "name", w);
    if (j.contains("supercategory") && j["supercategory"].is_string())
      c.supercategory = j["supercategory"].get<std::string>();
    TCV_CHECK(d.category_at.emplace(c.id, d.categories.size()).second, name, ": ", w.at,
              " repeats category id ", c.id);
    d.categories.push_back(std::move(c));
  });
  return d;
}

AnnotationHead read_annotation_head(const CocoDocument& d, const json& j, Where& w) {
  AnnotationHead h;
  h.id = int_member(j, "id", w);
  w.at += " (id " + std::to_string(h.id) + ")";
  h.image_id = int_member(j, "image_id", w);
  h.category_id = int_member(j, "category_id", w);
  const auto img = d.image_at.find(h.image_id);
  TCV_CHECK(img != d.image_at.end(), w.file, ": ", w.at, " refers to image id ", h.image_id,
            ", which \"images\" does not list");
  TCV_CHECK(d.category_at.count(h.category_id), w.file, ": ", w.at, " has category_id ",
            h.category_id, ", which \"categories\" does not list");
  h.image = img->second;
  if (j.contains("iscrowd")) {
    const int64_t c = int_member(j, "iscrowd", w);
    TCV_CHECK(c == 0 || c == 1, w.file, ": ", w.at, " \"iscrowd\" is ", c, ", expected 0 or 1");
    h.iscrowd = c == 1;
  }
  return h;
}

std::array<double, 4> read_bbox(const json& bb, const Where& w) {
  TCV_CHECK(bb.is_array() && bb.size() == 4, w.file, ": ", w.at,
            " \"bbox\" must be [x, y, w, h], got ", shown(bb));
  std::array<double, 4> b{};
  for (size_t c = 0; c < 4; ++c) b[c] = number_value(bb[c], "bbox", w);
  TCV_CHECK(b[2] >= 0 && b[3] >= 0, w.file, ": ", w.at, " \"bbox\" ", shown(bb),
            " has a negative width or height");
  return b;
}

double read_area(const json& j, const std::array<double, 4>& bbox, const Where& w) {
  const double area = j.contains("area") ? number_value(j["area"], "area", w) : bbox[2] * bbox[3];
  // w x h of two finite numbers may still overflow (1e200 x 1e200).
  TCV_CHECK(std::isfinite(area), w.file, ": ", w.at, " \"bbox\" [", bbox[0], ", ", bbox[1], ", ",
            bbox[2], ", ", bbox[3], "] has no finite area (w x h overflows)");
  return area;
}

}  // namespace coco_json
}  // namespace tcv::data
