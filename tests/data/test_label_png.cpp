// Label PNGs read as class indices: palette indices (not colours) and grey
// samples at every bit depth, interlaced or not, and errors that name the file.
#include <gtest/gtest.h>

#include <fstream>

#include "data/image.h"
#include "data/label_png.h"
#include "support/error_of.h"
#include "support/png_builder.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
using tcv::testing::build_png;
using tcv::testing::PngSpec;

namespace {

using tcv::testing::error_of;
using tcv::testing::put_file;

// Values v(x, y) = (x * 7 + y * 3) mod n, a pattern every bit depth can hold.
std::vector<uint16_t> pattern(uint32_t w, uint32_t h, uint32_t n) {
  std::vector<uint16_t> v;
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) v.push_back(static_cast<uint16_t>((x * 7 + y * 3) % n));
  return v;
}

std::vector<uint8_t> as_u8(const std::vector<uint16_t>& v) {
  return std::vector<uint8_t>(v.begin(), v.end());
}

}  // namespace

TEST(LabelPng, PaletteIndicesNotColours) {
  // A VOC-style mask written by the palette writer: stb_image sees colours, the
  // label reader the indices.
  Tensor labels = empty({3, 4}, {.dtype = DType::u8});
  const std::vector<uint8_t> v{0, 1, 2, 255, 20, 15, 1, 0, 255, 255, 3, 7};
  std::copy(v.begin(), v.end(), labels.data<uint8_t>());
  const std::string png = encode_png_indexed(labels, voc_palette());
  const LabelPng got = decode_label_png(png, "mask.png");
  EXPECT_EQ(got.kind, LabelPngKind::palette);
  EXPECT_EQ(got.bit_depth, 8);
  EXPECT_EQ(got.labels.shape(), (Shape{3, 4}));
  EXPECT_EQ(got.labels.to_vector<uint8_t>(), v);
  const Tensor rgb = decode_image(png, "mask.png", ImageMode::rgb);
  // Index 1 is VOC's (128, 0, 0).
  EXPECT_EQ(rgb.select(1, 0).select(1, 1).to_vector<uint8_t>(), (std::vector<uint8_t>{128, 0, 0}));
}

TEST(LabelPng, GraySamplesAsTheyAre) {
  // An 8-bit grey PNG from stb_image_write (as Cityscapes' *_labelIds.png).
  Tensor labels = empty({5, 3}, {.dtype = DType::u8});
  for (int64_t k = 0; k < 15; ++k) labels.data<uint8_t>()[k] = static_cast<uint8_t>(k * 17);
  const LabelPng got = decode_label_png(encode_image(labels, ImageFormat::png), "ids.png");
  EXPECT_EQ(got.kind, LabelPngKind::gray);
  EXPECT_EQ(got.labels.to_vector<uint8_t>(), labels.to_vector<uint8_t>());
}

TEST(LabelPng, EveryBitDepthAndInterlacing) {
  for (uint8_t color : {uint8_t{0}, uint8_t{3}})
    for (uint8_t depth : {1, 2, 4, 8, 16})
      for (bool interlaced : {false, true}) {
        if (color == 3 && depth == 16) continue;  // not a PNG format
        // Odd sizes: rows that end inside a byte, Adam7 passes that are empty.
        const uint32_t w = 13, h = 11;
        const uint32_t n = depth >= 8 ? 256 : (1u << depth);
        PngSpec s{.width = w,
                  .height = h,
                  .bit_depth = depth,
                  .color_type = color,
                  .interlaced = interlaced,
                  .samples = pattern(w, h, n)};
        const LabelPng got = decode_label_png(build_png(s), "x.png");
        SCOPED_TRACE(::testing::Message() << "colour " << int(color) << " depth " << int(depth)
                                          << " interlaced " << interlaced);
        EXPECT_EQ(got.bit_depth, depth);
        EXPECT_EQ(got.labels.shape(), (Shape{h, w}));
        EXPECT_EQ(got.labels.to_vector<uint8_t>(), as_u8(s.samples));
      }
}

TEST(LabelPng, SixteenBitValuesAbove255AreErrors) {
  PngSpec s{.width = 4,
            .height = 2,
            .bit_depth = 16,
            .color_type = 0,
            .samples = {0, 1, 2, 3, 4, 300, 6, 7}};
  const std::string msg =
      error_of<std::exception>([&] { decode_label_png(build_png(s), "deep.png"); });
  EXPECT_NE(msg.find("deep.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label value 300"), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 1, column 1"), std::string::npos) << msg;
}

TEST(LabelPng, ColourPngsAreRefused) {
  for (uint8_t color : {uint8_t{2}, uint8_t{4}, uint8_t{6}}) {
    const int ch = color == 2 ? 3 : color == 4 ? 2 : 4;
    PngSpec s{.width = 2,
              .height = 2,
              .bit_depth = 8,
              .color_type = color,
              .samples = std::vector<uint16_t>(static_cast<size_t>(4 * ch), 9)};
    const std::string msg =
        error_of<std::exception>([&] { decode_label_png(build_png(s), "colour.png"); });
    EXPECT_NE(msg.find("colour.png"), std::string::npos) << msg;
    EXPECT_NE(msg.find("palette or grayscale"), std::string::npos) << msg;
  }
}

TEST(LabelPng, CorruptFilesNameTheFile) {
  PngSpec s{
      .width = 16, .height = 16, .bit_depth = 8, .color_type = 3, .samples = pattern(16, 16, 21)};
  const std::string good = build_png(s);
  ASSERT_NO_THROW(decode_label_png(good, "good.png"));
  // Cut inside the IDAT chunk.
  const size_t idat = good.find("IDAT");
  for (size_t cut : {size_t{4}, size_t{20}, idat + 40, good.size() - 20}) {
    const std::string msg =
        error_of<std::exception>([&] { decode_label_png(good.substr(0, cut), "cut.png"); });
    EXPECT_NE(msg.find("cut.png"), std::string::npos) << "cut at " << cut << ": " << msg;
  }
  // A flipped byte in the pixel data: the chunk's CRC no longer matches.
  std::string bad = good;
  bad[idat + 30] = static_cast<char>(bad[idat + 30] ^ 0x40);
  std::string msg = error_of<std::exception>([&] { decode_label_png(bad, "crc.png"); });
  EXPECT_NE(msg.find("crc.png"), std::string::npos) << msg;
  // Not a PNG at all.
  Tensor img = zeros({3, 4, 4}, {.dtype = DType::u8});
  msg = error_of<std::exception>(
      [&] { decode_label_png(encode_image(img, ImageFormat::jpeg), "photo.png"); });
  EXPECT_NE(msg.find("photo.png: not a PNG"), std::string::npos) << msg;
  msg = error_of<std::exception>([&] { decode_label_png("", "empty.png"); });
  EXPECT_NE(msg.find("empty.png: not a PNG"), std::string::npos) << msg;
}

TEST(LabelPng, FilesOnDisk) {
  tcv::testing::TempDir dir("label_png");
  PngSpec s{.width = 5, .height = 3, .bit_depth = 4, .color_type = 3, .samples = pattern(5, 3, 16)};
  put_file(dir.path("a.png"), build_png(s));
  EXPECT_EQ(read_label_png(dir.path("a.png")).labels.to_vector<uint8_t>(), as_u8(s.samples));
  const std::string msg =
      error_of<std::exception>([&] { read_label_png(dir.path("missing.png")); });
  EXPECT_NE(msg.find("missing.png: label file not found"), std::string::npos) << msg;
}

// A 33-byte image data chunk cannot inflate to 65535 x 65535 pixels (4 GiB):
// refused from the header, before the image is allocated.
TEST(LabelPng, SizesTheImageDataCannotHoldAreRefusedBeforeAllocating) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  auto chunk = [&](const std::string& type, const std::string& data) {
    return be32(static_cast<uint32_t>(data.size())) + type + data +
           be32(tcv::testing::png_crc32(type + data));
  };
  // The IDAT of a real 16 x 16 grey image (its zlib stream), under a bigger header.
  const std::string small = build_png(
      {.width = 16, .height = 16, .bit_depth = 8, .color_type = 0, .samples = pattern(16, 16, 7)});
  const size_t at = small.find("IDAT");
  const uint32_t n = (uint32_t{static_cast<uint8_t>(small[at - 4])} << 24) |
                     (uint32_t{static_cast<uint8_t>(small[at - 3])} << 16) |
                     (uint32_t{static_cast<uint8_t>(small[at - 2])} << 8) |
                     static_cast<uint8_t>(small[at - 1]);
  const std::string idat = small.substr(at + 4, n);
  const std::string huge =
      std::string("\x89PNG\r\n\x1a\n", 8) +
      chunk("IHDR", be32(65535) + be32(65535) + std::string("\x08\0\0\0\0", 5)) +
      chunk("IDAT", idat) + chunk("IEND", "");
  // (A limit above the size: data.max_pixels's default would refuse it first.)
  const std::string msg = error_of<std::exception>(
      [&] { decode_label_png(huge, "huge.png", {.max_pixels = int64_t{1} << 40}); });
  EXPECT_NE(msg.find("huge.png: label PNG announces 65535x65535 pixels at 8 bits, but its image "
                     "data (IDAT) holds only " +
                     std::to_string(n) + " bytes"),
            std::string::npos)
      << msg;
  // The same data under its own header still decodes.
  EXPECT_EQ(decode_label_png(small, "small.png").labels.to_vector<uint8_t>(),
            as_u8(pattern(16, 16, 7)));
}

// Issue 25, item 3: label maps are held to data.max_pixels as images are,
// from the header, before the image data is looked at.
TEST(LabelPng, HeadersAnnouncingMorePixelsThanTheLimitAreRefused) {
  const std::string small = build_png(
      {.width = 4, .height = 3, .bit_depth = 8, .color_type = 3, .samples = pattern(4, 3, 9)});
  const std::string bomb = tcv::testing::png_claiming(small, 20000, 20000);
  std::string msg =
      error_of<std::exception>([&] { decode_label_png(bomb, "SegmentationClass/1.png"); });
  EXPECT_NE(msg.find("SegmentationClass/1.png: image is 20000x20000 (width x height, 400000000 "
                     "pixels), more than data.max_pixels = 178956970"),
            std::string::npos)
      << msg;
  EXPECT_EQ(decode_label_png(small, "s.png", {.max_pixels = 12}).labels.numel(), 12);
  msg = error_of<std::exception>([&] { decode_label_png(small, "s.png", {.max_pixels = 11}); });
  EXPECT_NE(msg.find("s.png: image is 4x3"), std::string::npos) << msg;
}
