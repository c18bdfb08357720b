// The TCP store's wire format on its own: requests decode to what the client
// encoded, malformed bodies are errors naming the offset, and counter updates
// that overflow are errors; the regression inputs fuzz_store found.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "dist/store.h"
#include "dist/store_wire.h"
#include "kernels/base.h"
#include "support/gradcheck.h"
#include "support/run_files.h"

using namespace tcv;
using namespace tcv::dist;
using tcv::testing::error_of;

namespace {

Bytes request(StoreOp op) {
  return Bytes{static_cast<uint8_t>(op)};
}

StoreRequest decode(const Bytes& b) {
  return decode_store_request(b.data(), b.size());
}

using tcv::testing::contains;

}  // namespace

TEST(StoreWire, DecodesWhatTheClientEncodes) {
  Bytes set = request(StoreOp::set);
  put_str(set, "/tcv/rank/0");
  put_bytes(set, "\x00\x01\xff", 3);
  const StoreRequest s = decode(set);
  EXPECT_EQ(s.op, StoreOp::set);
  EXPECT_EQ(s.keys, (std::vector<std::string>{"/tcv/rank/0"}));
  EXPECT_EQ(s.value, (Bytes{0, 1, 255}));

  Bytes add = request(StoreOp::add);
  put_str(add, "n");
  put_i64(add, -5);
  EXPECT_EQ(decode(add).delta, -5);

  Bytes wait = request(StoreOp::wait);
  put_u32(wait, 3);
  for (const char* k : {"a", "", "c"}) put_str(wait, k);
  EXPECT_EQ(decode(wait).keys, (std::vector<std::string>{"a", "", "c"}));

  for (StoreOp op : {StoreOp::get, StoreOp::del}) {
    Bytes b = request(op);
    put_str(b, "k");
    EXPECT_EQ(decode(b).op, op);
  }
}

TEST(StoreWire, MalformedBodiesNameTheOffset) {
  Bytes short_key = request(StoreOp::get);
  put_u32(short_key, 10);  // a 10-byte key with 2 bytes behind it
  short_key.push_back('a');
  short_key.push_back('b');
  EXPECT_TRUE(contains(error_of([&] { decode(short_key); }),
                       "[TcpStore] malformed message: needs 10 more bytes at offset 5 of 7"));

  EXPECT_TRUE(contains(error_of([&] { decode(Bytes{99}); }), "unknown request op 99 at offset 0"));
  EXPECT_TRUE(contains(error_of([&] { decode(Bytes{}); }), "needs 1 more bytes at offset 0"));

  Bytes trailing = request(StoreOp::del);
  put_str(trailing, "k");
  trailing.push_back(7);
  EXPECT_TRUE(contains(error_of([&] { decode(trailing); }),
                       "1 unexpected bytes after the request at offset 6"));

  // A key count that cannot fit fails before anything is allocated for it.
  Bytes many = request(StoreOp::check);
  put_u32(many, 0xffffffffu);
  put_str(many, "k");
  EXPECT_TRUE(contains(error_of([&] { decode(many); }),
                       "4294967295 keys at offset 1 cannot fit in the 5 bytes left"));
}

TEST(StoreWire, CounterOverflowIsAnErrorNamingTheKey) {
  // Found by fuzz_store (UBSan: signed integer overflow in the server's ADD):
  // two ADDs of 3472111959551389558 and 8227913166054633334 to one key.
  Bytes first = request(StoreOp::add), second = request(StoreOp::add);
  put_str(first, "/tcv/barrier/0");
  put_i64(first, 3472111959551389558);
  put_str(second, "/tcv/barrier/0");
  put_i64(second, 8227913166054633334);
  const StoreRequest a = decode(first), b = decode(second);
  const int64_t v = store_counter_add(a.keys[0], nullptr, a.delta);
  const std::string s = std::to_string(v);
  const Bytes stored(s.begin(), s.end());
  EXPECT_TRUE(contains(error_of([&] { store_counter_add(b.keys[0], &stored, b.delta); }),
                       "[TcpStore] add('/tcv/barrier/0'): 3472111959551389558 + "
                       "8227913166054633334 overflows a 64-bit counter"));
  const Bytes lowest = {'-', '9', '2', '2', '3', '3', '7', '2', '0', '3',
                        '6', '8', '5', '4', '7', '7', '5', '8', '0', '8'};
  EXPECT_THROW(store_counter_add("k", &lowest, -1), Error);
  EXPECT_EQ(store_counter_add("k", &lowest, 1), std::numeric_limits<int64_t>::min() + 1);
  const Bytes junk = {'1', 'x'};
  EXPECT_TRUE(contains(error_of([&] { store_counter_add("k", &junk, 1); }),
                       "add('k'): the key holds a value that is not a counter (2 bytes)"));
}

TEST(StoreWire, ServerAnswersAnOverflowingAddWithAnError) {
  // The same through a live server: the client gets the error, the counter
  // keeps its value and the connection stays usable.
  auto server = std::make_unique<TcpStore>("127.0.0.1", 0, TcpStoreOptions{.is_server = true});
  EXPECT_EQ(server->add("n", std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(contains(error_of([&] { server->add("n", 1); }),
                       "add('n'): 9223372036854775807 + 1 "
                       "overflows a 64-bit counter"));
  EXPECT_EQ(server->add("n", -7), std::numeric_limits<int64_t>::max() - 7);
}
