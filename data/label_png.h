// Label maps stored as PNGs: each pixel holds a class index (a palette index
// in Pascal VOC's SegmentationClass files, a grey value in Cityscapes'
// *_labelIds.png, ADE20K's annotations and SBD's SegmentationClassAug).
// stb_image expands palette PNGs to their colours, so label maps are read here
// with libspng, which gives the indices themselves.
#pragma once

#include <string>

#include "data/image.h"
#include "engine/tensor.h"

namespace tcv::data {

/// How the label values were stored.
enum class LabelPngKind {
  palette,  ///< colour type 3: the values are palette indices
  gray,     ///< colour type 0: the values are the grey samples (not rescaled)
};

/// A decoded label map and how it was stored.
struct LabelPng {
  Tensor labels;  ///< u8 (H, W)
  LabelPngKind kind = LabelPngKind::gray;
  int bit_depth = 8;  ///< 1, 2, 4, 8 (or 16 for grey)
};

/// Decodes a PNG label map held in memory: palette PNGs (1, 2, 4 or 8 bits) give
/// their indices, grayscale PNGs (1 to 16 bits) their samples as they are (a
/// 1-bit PNG gives 0 and 1, not 0 and 255). Interlaced files are de-interlaced.
/// Errors, each naming `name`: not a PNG, a truncated or corrupt file (bad
/// CRC, bad deflate stream), a colour PNG (RGB, RGBA, grey + alpha: a label map
/// holds indices, not colours), a 16-bit value above 255, and a header that
/// announces more than limits.max_pixels pixels (before anything is decoded).
LabelPng decode_label_png(const std::string& bytes, const std::string& name,
                          const ImageLimits& limits = {});

/// Reads and decodes a label PNG file (see decode_label_png); a missing or
/// unreadable file is an error naming it.
LabelPng read_label_png(const std::string& path, const ImageLimits& limits = {});

}  // namespace tcv::data
