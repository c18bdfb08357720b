// Image files: decode JPEG, PNG, BMP (and the other formats stb_image reads)
// to u8 (C, H, W) tensors, and encode PNG, JPEG and BMP with stb_image_write.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace tcv::data {

/// The channels a decoded image gets.
enum class ImageMode {
  keep,  ///< as stored: 1 for grayscale (alpha dropped), 3 for colour (alpha dropped)
  gray,  ///< 1 channel (ITU-R 601 luma, as stb_image converts)
  rgb,   ///< 3 channels (grayscale replicated)
};

/// File formats the encoder writes.
enum class ImageFormat { png, jpeg, bmp };

/// PIL's decompression-bomb limit: twice Image.MAX_IMAGE_PIXELS (89,478,485),
/// the size from which PIL refuses a file (DecompressionBombError). The default
/// of ImageLimits::max_pixels and of the config key data.max_pixels; an RGB
/// image this large takes 512 MiB decoded.
inline constexpr int64_t kDefaultMaxPixels = 2 * int64_t{89478485};

/// What a decoder accepts, checked on the file's header before any pixel is
/// allocated: a PNG of 1 MB may announce 18000 x 18000 pixels (1 GB decoded).
struct ImageLimits {
  /// The most pixels (width x height) an image may have: data.max_pixels.
  int64_t max_pixels = kDefaultMaxPixels;
};

/// Decodes an encoded image held in memory to u8 (C, H, W). `name` (usually the
/// file path) appears in error messages together with stb_image's reason. An
/// image whose header announces more than limits.max_pixels pixels is refused
/// before it is decoded, naming its size and data.max_pixels.
Tensor decode_image(const std::string& bytes, const std::string& name,
                    ImageMode mode = ImageMode::rgb, const ImageLimits& limits = {});

/// Reads and decodes an image file to u8 (C, H, W). A missing, unreadable,
/// truncated or corrupt file, or one larger than limits.max_pixels, is a
/// tcv::Error naming the file and the reason.
Tensor read_image(const std::string& path, ImageMode mode = ImageMode::rgb,
                  const ImageLimits& limits = {});

/// read_image() in RGB of a file whose annotation `source` says it is width x
/// height pixels; a different size is a tcv::Error naming both.
Tensor read_annotated_image(const std::string& path, int64_t width, int64_t height,
                            const std::string& source, const ImageLimits& limits = {});

/// The error for an image of width x height pixels above limits.max_pixels
/// ("" when it is within): names `name`, the size and data.max_pixels.
std::string image_size_error(const std::string& name, int64_t width, int64_t height,
                             const ImageLimits& limits);

/// Encodes a u8 (C, H, W) or (H, W) image with C in {1, 3, 4}; `jpeg_quality` in [1, 100].
std::string encode_image(const Tensor& image, ImageFormat format, int jpeg_quality = 95);

/// Writes `bytes` to `path`, replacing it; errors name the file.
void write_file(const std::string& path, const std::string& bytes);

/// Encodes and writes an image; the format follows the extension (.png, .jpg/.jpeg, .bmp).
void write_image(const std::string& path, const Tensor& image, int jpeg_quality = 95);

/// The format implied by a file name's extension (case-insensitive); error otherwise.
ImageFormat format_from_extension(const std::string& path);

/// 256 RGB colours, entry i at [3i, 3i + 3).
using Palette = std::array<uint8_t, 768>;

/// Pascal VOC's colour map (the devkit's labelcolormap: the bits of the index
/// spread over the three channels, most significant first): 0 black, 1
/// (128, 0, 0), ..., 255 (224, 224, 192). Distinct for every index.
const Palette& voc_palette();

/// Encodes a u8 (H, W) label map as an 8-bit palette PNG (colour type 3), the
/// way Pascal VOC stores SegmentationClass/SegmentationObject: each pixel is
/// its index, shown in `palette`'s colour. zlib `level` in [0, 9].
std::string encode_png_indexed(const Tensor& labels, const Palette& palette, int level = 6);

/// encode_png_indexed, written to `path`.
void write_png_indexed(const std::string& path, const Tensor& labels, const Palette& palette,
                       int level = 6);

}  // namespace tcv::data
