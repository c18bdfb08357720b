// Pictures of label maps for prediction output: a colour per class (Pascal
// VOC's or Cityscapes' colours), blended over the image, written as PNG or
// JPEG; raw label maps as palette PNGs, and Cityscapes label-id PNGs for the
// benchmark's submissions.
#pragma once

#include <string>

#include "data/image.h"
#include "engine/tensor.h"

namespace tcv::data {

/// Cityscapes' colours of its 19 train ids (road (128, 64, 128), ..., bicycle
/// (119, 11, 32)) in entries 0..18; the other entries are black.
const Palette& cityscapes_palette();

/// A label map, u8 or i64 (H, W) with values in [0, 255], as colours u8 (3, H, W):
/// value v gets palette entry v. Other values are an error.
Tensor colorize_labels(const Tensor& labels, const Palette& palette);

/// The label map's colours blended over the image: out = (1 - alpha) image +
/// alpha colour, rounded, where the label is not 255; ignored pixels keep the
/// image. image u8 (3, H, W), labels u8 or i64 (H, W) of the same size, alpha in [0, 1].
Tensor overlay_labels(const Tensor& image, const Tensor& labels, const Palette& palette,
                      double alpha = 0.5);

/// Writes a label map (u8 or i64 (H, W), values in [0, 255]) as an 8-bit palette
/// PNG: the pixels are the labels, shown in `palette`'s colours (what
/// read_label_png reads back).
void write_label_png(const std::string& path, const Tensor& labels,
                     const Palette& palette = voc_palette());

/// Writes Cityscapes train ids (u8 or i64 (H, W), 0..18 or 255) as the 8-bit
/// grayscale *_labelIds.png the benchmark's submissions hold (255 becomes 0).
void write_cityscapes_label_ids(const std::string& path, const Tensor& train_ids);

}  // namespace tcv::data
