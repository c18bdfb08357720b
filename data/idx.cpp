#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tcv::data {

namespace {

std::string inflate_gzip(const std::string& in, const std::string& path) {
  z_stream zs{};
  // 15 + 16: a gzip header and trailer around a deflate stream with the largest window.
  TCV_CHECK(inflateInit2(&zs, 15 + 16) == Z_OK, path, ": cannot initialise zlib");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  // The gzip trailer stores the size modulo 2^32; a good first guess for IDX files.
  size_t guess = in.size() * 2;
  if (in.size() >= 18) {
    uint32_t isize;
    std::memcpy(&isize, in.data() + in.size() - 4, 4);  // little-endian on x86
    // Deflate expands at most ~1032x, so a larger size means a damaged trailer.
    if (isize > 0 && isize <= in.size() * 1032) guess = isize;
  }
  out.resize(std::max<size_t>(guess, 1024));
  size_t produced = 0;
  int rc = Z_OK;
  while (true) {
    if (produced == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(out.size() - produced);
    rc = inflate(&zs, Z_NO_FLUSH);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended before the stream did
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
  }
  const std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  TCV_CHECK(rc != Z_BUF_ERROR, path, ": truncated gzip stream (ended after ", in.size(),
            " compressed bytes)");
  TCV_CHECK(rc == Z_STREAM_END, path, ": corrupt gzip data",
            msg.empty() ? std::string() : " (" + msg + ")");
  out.resize(produced);
  return out;
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

template <typename T, int N>
T load_be(const unsigned char* p) {
  unsigned char b[N];
  for (int i = 0; i < N; ++i) b[i] = p[N - 1 - i];
  T v;
  std::memcpy(&v, b, N);
  return v;
}

}  // namespace

std::string read_maybe_gzip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TCV_CHECK(f.good(), path, ": cannot open file (", std::strerror(errno), ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  TCV_CHECK(!f.bad(), path, ": read error");
  std::string raw = std::move(ss).str();
  if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f &&
      static_cast<unsigned char>(raw[1]) == 0x8b)
    return inflate_gzip(raw, path);
  return raw;
}

Tensor parse_idx(const std::string& bytes, const std::string& name) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  TCV_CHECK(bytes.size() >= 4, name, ": not an IDX file (", bytes.size(),
            " bytes, shorter than the 4-byte magic)");
  TCV_CHECK(p[0] == 0 && p[1] == 0, name, ": not an IDX file (magic starts with ", int(p[0]), " ",
            int(p[1]), ", expected 0 0)");
  const int code = p[2];
  const int ndim = p[3];
  int elem = 0;
  DType out_dtype = DType::u8;
  switch (code) {
    case 0x08:
      elem = 1;
      out_dtype = DType::u8;
      break;
    case 0x09:
      elem = 1;
      out_dtype = DType::i32;
      break;
    case 0x0B:
      elem = 2;
      out_dtype = DType::i32;
      break;
    case 0x0C:
      elem = 4;
      out_dtype = DType::i32;
      break;
    case 0x0D:
      elem = 4;
      out_dtype = DType::f32;
      break;
    case 0x0E:
      elem = 8;
      out_dtype = DType::f64;
      break;
    default:
      TCV_THROW(name, ": unknown IDX type code 0x", std::hex, code,
                " (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)");
  }
  TCV_CHECK(ndim >= 1 && ndim <= kMaxDims, name, ": IDX file has ", ndim, " dims (expected 1 to ",
            kMaxDims, ")");
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  TCV_CHECK(bytes.size() >= header, name, ": truncated IDX header (", bytes.size(), " bytes, need ",
            header, ")");
  Shape shape(ndim);
  uint64_t count = 1, span = 1;  // span: the product without zero dims (the strides)
  for (int i = 0; i < ndim; ++i) {
    shape[i] = be32(p + 4 + 4 * i);
    count *= static_cast<uint64_t>(shape[i]);
    span *= std::max<uint64_t>(static_cast<uint64_t>(shape[i]), 1);
    TCV_CHECK(span <= (uint64_t(1) << 40), name, ": IDX dims ", shape_str(shape), " are too large");
  }
  const uint64_t need = header + count * elem;
  TCV_CHECK(bytes.size() == need, name, ": IDX dims ", shape_str(shape), " need ", need,
            " bytes, the file has ", bytes.size(),
            bytes.size() < need ? " (truncated)" : " (trailing data)");

  Tensor t = empty(shape, {.dtype = out_dtype});
  const unsigned char* src = p + header;
  const int64_t n = static_cast<int64_t>(count);
  switch (code) {
    case 0x08:
      if (n > 0) std::memcpy(t.data_ptr(), src, n);  // an empty tensor has no memory
      break;
    case 0x09: {
      auto* d = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int8_t>(src[i]);
      break;
    }
    case 0x0B: {
      auto* d = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = load_be<int16_t, 2>(src + 2 * i);
      break;
    }
    case 0x0C: {
      auto* d = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = load_be<int32_t, 4>(src + 4 * i);
      break;
    }
    case 0x0D: {
      auto* d = t.data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = load_be<float, 4>(src + 4 * i);
      break;
    }
    case 0x0E: {
      auto* d = t.data<double>();
      for (int64_t i = 0; i < n; ++i) d[i] = load_be<double, 8>(src + 8 * i);
      break;
    }
    default:
      break;
  }
  return t;
}

Tensor read_idx(const std::string& path) {
  return parse_idx(read_maybe_gzip(path), path);
}

}  // namespace tcv::data
