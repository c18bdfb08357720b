#include "dist/store_wire.h"

#include <charconv>
#include <system_error>

#include "engine/error.h"

namespace tcv::dist {

void put_u32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_i64(Bytes& b, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

void put_bytes(Bytes& b, const void* data, size_t n) {
  put_u32(b, static_cast<uint32_t>(n));
  const auto* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + n);
}

void put_str(Bytes& b, std::string_view s) {
  put_bytes(b, s.data(), s.size());
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

void WireReader::need(size_t k) const {
  TCV_CHECK(n_ - pos_ >= k, "[TcpStore] malformed message: needs ", k, " more bytes at offset ",
            pos_, " of ", n_);
}

uint8_t WireReader::u8() {
  need(1);
  return p_[pos_++];
}

uint32_t WireReader::u32() {
  need(4);
  const uint32_t v = read_u32(p_ + pos_);
  pos_ += 4;
  return v;
}

int64_t WireReader::i64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
  pos_ += 8;
  return static_cast<int64_t>(v);
}

Bytes WireReader::bytes() {
  const uint32_t n = u32();
  need(n);
  Bytes b(p_ + pos_, p_ + pos_ + n);
  pos_ += n;
  return b;
}

std::string WireReader::str() {
  const uint32_t n = u32();
  need(n);
  std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
  pos_ += n;
  return s;
}

std::vector<std::string> WireReader::strs() {
  const uint32_t n = u32();
  // Every key costs at least its 4-byte length: an absurd count fails here,
  // before anything is allocated for it.
  TCV_CHECK(n <= (n_ - pos_) / 4, "[TcpStore] malformed message: ", n, " keys at offset ", pos_ - 4,
            " cannot fit in the ", n_ - pos_, " bytes left");
  std::vector<std::string> v;
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i) v.push_back(str());
  return v;
}

StoreRequest decode_store_request(const uint8_t* body, size_t n) {
  WireReader r(body, n);
  StoreRequest req;
  const uint8_t op = r.u8();
  req.op = static_cast<StoreOp>(op);
  switch (req.op) {
    case StoreOp::set:
      req.keys.push_back(r.str());
      req.value = r.bytes();
      break;
    case StoreOp::get:
    case StoreOp::del:
      req.keys.push_back(r.str());
      break;
    case StoreOp::add:
      req.keys.push_back(r.str());
      req.delta = r.i64();
      break;
    case StoreOp::check:
    case StoreOp::wait:
      req.keys = r.strs();
      break;
    default:
      TCV_THROW("[TcpStore] malformed message: unknown request op ", static_cast<int>(op),
                " at offset 0");
  }
  TCV_CHECK(r.done(), "[TcpStore] malformed message: ", n - r.offset(),
            " unexpected bytes after the request at offset ", r.offset());
  return req;
}

int64_t store_counter_add(const std::string& key, const Bytes* stored, int64_t delta) {
  int64_t v = 0;
  if (stored) {
    const auto* first = reinterpret_cast<const char*>(stored->data());
    const auto* last = first + stored->size();
    const auto [ptr, ec] = std::from_chars(first, last, v);
    TCV_CHECK(ec == std::errc() && ptr == last && !stored->empty(), "[TcpStore] add('", key,
              "'): the key holds a value that is not a counter (", stored->size(), " bytes)");
  }
  int64_t sum = 0;
  TCV_CHECK(!__builtin_add_overflow(v, delta, &sum), "[TcpStore] add('", key, "'): ", v, " + ",
            delta, " overflows a 64-bit counter");
  return sum;
}

}  // namespace tcv::dist
