// PNG files built byte by byte for tests: any colour type and bit depth,
// Adam7 interlacing, and deliberately broken files. The deflate stream uses
// stored blocks, so no compressor is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tcv::testing {

struct PngSpec {
  uint32_t width = 0, height = 0;
  uint8_t bit_depth = 8;
  /// 0 gray, 2 RGB, 3 palette, 4 gray + alpha, 6 RGBA.
  uint8_t color_type = 0;
  bool interlaced = false;
  /// Samples, row-major, `channels` per pixel (1 for gray and palette).
  std::vector<uint16_t> samples{};
  /// PLTE entries (palette images); empty: 256 grey entries.
  std::vector<uint8_t> palette{};
};

/// The PNG file for `spec`.
std::string build_png(const PngSpec& spec);

/// CRC-32 (PNG's, zlib's) of `data`.
uint32_t png_crc32(const std::string& data);

/// A decompression bomb: `png` (a whole file starting with its IHDR) with the
/// header rewritten to announce width x height pixels, CRC fixed, so that a
/// file of a few hundred bytes claims, say, 18000 x 18000 pixels.
std::string png_claiming(std::string png, uint32_t width, uint32_t height);

}  // namespace tcv::testing
