// Drawing on u8 images (C, H, W), C = 1 or 3, in place: box outlines and text
// in a built-in 5x7 pixel font, for the pictures tcv-predict writes and
// report.html shows (detections with their labels and scores).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace tcv::data {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

/// The outline of box [x1, y1, x2, y2] (continuous pixel coordinates: pixel
/// column c spans [c, c + 1)), `thickness` pixels wide inside the box, clipped
/// to the image. image: u8 (C, H, W), contiguous; gray images take the colour's
/// luma.
void draw_box(Tensor& image, const std::array<double, 4>& box, Rgb color, int thickness = 2);

/// A segment from (x0, y0) to (x1, y1) (continuous coordinates) `width`
/// pixels wide with round ends: the pixels whose centres lie within width / 2
/// of it, clipped to the image; blended as alpha * color + (1 - alpha) * pixel.
void draw_line(Tensor& image, double x0, double y0, double x1, double y1, Rgb color,
               double width = 2, double alpha = 1);

/// A filled disc: the pixels whose centres lie within `radius` of (x, y).
void draw_disc(Tensor& image, double x, double y, double radius, Rgb color);

/// Text with its top left corner at (x, y): each character a 5x7 glyph (6x9
/// with spacing) scaled by `scale`, on a filled rectangle of `background`,
/// clipped to the image. Printable ASCII; lower-case letters are drawn as
/// capitals, other characters as '?'.
void draw_text(Tensor& image, int64_t x, int64_t y, const std::string& text, Rgb color,
               Rgb background, int scale = 1);

/// The width and height draw_text covers.
std::array<int64_t, 2> text_size(const std::string& text, int scale = 1);

/// A colour for class `label` (Pascal VOC's colour map from 1 on, so that label
/// k gets the colour VOC masks give class k), bright enough to read on.
Rgb class_color(int64_t label);

}  // namespace tcv::data
