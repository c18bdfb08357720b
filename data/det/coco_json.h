// The JSON document of a COCO annotation file (instances or person keypoints),
// read with nlohmann-json for data/det/coco.cpp and data/pose/coco.cpp. Not
// part of the installed API (no public header includes it).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tcv::data {

/// Parses `text`; a syntax error is a tcv::Error naming `name` and the byte,
/// a number beyond a double (nlohmann's out_of_range) names `name` too, and
/// nlohmann's message (which quotes the last token read) is cut to 200 characters.
nlohmann::json parse_coco_json(const std::string& text, const std::string& name);

}  // namespace tcv::data
