// Pascal VOC detection data: annotation XML files (read and written with
// pugixml) and year roots (VOC2007, VOC2012, or trees in the same layout):
//
//   ROOT/Annotations/<id>.xml   ROOT/JPEGImages/<id>.jpg   ROOT/ImageSets/Main/<split>.txt
#pragma once

#include <string>
#include <vector>

#include "data/det/dataset.h"

namespace tcv::data {

/// One <object> of a VOC annotation. Corners are VOC's: 1-based, inclusive.
struct VocObject {
  std::string name;
  std::string pose = "Unspecified";
  bool truncated = false;
  bool difficult = false;
  double xmin = 0, ymin = 0, xmax = 0, ymax = 0;
};

/// A VOC annotation file.
struct VocAnnotation {
  std::string folder, filename;
  int64_t width = 0, height = 0, depth = 3;
  bool segmented = false;
  std::vector<VocObject> objects;
};

/// Parses annotation XML; `name` (the file) appears in errors. Errors: XML that
/// does not parse (with its line), no <annotation> root, a missing or
/// non-positive <size>, an object without <name> or <bndbox>, a corner or flag
/// that is not a number.
VocAnnotation parse_voc_annotation(const std::string& xml, const std::string& name);

/// The annotation as VOC's XML (what parse_voc_annotation reads back).
std::string format_voc_annotation(const VocAnnotation& a);

/// The 20 Pascal VOC classes, in the devkit's order (label 1 = aeroplane).
const std::vector<std::string>& voc_classes();

/// Class names from a file with one name per line (blank lines ignored).
std::vector<std::string> read_class_names(const std::string& path);

struct VocOptions {
  /// Year roots, read in order (e.g. VOC2007 and VOC2012 for VOC07+12).
  std::vector<std::string> roots{};
  /// The list ImageSets/Main/<split>.txt of every root: train, val, trainval, test.
  std::string split = "trainval";
  /// Label k + 1 is class_names[k]. Empty: the names in ROOT/classes.txt of the
  /// first root when it has one, else the 20 VOC classes.
  std::vector<std::string> class_names{};
  /// A bad annotation or a missing image: an error, or the image left out and counted.
  OnCorrupt on_corrupt = OnCorrupt::error;
  /// Images above limits.max_pixels are refused when loaded.
  ImageLimits limits{};
};

/// Reads the split's annotations from every root. Image ids are the images'
/// positions in the result. Errors (or, with OnCorrupt::skip, images left out
/// and counted in skipped()) name the file: a missing list, annotation or image,
/// bad XML, an unknown class name, a box outside the image or with corners out
/// of order (VOC's corners satisfy 1 <= xmin <= xmax <= width).
DetDataset read_voc(const VocOptions& opts);

}  // namespace tcv::data
