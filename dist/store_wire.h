// The TCP store's wire format (see dist/store.h for the protocol): encoding and
// bounds-checked decoding of message bodies, without sockets, so the decoder
// that reads bytes from the network can be tested and fuzzed on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tcv::dist {

/// Bytes stored under a key.
using Bytes = std::vector<uint8_t>;

enum class StoreOp : uint8_t { set = 1, get = 2, add = 3, check = 4, wait = 5, del = 6 };
enum class StoreStatus : uint8_t { ok = 0, error = 1 };

void put_u32(Bytes& b, uint32_t v);
void put_i64(Bytes& b, int64_t v);
/// u32 length, then the bytes.
void put_bytes(Bytes& b, const void* data, size_t n);
void put_str(Bytes& b, std::string_view s);
/// A little-endian u32 (a frame length).
uint32_t read_u32(const uint8_t* p);

/// Bounds-checked reading of one message body: reading past its end is a
/// tcv::Error "[TcpStore] malformed message: ..." naming the offset.
class WireReader {
 public:
  WireReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  /// u32 length, then that many bytes.
  Bytes bytes();
  std::string str();
  /// u32 count, then that many strings.
  std::vector<std::string> strs();
  bool done() const { return pos_ == n_; }
  size_t offset() const { return pos_; }

 private:
  void need(size_t k) const;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

/// One decoded request.
struct StoreRequest {
  StoreOp op = StoreOp::set;
  std::vector<std::string> keys;  ///< one key, except CHECK and WAIT (any number)
  Bytes value;                    ///< SET
  int64_t delta = 0;              ///< ADD
};

/// Decodes a request body (a frame without its length). A short body, an
/// unknown op or bytes after the last field are a tcv::Error naming the offset.
StoreRequest decode_store_request(const uint8_t* body, size_t n);

/// What ADD makes of the value under `key`: the counter `stored` holds
/// (decimal text; nullptr when the key does not exist, which counts as 0) plus
/// `delta`. tcv::Error naming the key when the value is no counter or the sum
/// overflows int64.
int64_t store_counter_add(const std::string& key, const Bytes* stored, int64_t delta);

}  // namespace tcv::dist
