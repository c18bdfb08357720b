#include "data/seg/colorize.h"

#include <algorithm>
#include <cmath>

#include "data/seg/dataset.h"

namespace tcv::data {

namespace {

// Labels as u8 (H, W), checked to lie in [0, 255].
Tensor labels_u8(const Tensor& labels, const char* op) {
  TCV_CHECK(labels.defined() && labels.dim() == 2 &&
                (labels.dtype() == DType::u8 || labels.dtype() == DType::i64),
            "[", op, "] expects a u8 or i64 (H, W) label map, got ",
            labels.defined() ? dtype_name(labels.dtype()) : "undefined", " ",
            labels.defined() ? labels.shape_str() : "");
  if (labels.dtype() == DType::u8) return labels.contiguous();
  const Tensor l = labels.contiguous();
  Tensor out = empty(l.shape(), {.dtype = DType::u8});
  const int64_t* s = l.data<int64_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t k = 0; k < l.numel(); ++k) {
    TCV_CHECK(s[k] >= 0 && s[k] <= 255, "[", op, "] label ", s[k], " at (row ", k / l.size(1),
              ", column ", k % l.size(1), ") is outside [0, 255]");
    d[k] = static_cast<uint8_t>(s[k]);
  }
  return out;
}

}  // namespace

const Palette& cityscapes_palette() {
  static const Palette p = [] {
    static const uint8_t colours[19][3] = {
        {128, 64, 128},  {244, 35, 232}, {70, 70, 70},  {102, 102, 156}, {190, 153, 153},
        {153, 153, 153}, {250, 170, 30}, {220, 220, 0}, {107, 142, 35},  {152, 251, 152},
        {70, 130, 180},  {220, 20, 60},  {255, 0, 0},   {0, 0, 142},     {0, 0, 70},
        {0, 60, 100},    {0, 80, 100},   {0, 0, 230},   {119, 11, 32}};
    Palette q{};
    for (size_t t = 0; t < 19; ++t)
      for (size_t c = 0; c < 3; ++c) q[3 * t + c] = colours[t][c];
    return q;
  }();
  return p;
}

Tensor colorize_labels(const Tensor& labels, const Palette& palette) {
  const Tensor l = labels_u8(labels, "colorize_labels");
  const int64_t HW = l.numel();
  Tensor out = empty({3, l.size(0), l.size(1)}, {.dtype = DType::u8});
  const uint8_t* s = l.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t k = 0; k < HW; ++k)
    for (int64_t c = 0; c < 3; ++c) d[c * HW + k] = palette[3 * s[k] + static_cast<size_t>(c)];
  return out;
}

Tensor overlay_labels(const Tensor& image, const Tensor& labels, const Palette& palette,
                      double alpha) {
  TCV_CHECK(image.defined() && image.dtype() == DType::u8 && image.dim() == 3 && image.size(0) == 3,
            "[overlay_labels] expects a u8 (3, H, W) image");
  TCV_CHECK(alpha >= 0.0 && alpha <= 1.0, "[overlay_labels] alpha must be in [0, 1], got ", alpha);
  const Tensor l = labels_u8(labels, "overlay_labels");
  TCV_CHECK(l.size(0) == image.size(1) && l.size(1) == image.size(2), "[overlay_labels] label map ",
            l.shape_str(), " and image ", image.shape_str(), " differ in size");
  const Tensor img = image.contiguous();
  const int64_t HW = l.numel();
  Tensor out = empty(img.shape(), {.dtype = DType::u8});
  const uint8_t* s = l.data<uint8_t>();
  const uint8_t* px = img.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  const double a = alpha, b = 1.0 - alpha;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t k = 0; k < HW; ++k) {
      const uint8_t v = px[c * HW + k];
      d[c * HW + k] = s[k] == kIgnoreLabel
                          ? v
                          : static_cast<uint8_t>(std::nearbyint(
                                b * v + a * palette[3 * s[k] + static_cast<size_t>(c)]));
    }
  return out;
}

void write_label_png(const std::string& path, const Tensor& labels, const Palette& palette) {
  write_png_indexed(path, labels_u8(labels, "write_label_png"), palette);
}

void write_cityscapes_label_ids(const std::string& path, const Tensor& train_ids) {
  TCV_CHECK(format_from_extension(path) == ImageFormat::png, path,
            ": Cityscapes label ids are written as PNG");
  write_image(path, cityscapes_train_to_label_ids(train_ids));
}

}  // namespace tcv::data
