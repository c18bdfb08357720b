#include "data/image.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

#include <zlib.h>

// stb is compiled into this one file, with internal linkage so it cannot clash
// with another copy elsewhere in a program, and without our warning flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
// The formats of the extensions ImageFolder accepts (torchvision's, less TIFF
// and WebP); the other decoders (GIF, PSD, TGA, HDR, PIC) stay out, since a
// file is decoded by its content whatever its name says.
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_PNM
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace tcv::data {

namespace {

std::string read_file(const std::string& path) {
  std::error_code ec;
  TCV_CHECK(std::filesystem::exists(path, ec), path, ": image file not found");
  // One read into a buffer of the file's size (a stream through ostringstream
  // copies the bytes twice).
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  TCV_CHECK(f != nullptr, path, ": cannot open image file for reading");
  std::string out;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    if (size > 0) out.resize(static_cast<size_t>(size));
    std::rewind(f.get());
  }
  size_t got = std::fread(out.data(), 1, out.size(), f.get());
  TCV_CHECK(!std::ferror(f.get()), path, ": read error");
  out.resize(got);
  // The file may have grown since we asked its size: read the rest.
  char chunk[4096];
  while ((got = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) out.append(chunk, got);
  TCV_CHECK(!std::ferror(f.get()), path, ": read error");
  return out;
}

uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(b[at + static_cast<size_t>(k)]);
  return v;
}

// stb_image reads past the end of a truncated uncompressed BMP as zeros; this
// checks that the pixel array the headers promise is all there.
bool bmp_truncated(const std::string& b) {
  if (b.size() < 34 || b[0] != 'B' || b[1] != 'M') return false;
  const uint32_t off = le32(b, 10), header = le32(b, 14);
  if (header < 40) return false;  // old OS/2 headers: leave to stb
  const auto w = static_cast<int32_t>(le32(b, 18)), h = static_cast<int32_t>(le32(b, 22));
  const uint32_t bpp = static_cast<uint8_t>(b[28]) | (static_cast<uint8_t>(b[29]) << 8);
  const uint32_t compression = le32(b, 30);
  if (compression != 0 && compression != 3) return false;  // RLE: stb checks as it goes
  const uint64_t stride =
      (static_cast<uint64_t>(std::abs(static_cast<int64_t>(w))) * bpp + 31) / 32 * 4;
  // 2^31 rows of 2^44 bytes overflow 64 bits: no file holds that many.
  uint64_t pixels = 0, need = 0;
  if (__builtin_mul_overflow(stride, static_cast<uint64_t>(std::abs(static_cast<int64_t>(h))),
                             &pixels) ||
      __builtin_add_overflow(pixels, uint64_t{off}, &need))
    return true;
  return b.size() < need;
}

// Where a JPEG's markers start: just after its start-of-image marker, which
// stb finds after any number of 0xFF fill bytes (FF FF ... FF D8); 0 when the
// bytes do not start so (not a JPEG to stb).
size_t jpeg_start(const std::string& b) {
  if (b.empty() || static_cast<uint8_t>(b[0]) != 0xFF) return 0;
  size_t pos = 1;
  while (pos < b.size() && static_cast<uint8_t>(b[pos]) == 0xFF) ++pos;
  return pos < b.size() && static_cast<uint8_t>(b[pos]) == 0xD8 ? pos + 1 : 0;
}

// Debian's stb_image (2.27) trusts the code counts of a JPEG Huffman table
// (DHT): more than 256 codes write past its tables (stb 2.28 checks). Walks the markers as stb does
// (padding before a marker, entropy-coded data after SOS) and returns what is wrong with the first
// bad table, or "".
std::string jpeg_huffman_error(const std::string& b) {
  const auto at = [&](size_t i) { return static_cast<uint8_t>(b[i]); };
  const size_t n = b.size();
  size_t pos = jpeg_start(b);
  while (pos + 1 < n) {
    if (at(pos) != 0xFF || at(pos + 1) == 0xFF) {  // padding or fill bytes
      ++pos;
      continue;
    }
    const uint8_t m = at(pos + 1);
    if (m == 0xD9) break;                                      // EOI
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) {  // no length field
      pos += 2;
      continue;
    }
    if (pos + 4 > n) break;
    const size_t len = (static_cast<size_t>(at(pos + 2)) << 8) | at(pos + 3);
    if (m == 0xC4) {
      // Tables one after the other until the segment's length is used up,
      // read the way stb reads them: past the segment's end, and past the
      // file's end as zeros.
      const auto at_or_0 = [&](size_t i) { return i < n ? at(i) : 0; };
      int64_t left = static_cast<int64_t>(len) - 2;
      size_t t = pos + 4;
      while (left > 0 && t < n) {
        size_t codes = 0;
        for (size_t i = 1; i <= 16; ++i) codes += at_or_0(t + i);
        if (codes > 256)
          return "JPEG Huffman table at byte " + std::to_string(t) + " defines " +
                 std::to_string(codes) + " codes (at most 256)";
        t += 17 + codes;
        left -= 17 + static_cast<int64_t>(codes);
      }
    }
    pos += 2 + len;
    if (m == 0xDA) {
      // Entropy-coded data: a marker is 0xFF followed by anything but a
      // stuffed zero, a restart marker or more fill.
      while (pos + 1 < n && !(at(pos) == 0xFF && at(pos + 1) != 0x00 && at(pos + 1) != 0xFF &&
                              !(at(pos + 1) >= 0xD0 && at(pos + 1) <= 0xD7)))
        ++pos;
    }
  }
  return "";
}

uint32_t be32_at(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<uint8_t>(b[at + k]);
  return v;
}

// A PNM (P5 or P6) header read as stb reads it: width, height and maximum
// value, decimal, apart by whitespace and '#' comments. Debian's stb (2.27)
// gathers the digits in an int, which overflows past 2^31 - 1 (undefined
// behaviour); here they saturate at 2^40. false: not a PNM header.
bool pnm_header(const std::string& b, int64_t v[3]) {
  if (b.size() < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6')) return false;
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  size_t pos = 2;
  for (int k = 0; k < 3; ++k) {
    for (;;) {
      while (pos < b.size() && space(b[pos])) ++pos;
      if (pos >= b.size() || b[pos] != '#') break;
      while (pos < b.size() && b[pos] != '\n' && b[pos] != '\r') ++pos;
    }
    int64_t x = 0;
    for (; pos < b.size() && b[pos] >= '0' && b[pos] <= '9'; ++pos)
      x = std::min<int64_t>(x * 10 + (b[pos] - '0'), int64_t{1} << 40);
    v[k] = x;
  }
  return true;
}

// The size the header of a PNG, BMP, JPEG or PNM announces, read here: stb's own
// header parsing refuses large sizes with "Image not of any known type, or
// corrupt" (a 2^30-byte cap at 4 bytes a pixel), which names no size. false:
// not one of these, or no size found (stb then says what is wrong).
bool header_size(const std::string& b, int64_t* width, int64_t* height) {
  const auto at = [&](size_t i) { return static_cast<uint8_t>(b[i]); };
  if (b.size() >= 24 && b.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0 &&
      b.compare(12, 4, "IHDR") == 0) {
    *width = be32_at(b, 16);
    *height = be32_at(b, 20);
    return true;
  }
  if (b.size() >= 26 && b[0] == 'B' && b[1] == 'M' && le32(b, 14) >= 40) {
    *width = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(b, 18))));
    *height = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(b, 22))));
    return true;
  }
  if (int64_t v[3]; pnm_header(b, v)) {
    *width = v[0];
    *height = v[1];
    return true;
  }
  if (const size_t start = jpeg_start(b); start > 0) {
    // Markers until the frame header (SOF0..SOF15 but DHT, JPG and DAC).
    size_t pos = start;
    while (pos + 9 < b.size()) {
      if (at(pos) != 0xFF) return false;
      const uint8_t m = at(pos + 1);
      if (m == 0xFF) {  // fill byte
        ++pos;
        continue;
      }
      if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
        *height = (at(pos + 5) << 8) | at(pos + 6);
        *width = (at(pos + 7) << 8) | at(pos + 8);
        return true;
      }
      if (m == 0xDA || m == 0xD9) return false;  // scan data or the end before a frame
      if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
        pos += 2;
        continue;
      }
      pos += 2 + ((static_cast<size_t>(at(pos + 2)) << 8) | at(pos + 3));
    }
  }
  return false;
}

// (H, W, step) interleaved pixels to three (H, W) planes; a fixed step lets the
// compiler unroll and vectorize.
template <int step>
void deinterleave(const uint8_t* src, int64_t hw, uint8_t* dst) {
  uint8_t* __restrict r = dst;
  uint8_t* __restrict g = dst + hw;
  uint8_t* __restrict b = dst + 2 * hw;
  for (int64_t k = 0; k < hw; ++k) {
    r[k] = src[k * step];
    g[k] = src[k * step + 1];
    b[k] = src[k * step + 2];
  }
}

void append_bytes(void* ctx, void* data, int size) {
  static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

}  // namespace

std::string image_size_error(const std::string& name, int64_t width, int64_t height,
                             const ImageLimits& limits) {
  int64_t pixels = 0;
  if (!__builtin_mul_overflow(width, height, &pixels) && pixels <= limits.max_pixels) return "";
  return detail::str_cat(
      name, ": image is ", width, "x", height, " (width x height",
      __builtin_mul_overflow(width, height, &pixels) ? ""
                                                     : ", " + std::to_string(pixels) + " pixels",
      "), more than data.max_pixels = ", limits.max_pixels,
      ": refused before decoding, as a possible decompression bomb (raise data.max_pixels to "
      "read it)");
}

Tensor decode_image(const std::string& bytes, const std::string& name, ImageMode mode,
                    const ImageLimits& limits) {
  TCV_CHECK(!bytes.empty(), name, ": cannot decode image: the file is empty");
  TCV_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX), name,
            ": cannot decode image: file too large (", bytes.size(), " bytes)");
  // The size first: a bomb is refused as such, whatever else is wrong with it.
  if (int64_t hw = 0, hh = 0; header_size(bytes, &hw, &hh))
    if (const std::string e = image_size_error(name, hw, hh, limits); !e.empty()) TCV_THROW(e);
  if (int64_t v[3]; pnm_header(bytes, v)) {
    static const char* const what[3] = {"width", "height", "maximum value"};
    for (int k = 0; k < 3; ++k)
      TCV_CHECK(v[k] <= std::numeric_limits<int32_t>::max(), name,
                ": cannot decode image: the PNM header's ", what[k], " ",
                v[k] >= (int64_t{1} << 40) ? std::string("(over 2^40)") : std::to_string(v[k]),
                " is beyond 2^31 - 1");
  }
  // stb_image pads a truncated JPEG's entropy data with zeros instead of failing;
  // PIL calls such a file truncated, and so do we.
  // As stb takes it: fill bytes may come before the start-of-image marker.
  const bool jpeg = jpeg_start(bytes) > 0;
  TCV_CHECK(!jpeg || bytes.rfind("\xFF\xD9") != std::string::npos, name,
            ": cannot decode image: truncated JPEG (no end-of-image marker)");
  if (jpeg) {
    const std::string bad = jpeg_huffman_error(bytes);
    TCV_CHECK(bad.empty(), name, ": cannot decode image: corrupt JPEG: ", bad);
  }
  TCV_CHECK(!bmp_truncated(bytes), name,
            ": cannot decode image: truncated BMP (pixel data shorter than the header says)");
  const auto* buf = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = static_cast<int>(bytes.size());
  int w = 0, h = 0, stored = 0;
  if (!stbi_info_from_memory(buf, len, &w, &h, &stored))
    TCV_THROW(name, ": cannot decode image: ", stbi_failure_reason());
  // stb reads a PNM header without sizes as a 0 x 0 image.
  TCV_CHECK(w > 0 && h > 0, name, ": cannot decode image: it has no pixels (", w, " x ", h, ")");
  if (const std::string e = image_size_error(name, w, h, limits); !e.empty()) TCV_THROW(e);
  int want = 3;
  if (mode == ImageMode::gray) want = 1;
  if (mode == ImageMode::keep) want = stored <= 2 ? 1 : 3;
  // stb converts colour JPEGs with SIMD only when it writes 4 bytes a pixel;
  // the padding byte is dropped below, while the pixels go to planes anyway.
  const int step = jpeg && want == 3 && stored == 3 ? 4 : want;
  stbi_uc* px = stbi_load_from_memory(buf, len, &w, &h, &stored, step);
  if (!px) TCV_THROW(name, ": cannot decode image: ", stbi_failure_reason());
  if (const std::string e = image_size_error(name, w, h, limits); !e.empty()) {
    stbi_image_free(px);  // the pixels' header said otherwise than the info's
    TCV_THROW(e);
  }
  // stb gives (H, W, C) interleaved; we store (C, H, W).
  Tensor img = empty({want, h, w}, {.dtype = DType::u8});
  uint8_t* dst = img.data<uint8_t>();
  const int64_t hw = static_cast<int64_t>(h) * w;
  if (want == 1) {
    std::memcpy(dst, px, static_cast<size_t>(hw));
  } else if (step == 4) {
    deinterleave<4>(px, hw, dst);
  } else {
    deinterleave<3>(px, hw, dst);
  }
  stbi_image_free(px);
  return img;
}

Tensor read_image(const std::string& path, ImageMode mode, const ImageLimits& limits) {
  return decode_image(read_file(path), path, mode, limits);
}

Tensor read_annotated_image(const std::string& path, int64_t width, int64_t height,
                            const std::string& source, const ImageLimits& limits) {
  Tensor image = read_image(path, ImageMode::rgb, limits);
  TCV_CHECK(image.size(1) == height && image.size(2) == width, path, ": the image is ",
            image.size(2), "x", image.size(1), " (width x height) but ", source, " says ", width,
            "x", height);
  return image;
}

ImageFormat format_from_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".png") return ImageFormat::png;
  if (ext == ".jpg" || ext == ".jpeg") return ImageFormat::jpeg;
  if (ext == ".bmp") return ImageFormat::bmp;
  TCV_THROW(path, ": cannot tell the image format from extension '", ext,
            "' (known: .png, .jpg, .jpeg, .bmp)");
}

std::string encode_image(const Tensor& image, ImageFormat format, int jpeg_quality) {
  Tensor img = image.dim() == 2 ? image.unsqueeze(0) : image;
  TCV_CHECK(img.dtype() == DType::u8 && img.dim() == 3, "[encode_image] expects a u8 (C, H, W) ",
            "or (H, W) image, got ", dtype_name(image.dtype()), " ", image.shape_str());
  const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
  TCV_CHECK(C == 1 || C == 3 || C == 4, "[encode_image] expects 1, 3 or 4 channels, got ", C);
  TCV_CHECK(H > 0 && W > 0 && H < (1 << 16) && W < (1 << 16), "[encode_image] bad image size ",
            img.shape_str());
  TCV_CHECK(jpeg_quality >= 1 && jpeg_quality <= 100,
            "[encode_image] jpeg_quality must be in [1, 100], got ", jpeg_quality);
  const Tensor hwc = img.permute({1, 2, 0}).contiguous();  // (H, W, C)
  const void* px = hwc.data<uint8_t>();
  const int w = static_cast<int>(W), h = static_cast<int>(H), c = static_cast<int>(C);
  std::string out;
  int ok = 0;
  switch (format) {
    case ImageFormat::png:
      ok = stbi_write_png_to_func(append_bytes, &out, w, h, c, px, w * c);
      break;
    case ImageFormat::jpeg:
      ok = stbi_write_jpg_to_func(append_bytes, &out, w, h, c, px, jpeg_quality);
      break;
    case ImageFormat::bmp:
      ok = stbi_write_bmp_to_func(append_bytes, &out, w, h, c, px);
      break;
  }
  TCV_CHECK(ok != 0, "[encode_image] stb_image_write failed for image ", img.shape_str());
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TCV_CHECK(f.good(), path, ": cannot open for writing");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  TCV_CHECK(f.good(), path, ": write failed");
}

namespace {

void put_be32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xFF));
}

// One PNG chunk: length, type, data, CRC-32 of type and data.
void put_chunk(std::string& out, const char (&type)[5], const std::string& data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  const size_t at = out.size();
  out.append(type, 4);
  out.append(data);
  const auto* p = reinterpret_cast<const Bytef*>(out.data() + at);
  put_be32(out, static_cast<uint32_t>(crc32(0L, p, static_cast<uInt>(4 + data.size()))));
}

}  // namespace

void write_image(const std::string& path, const Tensor& image, int jpeg_quality) {
  write_file(path, encode_image(image, format_from_extension(path), jpeg_quality));
}

const Palette& voc_palette() {
  static const Palette p = [] {
    Palette q{};
    for (int i = 0; i < 256; ++i) {
      int r = 0, g = 0, b = 0, c = i;
      for (int j = 0; j < 8; ++j, c >>= 3) {
        r |= ((c >> 0) & 1) << (7 - j);
        g |= ((c >> 1) & 1) << (7 - j);
        b |= ((c >> 2) & 1) << (7 - j);
      }
      q[3 * i] = static_cast<uint8_t>(r);
      q[3 * i + 1] = static_cast<uint8_t>(g);
      q[3 * i + 2] = static_cast<uint8_t>(b);
    }
    return q;
  }();
  return p;
}

std::string encode_png_indexed(const Tensor& labels, const Palette& palette, int level) {
  TCV_CHECK(labels.defined() && labels.dtype() == DType::u8 && labels.dim() == 2,
            "[encode_png_indexed] expects a u8 (H, W) label map, got ",
            labels.defined() ? dtype_name(labels.dtype()) : "undefined", " ",
            labels.defined() ? labels.shape_str() : "");
  const int64_t H = labels.size(0), W = labels.size(1);
  TCV_CHECK(H > 0 && W > 0 && H < (1 << 24) && W < (1 << 24),
            "[encode_png_indexed] bad label map size ", labels.shape_str());
  TCV_CHECK(level >= 0 && level <= 9, "[encode_png_indexed] zlib level must be in [0, 9], got ",
            level);
  const Tensor l = labels.contiguous();
  // Rows, each after its filter-type byte (0: none; label maps deflate well as they are).
  std::string raw(static_cast<size_t>(H * (W + 1)), '\0');
  const uint8_t* src = l.data<uint8_t>();
  for (int64_t y = 0; y < H; ++y)
    std::memcpy(raw.data() + y * (W + 1) + 1, src + y * W, static_cast<size_t>(W));
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  const int rc =
      compress2(reinterpret_cast<Bytef*>(z.data()), &zlen,
                reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), level);
  TCV_CHECK(rc == Z_OK, "[encode_png_indexed] zlib compress2 failed (", rc, ")");
  z.resize(zlen);
  std::string ihdr;
  put_be32(ihdr, static_cast<uint32_t>(W));
  put_be32(ihdr, static_cast<uint32_t>(H));
  ihdr +=
      std::string("\x08\x03\x00\x00\x00", 5);  // 8 bits, palette, deflate, filter 0, no interlace
  std::string out("\x89PNG\r\n\x1a\n", 8);
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "PLTE",
            std::string(reinterpret_cast<const char*>(palette.data()), palette.size()));
  put_chunk(out, "IDAT", z);
  put_chunk(out, "IEND", "");
  return out;
}

void write_png_indexed(const std::string& path, const Tensor& labels, const Palette& palette,
                       int level) {
  write_file(path, encode_png_indexed(labels, palette, level));
}

}  // namespace tcv::data
