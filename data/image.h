// Image files: decode JPEG, PNG, BMP (and the other formats stb_image reads)
// to u8 (C, H, W) tensors, and encode PNG, JPEG and BMP with stb_image_write.
#pragma once

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

/// Decodes an encoded image held in memory to u8 (C, H, W). `name` (usually the
/// file path) appears in error messages together with stb_image's reason.
Tensor decode_image(const std::string& bytes, const std::string& name,
                    ImageMode mode = ImageMode::rgb);

/// Reads and decodes an image file to u8 (C, H, W). A missing, unreadable,
/// truncated or corrupt file is a tcv::Error naming the file and the reason.
Tensor read_image(const std::string& path, ImageMode mode = ImageMode::rgb);

/// Encodes a u8 (C, H, W) or (H, W) image with C in {1, 3, 4}; `jpeg_quality` in [1, 100].
std::string encode_image(const Tensor& image, ImageFormat format, int jpeg_quality = 95);

/// Encodes and writes an image; the format follows the extension (.png, .jpg/.jpeg, .bmp).
void write_image(const std::string& path, const Tensor& image, int jpeg_quality = 95);

/// The format implied by a file name's extension (case-insensitive); error otherwise.
ImageFormat format_from_extension(const std::string& path);

}  // namespace tcv::data
