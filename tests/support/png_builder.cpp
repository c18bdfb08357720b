#include "support/png_builder.h"

#include <stdexcept>

namespace tcv::testing {

namespace {

void put_be32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xFF));
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_be32(out, png_crc32(body));
}

int channels_of(uint8_t color_type) {
  switch (color_type) {
    case 0:
    case 3:
      return 1;
    case 2:
      return 3;
    case 4:
      return 2;
    case 6:
      return 4;
    default:
      throw std::invalid_argument("bad colour type");
  }
}

// One scanline (with its filter byte 0) of the pixels xs of row y.
std::string scanline(const PngSpec& s, uint32_t y, const std::vector<uint32_t>& xs) {
  const int ch = channels_of(s.color_type), d = s.bit_depth;
  std::string line(1, '\0');
  uint32_t acc = 0;
  int bits = 0;
  for (uint32_t x : xs)
    for (int c = 0; c < ch; ++c) {
      const uint16_t v = s.samples[(static_cast<size_t>(y) * s.width + x) * ch + c];
      if (d == 16) {
        line.push_back(static_cast<char>(v >> 8));
        line.push_back(static_cast<char>(v & 0xFF));
      } else if (d == 8) {
        line.push_back(static_cast<char>(v));
      } else {
        acc = (acc << d) | (v & ((1u << d) - 1));
        bits += d;
        if (bits == 8) {
          line.push_back(static_cast<char>(acc));
          acc = 0;
          bits = 0;
        }
      }
    }
  if (bits > 0) line.push_back(static_cast<char>(acc << (8 - bits)));
  return line;
}

uint32_t adler32(const std::string& data) {
  uint32_t a = 1, b = 0;
  for (unsigned char c : data) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

}  // namespace

uint32_t png_crc32(const std::string& data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

std::string build_png(const PngSpec& s) {
  std::string raw;
  if (!s.interlaced) {
    std::vector<uint32_t> xs(s.width);
    for (uint32_t x = 0; x < s.width; ++x) xs[x] = x;
    for (uint32_t y = 0; y < s.height; ++y) raw += scanline(s, y, xs);
  } else {
    static const uint32_t x0[7] = {0, 4, 0, 2, 0, 1, 0}, dx[7] = {8, 8, 4, 4, 2, 2, 1};
    static const uint32_t y0[7] = {0, 0, 4, 0, 2, 0, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
    for (int p = 0; p < 7; ++p) {
      std::vector<uint32_t> xs;
      for (uint32_t x = x0[p]; x < s.width; x += dx[p]) xs.push_back(x);
      if (xs.empty()) continue;
      for (uint32_t y = y0[p]; y < s.height; y += dy[p]) raw += scanline(s, y, xs);
    }
  }
  // zlib: header, stored blocks of at most 65535 bytes, Adler-32.
  std::string z("\x78\x01", 2);
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(65535, raw.size() - at);
    const bool last = at + n == raw.size();
    z.push_back(static_cast<char>(last ? 1 : 0));
    z.push_back(static_cast<char>(n & 0xFF));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xFF));
    z.push_back(static_cast<char>((~n >> 8) & 0xFF));
    z.append(raw, at, n);
    at += n;
  } while (at < raw.size());
  put_be32(z, adler32(raw));

  std::string ihdr;
  put_be32(ihdr, s.width);
  put_be32(ihdr, s.height);
  ihdr.push_back(static_cast<char>(s.bit_depth));
  ihdr.push_back(static_cast<char>(s.color_type));
  ihdr.push_back(0);
  ihdr.push_back(0);
  ihdr.push_back(static_cast<char>(s.interlaced ? 1 : 0));
  std::string out("\x89PNG\r\n\x1a\n", 8);
  put_chunk(out, "IHDR", ihdr);
  if (s.color_type == 3) {
    std::string plte;
    if (s.palette.empty()) {
      const int n = 1 << std::min<int>(s.bit_depth, 8);
      for (int i = 0; i < n; ++i) plte += std::string(3, static_cast<char>(i * 255 / (n - 1)));
    } else {
      plte.assign(s.palette.begin(), s.palette.end());
    }
    put_chunk(out, "PLTE", plte);
  }
  put_chunk(out, "IDAT", z);
  put_chunk(out, "IEND", "");
  return out;
}

std::string png_claiming(std::string png, uint32_t width, uint32_t height) {
  // Signature (8), IHDR's length (4) and type (4), then width and height.
  if (png.size() < 33 || png.compare(12, 4, "IHDR") != 0)
    throw std::runtime_error("png_claiming: not a PNG starting with IHDR");
  auto put32 = [&](size_t at, uint32_t v) {
    for (size_t k = 0; k < 4; ++k) png[at + k] = static_cast<char>((v >> (24 - 8 * k)) & 0xFF);
  };
  put32(16, width);
  put32(20, height);
  put32(29, png_crc32(png.substr(12, 17)));  // over the type and the 13 data bytes
  return png;
}

}  // namespace tcv::testing
