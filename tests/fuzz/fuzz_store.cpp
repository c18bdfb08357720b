// The TCP store's requests as the server reads them off a connection: frames
// (u32 length, body) decoded and applied to a key-value map the way the server
// applies them.
#include <cstdint>
#include <map>
#include <string>

#include "dist/store_wire.h"
#include "fuzz_support.h"
#include "kernels/base.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tcv::dist::StoreOp;
  std::map<std::string, tcv::dist::Bytes> store;
  size_t pos = 0;
  while (size - pos >= 4) {
    const uint32_t len = tcv::dist::read_u32(data + pos);
    if (len == 0 || len > size - pos - 4) break;  // the server waits for more, or drops
    const uint8_t* body = data + pos + 4;
    pos += 4 + len;
    tcv::dist::StoreRequest req;
    try {
      req = tcv::dist::decode_store_request(body, len);
    } catch (const tcv::Error&) {
      break;  // the server drops the connection
    }
    TCV_FUZZ_EXPECT(!req.keys.empty() || req.op == StoreOp::check || req.op == StoreOp::wait);
    switch (req.op) {
      case StoreOp::set:
        store[req.keys[0]] = req.value;
        break;
      case StoreOp::add: {
        auto it = store.find(req.keys[0]);
        try {
          const int64_t v = tcv::dist::store_counter_add(
              req.keys[0], it == store.end() ? nullptr : &it->second, req.delta);
          const std::string s = std::to_string(v);
          store[req.keys[0]] = tcv::dist::Bytes(s.begin(), s.end());
        } catch (const tcv::Error&) {
        }
        break;
      }
      case StoreOp::del:
        store.erase(req.keys[0]);
        break;
      default:
        break;
    }
  }
  return 0;
}
