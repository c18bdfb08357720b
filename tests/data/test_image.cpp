#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "data/image.h"
#include "support/gradcheck.h"
#include "support/png_builder.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;

namespace {

using tcv::testing::error_of;
using tcv::testing::TempDir;

// u8 (C, H, W) with every value different enough to catch a transposed layout.
Tensor pattern(int64_t C, int64_t H, int64_t W) {
  std::vector<uint8_t> v;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        v.push_back(static_cast<uint8_t>((c * 97 + y * 31 + x * 7) % 256));
  return from_vector(v, {C, H, W});
}

// A smooth image (JPEG-friendly).
Tensor smooth(int64_t H, int64_t W) {
  std::vector<uint8_t> v;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        v.push_back(static_cast<uint8_t>(40 + c * 50 + y * 4 + x * 3));
  return from_vector(v, {3, H, W});
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void truncate_file(const std::string& path, double keep) {
  std::ifstream in(path, std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(static_cast<double>(b.size()) * keep));
}

}  // namespace

TEST(Image, PngRoundTripIsExact) {
  TempDir dir;
  const Tensor img = pattern(3, 5, 7);
  const std::string path = dir.path("a.png");
  write_image(path, img);
  const Tensor back = read_image(path);
  EXPECT_EQ(back.dtype(), DType::u8);
  EXPECT_EQ(back.shape(), (Shape{3, 5, 7}));
  EXPECT_EQ(back.to_vector<uint8_t>(), img.to_vector<uint8_t>());
  // In memory too.
  EXPECT_EQ(decode_image(encode_image(img, ImageFormat::png), "mem").to_vector<uint8_t>(),
            img.to_vector<uint8_t>());
}

TEST(Image, GrayscaleModes) {
  TempDir dir;
  const Tensor g = pattern(1, 4, 6);
  const std::string path = dir.path("g.png");
  write_image(path, g);
  const Tensor keep = read_image(path, ImageMode::keep);
  EXPECT_EQ(keep.shape(), (Shape{1, 4, 6}));
  EXPECT_EQ(keep.to_vector<uint8_t>(), g.to_vector<uint8_t>());
  const Tensor rgb = read_image(path, ImageMode::rgb);  // grey replicated
  ASSERT_EQ(rgb.shape(), (Shape{3, 4, 6}));
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_EQ(rgb.select(0, c).contiguous().to_vector<uint8_t>(), g.to_vector<uint8_t>());
  // RGB forced to one channel: stb's luma (77 R + 150 G + 29 B) >> 8.
  const Tensor c3 = from_vector(std::vector<uint8_t>{200, 100, 50}, {3, 1, 1});
  write_image(dir.path("c.png"), c3);
  const Tensor one = read_image(dir.path("c.png"), ImageMode::gray);
  ASSERT_EQ(one.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(one.to_vector<uint8_t>()[0], (200 * 77 + 100 * 150 + 50 * 29) >> 8);
  EXPECT_EQ(read_image(dir.path("c.png"), ImageMode::keep).size(0), 3);
}

TEST(Image, BmpRoundTripIsExact) {
  TempDir dir;
  const Tensor img = pattern(3, 6, 5);
  write_image(dir.path("a.BMP"), img);  // extension matched case-insensitively
  EXPECT_EQ(read_image(dir.path("a.BMP")).to_vector<uint8_t>(), img.to_vector<uint8_t>());
}

TEST(Image, JpegRoundTripWithinTolerance) {
  TempDir dir;
  const Tensor img = smooth(24, 32);
  write_image(dir.path("a.jpg"), img, 95);
  const Tensor back = read_image(dir.path("a.jpg"));
  ASSERT_EQ(back.shape(), (Shape{3, 24, 32}));
  const auto a = img.to_vector<uint8_t>(), b = back.to_vector<uint8_t>();
  double sum = 0;
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    sum += d;
    worst = std::max(worst, d);
  }
  EXPECT_LT(sum / static_cast<double>(a.size()), 2.0);
  EXPECT_LE(worst, 16);
}

TEST(Image, TruncatedFilesAreErrorsNamingTheFile) {
  TempDir dir;
  for (const char* name : {"t.png", "t.jpg", "t.bmp"}) {
    const std::string path = dir.path(name);
    write_image(path, smooth(32, 32));
    ASSERT_NO_THROW(read_image(path));
    truncate_file(path, 0.5);
    const std::string msg = error_of([&] { read_image(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("cannot decode image"), std::string::npos) << name << ": " << msg;
  }
}

TEST(Image, MissingAndGarbageFilesAreErrors) {
  TempDir dir;
  const std::string missing = dir.path("none.png");
  std::string msg = error_of([&] { read_image(missing); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;

  const std::string junk = dir.path("junk.png");
  std::ofstream(junk) << "this is not an image at all";
  msg = error_of([&] { read_image(junk); });
  EXPECT_NE(msg.find(junk), std::string::npos) << msg;
  EXPECT_GT(msg.size(), junk.size() + 25) << "stb's reason missing: " << msg;

  const std::string empty_file = dir.path("empty.jpg");
  std::ofstream(empty_file).close();
  EXPECT_NE(error_of([&] { read_image(empty_file); }).find("empty"), std::string::npos);

  EXPECT_THROW(write_image(dir.path("a.gif"), pattern(3, 2, 2)), Error);  // unknown format
  EXPECT_THROW(encode_image(pattern(2, 2, 2), ImageFormat::png), Error);  // 2 channels
}

TEST(Image, JpegHuffmanTableWithTooManyCodesIsAnError) {
  // Found by fuzz_image (UBSan: index 257 out of bounds in stbi__build_huffman):
  // the JPEG's second Huffman table (DHT) declares 546 codes; Debian's
  // stb_image 2.27 wrote them past its 256-entry tables.
  const std::string path =
      tcv::testing::source_dir() + "/tests/data/fuzz/jpeg_huffman_overflow.jpg";
  const std::string msg = error_of([&] { read_image(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(
      msg.find("corrupt JPEG: JPEG Huffman table at byte 206 defines 546 codes (at most 256)"),
      std::string::npos)
      << msg;
  // JPEGs that stb_image_write makes (their tables hold 12 and 162 codes) still decode.
  for (const int q : {10, 90, 100})
    EXPECT_EQ(decode_image(encode_image(smooth(17, 23), ImageFormat::jpeg, q), "ok").shape(),
              (Shape{3, 17, 23}));
}

TEST(Image, PnmWithoutPixelsIsAnError) {
  // Found by fuzz_image: "P5" alone reads as a 0 x 0 image in stb_image.
  const std::string msg = error_of([&] { decode_image("P5", "fuzz.pgm"); });
  EXPECT_NE(msg.find("fuzz.pgm: cannot decode image: it has no pixels (0 x 0)"), std::string::npos)
      << msg;
  // A real 3 x 2 PGM and PPM decode.
  const Tensor gray = decode_image(std::string("P5 3 2 255\n\x01\x02\x03\x04\x05\x06", 17), "g.pgm",
                                   ImageMode::keep);
  EXPECT_EQ(gray.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(gray.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  const Tensor rgb = decode_image("P6 1 1 255\n" + std::string("\x0a\x14\x1e", 3), "c.ppm");
  EXPECT_EQ(rgb.to_vector<int64_t>(), (std::vector<int64_t>{10, 20, 30}));
}

TEST(Image, DecodesOnlyTheFormatsImageFolderAccepts) {
  // A file is decoded by its content, so a GIF, TGA or PSD named .png would reach
  // stb's decoders for those formats; tcv builds only JPEG, PNG, BMP and PNM.
  const std::string gif(
      "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
      "\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00\x3b",
      35);
  const std::string msg = error_of([&] { decode_image(gif, "a.png"); });
  EXPECT_NE(msg.find("a.png: cannot decode image"), std::string::npos) << msg;
}

TEST(Image, JpegHuffmanTableCutByTheEndOfTheFileIsAnError) {
  // Found by fuzz_image after the check above: a DHT segment after the second
  // scan whose table is cut by the end of the file; stb reads the missing count
  // bytes as zeros and the ones there (3, 255, 217) already make 475 codes.
  const std::string path =
      tcv::testing::source_dir() + "/tests/data/fuzz/jpeg_huffman_overflow_at_eof.jpg";
  const std::string msg = error_of([&] { read_image(path); });
  EXPECT_NE(msg.find(path + ": cannot decode image: corrupt JPEG: JPEG Huffman table at byte 1064 "
                            "defines 475 codes (at most 256)"),
            std::string::npos)
      << msg;
}

// Issue 25, item 3: an 18000 x 18000 PNG of under a megabyte made training
// allocate 10.9 GB and fail naming no file; a 20000 x 20000 one was refused
// only by stb's own limit ("Image not of any known type, or corrupt"). A header
// announcing more than data.max_pixels (PIL's limit by default) is refused
// before any pixel is decoded, naming the file, its size and the key.
TEST(Image, HeadersAnnouncingMorePixelsThanTheLimitAreRefused) {
  EXPECT_EQ(kDefaultMaxPixels, 178956970);  // 2 x PIL's Image.MAX_IMAGE_PIXELS
  TempDir tmp("bomb");
  const std::string small = encode_image(pattern(3, 4, 5), ImageFormat::png);
  const std::string gray = encode_image(pattern(1, 4, 5), ImageFormat::png);
  for (const uint32_t side : {18000u, 20000u}) {
    const std::string path = tmp.path("000001.jpg");
    tcv::testing::put_file(path,
                           tcv::testing::png_claiming(side == 18000 ? gray : small, side, side));
    const std::string e = error_of([&] { read_image(path); });
    const std::string n = std::to_string(side);
    EXPECT_NE(e.find(path + ": image is " + n + "x" + n + " (width x height, " +
                     std::to_string(int64_t{side} * side) +
                     " pixels), more than data.max_pixels = 178956970: refused before decoding"),
              std::string::npos)
        << e;
  }
  // The limit is the caller's: 5 x 4 = 20 pixels pass a limit of 20, not one of 19.
  EXPECT_EQ(decode_image(small, "s.png", ImageMode::rgb, {.max_pixels = 20}).shape(),
            (Shape{3, 4, 5}));
  EXPECT_NE(error_of([&] { decode_image(small, "s.png", ImageMode::rgb, {.max_pixels = 19}); })
                .find("s.png: image is 5x4 (width x height, 20 pixels), more than "
                      "data.max_pixels = 19"),
            std::string::npos);
  // JPEG headers too.
  const std::string jpeg = encode_image(smooth(16, 24), ImageFormat::jpeg);
  EXPECT_NE(error_of([&] {
              decode_image(jpeg, "j.jpg", ImageMode::rgb, {.max_pixels = 383});
            }).find("j.jpg: image is 24x16"),
            std::string::npos);
  EXPECT_EQ(image_size_error("x", int64_t{1} << 32, int64_t{1} << 32, {}),
            "x: image is 4294967296x4294967296 (width x height), more than data.max_pixels = "
            "178956970: refused before decoding, as a possible decompression bomb (raise "
            "data.max_pixels to read it)");
}

// The audit of issue 25, item 1: a BMP header of 2^31 - 1 rows of 2^44 bytes
// (width 2^31 - 1 at 65535 bits a pixel) overflowed the size the truncation
// check computes. It is refused by data.max_pixels first, and above any limit
// as truncated.
TEST(Image, BmpSizesBeyond64BitsAreTruncatedFiles) {
  std::string bmp = encode_image(pattern(3, 2, 2), ImageFormat::bmp);
  auto put_le = [&](size_t at, uint32_t v, int bytes) {
    for (int k = 0; k < bytes; ++k)
      bmp[at + static_cast<size_t>(k)] = static_cast<char>(v >> (8 * k));
  };
  put_le(18, 0x7fffffff, 4);  // width
  put_le(22, 0x7fffffff, 4);  // height
  put_le(28, 0xffff, 2);      // bits a pixel
  EXPECT_NE(
      error_of([&] { decode_image(bmp, "b.bmp"); }).find("b.bmp: image is 2147483647x2147483647"),
      std::string::npos);
  const std::string e = error_of([&] {
    decode_image(bmp, "b.bmp", ImageMode::rgb, {.max_pixels = std::numeric_limits<int64_t>::max()});
  });
  EXPECT_NE(e.find("b.bmp: cannot decode image: truncated BMP"), std::string::npos) << e;
}

// Found by fuzz_image (tests/fuzz/corpus/image/pnm-width-beyond-int): stb 2.27
// reads a PNM header's numbers into an int, and "P5150000000..." overflowed it
// (UBSan: signed integer overflow in stbi__pnm_getinteger). Numbers past
// 2^31 - 1 are refused before stb sees them, the size also by data.max_pixels.
TEST(Image, PnmHeaderNumbersBeyondIntAreErrors) {
  const std::string width = "P5" + std::string(40, '0').replace(0, 2, "15");
  std::string e = error_of([&] { decode_image(width, "w.pgm"); });
  EXPECT_NE(e.find("w.pgm: cannot decode image: the PNM header's width (over 2^40) is beyond "
                   "2^31 - 1"),
            std::string::npos)
      << e;
  e = error_of([&] { decode_image("P5 # c\n2 2 4294967296\n\x01\x02\x03\x04", "m.pgm"); });
  EXPECT_NE(e.find("m.pgm: cannot decode image: the PNM header's maximum value 4294967296 is "
                   "beyond 2^31 - 1"),
            std::string::npos)
      << e;
  e = error_of([&] { decode_image("P6 30000 30000 255\n", "big.ppm"); });
  EXPECT_NE(e.find("big.ppm: image is 30000x30000 (width x height, 900000000 pixels), more than "
                   "data.max_pixels"),
            std::string::npos)
      << e;
  EXPECT_EQ(decode_image("P5 2 2 255\n\x01\x02\x03\x04", "ok.pgm", ImageMode::keep).shape(),
            (Shape{1, 2, 2}));
}

// Found by fuzz_image (tests/fuzz/corpus/image/jpeg-huffman-after-fill-bytes;
// UBSan: index 257 out of bounds in stbi__build_huffman): stb takes 0xFF fill
// bytes before the start-of-image marker (FF FF ... FF D8) as a JPEG, but the
// checks here (Huffman code counts, truncation, header size) asked for FF D8
// at the start and let such a file through.
TEST(Image, JpegChecksSeeThroughFillBytesBeforeTheStartMarker) {
  const std::string bad =
      read_file_bytes(tcv::testing::source_dir() + "/tests/data/fuzz/jpeg_huffman_overflow.jpg");
  const std::string filled = std::string(30, '\xFF') + bad.substr(1);  // FF ... FF D8 ...
  std::string e = error_of([&] { decode_image(filled, "f.jpg"); });
  EXPECT_NE(e.find("f.jpg: cannot decode image: corrupt JPEG: JPEG Huffman table at byte 235 "
                   "defines 546 codes (at most 256)"),
            std::string::npos)
      << e;
  const std::string good = encode_image(smooth(17, 23), ImageFormat::jpeg, 90);
  const std::string good_filled = std::string(5, '\xFF') + good.substr(1);
  EXPECT_EQ(decode_image(good_filled, "ok.jpg").shape(), (Shape{3, 17, 23}));
  e = error_of([&] { decode_image(good_filled, "s.jpg", ImageMode::rgb, {.max_pixels = 390}); });
  EXPECT_NE(e.find("s.jpg: image is 23x17"), std::string::npos) << e;
  e = error_of([&] { decode_image(good_filled.substr(0, good_filled.size() - 2), "t.jpg"); });
  EXPECT_NE(e.find("truncated JPEG"), std::string::npos) << e;
}
