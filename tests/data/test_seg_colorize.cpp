// Label maps as pictures: palette colours, overlays blended over the image,
// and label PNGs that read back as the labels.
#include <gtest/gtest.h>

#include "data/image.h"
#include "data/label_png.h"
#include "data/seg/colorize.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;

namespace {

Tensor labels_i64(int64_t H, int64_t W, const std::vector<int64_t>& v) {
  return from_vector(v, {H, W});
}

std::vector<uint8_t> pixel(const Tensor& img, int64_t y, int64_t x) {
  return img.select(1, y).select(1, x).to_vector<uint8_t>();
}

}  // namespace

TEST(SegColorize, PaletteColours) {
  const Tensor l = labels_i64(1, 4, {0, 1, 15, 255});
  const Tensor voc = colorize_labels(l, voc_palette());
  EXPECT_EQ(voc.shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(pixel(voc, 0, 0), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(pixel(voc, 0, 1), (std::vector<uint8_t>{128, 0, 0}));
  EXPECT_EQ(pixel(voc, 0, 2), (std::vector<uint8_t>{192, 128, 128}));  // person
  EXPECT_EQ(pixel(voc, 0, 3), (std::vector<uint8_t>{224, 224, 192}));  // VOC's void colour
  const Tensor city = colorize_labels(labels_i64(1, 3, {0, 18, 19}), cityscapes_palette());
  EXPECT_EQ(pixel(city, 0, 0), (std::vector<uint8_t>{128, 64, 128}));  // road
  EXPECT_EQ(pixel(city, 0, 1), (std::vector<uint8_t>{119, 11, 32}));   // bicycle
  EXPECT_EQ(pixel(city, 0, 2), (std::vector<uint8_t>{0, 0, 0}));
  const std::string msg = tcv::testing::error_of([&] {
    colorize_labels(labels_i64(1, 2, {3, 256}), voc_palette());
  });
  EXPECT_NE(msg.find("label 256 at (row 0, column 1)"), std::string::npos) << msg;
}

TEST(SegColorize, OverlayBlendsWhereLabelled) {
  Tensor img = empty({3, 1, 3}, {.dtype = DType::u8});
  const std::vector<uint8_t> px{100, 100, 100, 50, 50, 50, 0, 0, 0};
  std::copy(px.begin(), px.end(), img.data<uint8_t>());
  const Tensor l = labels_i64(1, 3, {1, 255, 0});
  const Tensor half = overlay_labels(img, l, voc_palette(), 0.5);
  EXPECT_EQ(pixel(half, 0, 0), (std::vector<uint8_t>{114, 25, 0}));  // (100, 50, 0) + (128, 0, 0)
  EXPECT_EQ(pixel(half, 0, 1), (std::vector<uint8_t>{100, 50, 0}));  // ignored: the image
  EXPECT_EQ(pixel(half, 0, 2), (std::vector<uint8_t>{50, 25, 0}));   // background is black
  EXPECT_EQ(overlay_labels(img, l, voc_palette(), 0.0).to_vector<uint8_t>(), px);
  const Tensor full_colour = overlay_labels(img, l, voc_palette(), 1.0);
  EXPECT_EQ(pixel(full_colour, 0, 0), (std::vector<uint8_t>{128, 0, 0}));
  EXPECT_EQ(pixel(full_colour, 0, 1), (std::vector<uint8_t>{100, 50, 0}));
  EXPECT_NE(tcv::testing::error_of([&] {
              overlay_labels(img, labels_i64(1, 2, {0, 0}), voc_palette());
            }).find("differ in size"),
            std::string::npos);
}

TEST(SegColorize, FilesReadBack) {
  tcv::testing::TempDir tmp("seg_colorize");
  std::vector<int64_t> v;
  for (int64_t k = 0; k < 30; ++k) v.push_back(k % 7 == 6 ? 255 : k % 21);
  const Tensor l = labels_i64(5, 6, v);
  write_label_png(tmp.path("pred.png"), l);
  const LabelPng back = read_label_png(tmp.path("pred.png"));
  EXPECT_EQ(back.kind, LabelPngKind::palette);
  EXPECT_EQ(back.labels.to(DType::i64).to_vector<int64_t>(), v);
  // What a viewer shows: VOC's colours.
  EXPECT_EQ(read_image(tmp.path("pred.png")).to_vector<uint8_t>(),
            colorize_labels(l, voc_palette()).to_vector<uint8_t>());
  // Overlays through stb_image_write: PNG exactly, JPEG at the right size.
  Tensor img = full({3, 5, 6}, 90.0, {.dtype = DType::u8});
  const Tensor over = overlay_labels(img, l, cityscapes_palette(), 0.4);
  write_image(tmp.path("overlay.png"), over);
  write_image(tmp.path("overlay.jpg"), over);
  EXPECT_EQ(read_image(tmp.path("overlay.png")).to_vector<uint8_t>(), over.to_vector<uint8_t>());
  EXPECT_EQ(read_image(tmp.path("overlay.jpg")).shape(), (Shape{3, 5, 6}));
}
