#include "data/label_png.h"

#include <spng.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace tcv::data {

namespace {

// Larger label maps than this are refused before anything is allocated.
constexpr uint32_t kMaxSide = 1u << 16;

const char* color_type_name(uint8_t t) {
  switch (t) {
    case 0:
      return "grayscale";
    case 2:
      return "RGB";
    case 3:
      return "palette";
    case 4:
      return "grayscale + alpha";
    case 6:
      return "RGBA";
    default:
      return "unknown";
  }
}

// The bytes of all IDAT chunks (the compressed pixels) in a PNG held in memory;
// chunks cut by the end of the buffer count what is there.
uint64_t idat_bytes(const std::string& png) {
  uint64_t total = 0;
  size_t pos = 8;  // after the signature
  while (pos + 8 <= png.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(png.data() + pos);
    const uint64_t len =
        (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    const uint64_t here = std::min<uint64_t>(len, png.size() - (pos + 8));
    if (std::memcmp(p + 4, "IDAT", 4) == 0) total += here;
    if (std::memcmp(p + 4, "IEND", 4) == 0 || here < len) break;
    pos += 12 + len;
  }
  return total;
}

// Deflate encodes at most 258 bytes in 2 bits: no stream inflates more than 1032:1.
constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace

LabelPng decode_label_png(const std::string& bytes, const std::string& name,
                          const ImageLimits& limits) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  TCV_CHECK(bytes.size() >= 8 && std::memcmp(bytes.data(), kSignature, 8) == 0, name,
            ": not a PNG file (label maps are read as PNG palette or grayscale images)");
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), &spng_ctx_free);
  TCV_CHECK(ctx != nullptr, name, ": cannot decode label PNG: out of memory");
  auto check = [&](int rc, const char* what) {
    TCV_CHECK(rc == 0, name, ": cannot decode label PNG (", what, "): ", spng_strerror(rc));
  };
  check(spng_set_image_limits(ctx.get(), kMaxSide, kMaxSide), "limits");
  check(spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()), "buffer");
  spng_ihdr ihdr{};
  check(spng_get_ihdr(ctx.get(), &ihdr), "header");
  TCV_CHECK(ihdr.color_type == 0 || ihdr.color_type == 3, name, ": label PNG is ",
            color_type_name(ihdr.color_type), " (colour type ", int(ihdr.color_type),
            "); a label map must be a palette or grayscale PNG whose pixels are class indices");
  if (const std::string e = image_size_error(name, ihdr.width, ihdr.height, limits); !e.empty())
    TCV_THROW(e);
  LabelPng out;
  out.kind = ihdr.color_type == 3 ? LabelPngKind::palette : LabelPngKind::gray;
  out.bit_depth = ihdr.bit_depth;
  // A header may announce 65536 x 65536 pixels in a file of 60 bytes: refuse
  // what the compressed data cannot hold before allocating the image.
  const uint64_t pixel_bytes = (uint64_t{ihdr.width} * ihdr.height * ihdr.bit_depth) / 8;
  const uint64_t compressed = idat_bytes(bytes);
  TCV_CHECK(pixel_bytes <= kMaxDeflateRatio * (compressed + 1), name, ": label PNG announces ",
            ihdr.width, "x", ihdr.height, " pixels at ", int(ihdr.bit_depth),
            " bits, but its image data (IDAT) holds only ", compressed,
            " bytes, too few for that size (deflate inflates at most 1032:1): a truncated or "
            "corrupt file");
  size_t len = 0;
  check(spng_decoded_image_size(ctx.get(), SPNG_FMT_PNG, &len), "size");
  // SPNG_FMT_PNG: the samples as stored (host-endian for 16 bits), sub-byte
  // depths packed most significant bits first, rows padded to whole bytes.
  std::string raw(len, '\0');
  check(spng_decode_image(ctx.get(), raw.data(), len, SPNG_FMT_PNG, 0), "pixels");
  const int64_t H = ihdr.height, W = ihdr.width;
  out.labels = empty({H, W}, {.dtype = DType::u8});
  uint8_t* dst = out.labels.data<uint8_t>();
  const auto* src = reinterpret_cast<const uint8_t*>(raw.data());
  const int depth = ihdr.bit_depth;
  const int64_t row_bytes = (W * depth + 7) / 8;
  TCV_CHECK(static_cast<int64_t>(len) == row_bytes * H, name,
            ": cannot decode label PNG: unexpected decoded size ", len);
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* r = src + y * row_bytes;
    uint8_t* d = dst + y * W;
    if (depth == 8) {
      std::memcpy(d, r, static_cast<size_t>(W));
    } else if (depth == 16) {
      const auto* r16 = reinterpret_cast<const uint8_t*>(r);
      for (int64_t x = 0; x < W; ++x) {
        uint16_t v = 0;
        std::memcpy(&v, r16 + 2 * x, 2);
        TCV_CHECK(v <= 255, name, ": label value ", v, " at (row ", y, ", column ", x,
                  ") of a 16-bit PNG does not fit a class index (at most 255)");
        d[x] = static_cast<uint8_t>(v);
      }
    } else {
      const int per_byte = 8 / depth, mask = (1 << depth) - 1;
      for (int64_t x = 0; x < W; ++x) {
        const int shift = 8 - depth * (1 + static_cast<int>(x % per_byte));
        d[x] = static_cast<uint8_t>((r[x / per_byte] >> shift) & mask);
      }
    }
  }
  return out;
}

LabelPng read_label_png(const std::string& path, const ImageLimits& limits) {
  std::error_code ec;
  TCV_CHECK(std::filesystem::is_regular_file(path, ec), path, ": label file not found");
  std::ifstream f(path, std::ios::binary);
  TCV_CHECK(f.good(), path, ": cannot open label file for reading");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  TCV_CHECK(!f.bad(), path, ": read error");
  return decode_label_png(bytes, path, limits);
}

}  // namespace tcv::data
