// A TCP key-value store for rendezvous, in the manner of PyTorch's TCPStore:
// rank 0 hosts the server, every rank (rank 0 included) talks to it as a client.
// Values are arbitrary bytes, so the NCCL unique id and the Gloo bootstrap can
// travel through it.
//
// Wire protocol (all integers little-endian): every message is a frame
//   u32 body_length | body
// A request body is u8 op followed by its fields; a string field is
// u32 length | bytes, a count is u32, a number is i64:
//   SET    key value          -> OK
//   GET    key                -> OK value        (answered once the key exists)
//   ADD    key i64 delta      -> OK i64 new_value
//   CHECK  u32 n key*n        -> OK u8 all_exist
//   WAIT   u32 n key*n        -> OK              (answered once all keys exist)
//   DELETE key                -> OK u8 existed
// A reply body is u8 status (0 OK, 1 error) followed by the fields above, or by
// the error message.
//
// Blocking calls time out on the client: after a timeout the client drops its
// connection (the server forgets the pending request) and reconnects on the
// next call. A server that goes away closes the connection, so a client blocked
// in get/wait fails with an error at once instead of waiting for its timeout.
// While a call blocks, the client says what it waits for every
// wait_log_interval (dist/log.h).
//
// The server protects itself from clients that are not tcv's: a frame that
// announces more than max_frame_bytes closes its connection before anything is
// buffered; a connection that sends part of a frame and then nothing for
// stalled_frame_timeout, or nothing at all for silent_connection_timeout, is
// closed; so is one that leaves more than 2 x max_frame_bytes of replies
// unread. Each is logged with the peer's address.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dist/env.h"
#include "engine/error.h"

namespace tcv::dist {

class StoreServer;

/// Bytes stored under a key.
using Bytes = std::vector<uint8_t>;

/// A store call that ran out of time; the client dropped its connection and
/// reconnects on the next call.
class StoreTimeoutError : public Error {
 public:
  using Error::Error;
};

/// The server closed or reset a connection that was up (it exited, or its
/// machine dropped the connection).
class StoreLostError : public Error {
 public:
  using Error::Error;
};

/// How a TcpStore is set up.
struct TcpStoreOptions {
  /// True on the rank that hosts the server (rank 0); it also connects as a client.
  bool is_server = false;
  /// Processes taking part; barrier() waits for this many arrivals.
  int world_size = 1;
  /// Limit for connecting (with retries) and the default limit of get/wait/barrier.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// How often a blocked call (connect, get, wait, barrier) logs what it waits
  /// for; 0 = never.
  std::chrono::milliseconds wait_log_interval{std::chrono::seconds(30)};
  /// This process's rank, named in those lines (-1: not named).
  int rank = -1;
  /// Largest frame (request or reply, 4-byte length excluded) either side
  /// accepts; a set() of a larger value fails on the client.
  uint32_t max_frame_bytes = 64u << 20;
  /// Server: a connection holding part of a frame with no byte for this long is closed.
  std::chrono::milliseconds stalled_frame_timeout{std::chrono::seconds(30)};
  /// Server: a connection that sends nothing at all for this long after
  /// connecting is closed (a client's first call on a connection the server
  /// closed this way reconnects once, transparently).
  std::chrono::milliseconds silent_connection_timeout{std::chrono::seconds(60)};
  /// Every key this client names is stored under key_prefix + key, so
  /// several jobs (or a launcher's restart rounds) share one server without
  /// seeing each other's keys, as PyTorch's PrefixStore does.
  std::string key_prefix{};
  /// Who hosts the server, named in connection errors and wait lines.
  std::string server_name = "rank 0";
  /// Who this client is in those lines ("": "rank <rank>").
  std::string client_name{};
};

/// A client of rank 0's key-value store, and on rank 0 the server too.
/// Thread-safe: calls from several threads are serialised on one connection.
class TcpStore {
 public:
  /// Connects to host:port, retrying until options.timeout passes. With
  /// is_server, first listens on host:port (port 0: the OS picks a free port,
  /// see port()). Throws tcv::Error naming host:port when listening fails or no
  /// server answers within the timeout.
  TcpStore(std::string host, int port, TcpStoreOptions options = {});
  /// Closes the connection; on the server rank, stops the server, which closes
  /// every client's connection.
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  /// Stores value under key, replacing any earlier value.
  void set(const std::string& key, const Bytes& value);
  void set(const std::string& key, std::string_view value);
  /// The value of key, waiting until it is set or the timeout passes.
  /// `waiting_for` says in the periodic log lines what the key stands for
  /// (e.g. "rank 1 to join the gloo group"); "" names the key alone.
  Bytes get(const std::string& key);
  Bytes get(const std::string& key, std::chrono::milliseconds timeout,
            const std::string& waiting_for = "");
  /// get() as a string.
  std::string get_string(const std::string& key);
  /// Adds delta to the counter under key (0 when absent; kept as decimal text,
  /// so get() reads it as e.g. "3") and returns the new value. Atomic across clients.
  int64_t add(const std::string& key, int64_t delta);
  /// True when every key exists; never blocks on the keys.
  bool check(const std::vector<std::string>& keys);
  /// Waits until every key exists or the timeout passes (waiting_for: as in get()).
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
            const std::string& waiting_for = "");
  /// Removes key; true when it existed.
  bool delete_key(const std::string& key);
  /// Returns once world_size processes have called barrier() the same number of
  /// times (every rank must call it in the same order), or throws after the timeout.
  void barrier();
  void barrier(std::chrono::milliseconds timeout);

  const std::string& host() const { return host_; }
  /// The server's port (the OS's choice when constructed with port 0).
  int port() const { return port_; }
  int world_size() const { return options_.world_size; }
  const TcpStoreOptions& options() const { return options_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  void set_timeout(std::chrono::milliseconds t) { options_.timeout = t; }

 private:
  using Clock = std::chrono::steady_clock;
  // Sends one request and reads its reply body (status byte stripped) before
  // `deadline`; `what` describes the call in error messages, `waiting_for` in
  // the periodic log lines.
  Bytes roundtrip(const Bytes& request, Clock::time_point deadline, const std::string& what,
                  std::chrono::milliseconds timeout, const std::string& waiting_for = "");
  // One request and its reply on the current connection (roundtrip's body).
  Bytes exchange(const Bytes& request, Clock::time_point deadline, const std::string& what,
                 std::chrono::milliseconds timeout, const std::string& waiting_for);
  void connect(Clock::time_point deadline);
  void disconnect();
  std::string where() const;
  std::string who() const;
  std::string full_key(const std::string& key) const;

  std::string host_;
  int port_ = 0;
  TcpStoreOptions options_;
  std::unique_ptr<StoreServer> server_;
  std::mutex mu_;
  int fd_ = -1;
  bool was_lost_ = false;  // the server closed the last connection
  bool used_ = false;      // a reply came on the current connection
  int64_t barrier_generation_ = 0;
};

/// The job's store for a process at `env`: rank 0 hosts it and every rank
/// connects, or, when the launcher hosts it (env.store_prefix set, as tcv-run
/// does), every rank is a client whose keys live under the prefix. `options`
/// gives the timeouts; is_server, world_size, rank and key_prefix are set here.
std::shared_ptr<TcpStore> connect_job_store(const DistEnv& env, TcpStoreOptions options = {});

}  // namespace tcv::dist
