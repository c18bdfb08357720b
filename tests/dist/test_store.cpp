#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/log.h"
#include "dist/store.h"
#include "dist/store_wire.h"
#include "kernels/base.h"
#include "support/run_files.h"

using namespace tcv;
using namespace tcv::dist;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kHost = "127.0.0.1";

// A rank-0 store on an OS-chosen port of 127.0.0.1.
std::unique_ptr<TcpStore> make_server(int world_size, std::chrono::milliseconds timeout = 5s) {
  return std::make_unique<TcpStore>(
      kHost, 0, TcpStoreOptions{.is_server = true, .world_size = world_size, .timeout = timeout});
}

TcpStore make_client(int port, int world_size, std::chrono::milliseconds timeout = 5s) {
  return TcpStore(kHost, port, {.is_server = false, .world_size = world_size, .timeout = timeout});
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using tcv::testing::contains;

// Collects dist::log_line() output while alive.
class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    });
  }
  ~LogCapture() { set_log_sink({}); }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::string all() {
    std::string s;
    for (const auto& l : lines()) s += l + "\n";
    return s;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// A plain TCP connection to 127.0.0.1:port (not a store client).
int raw_connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Resident memory of this process, in MiB.
double rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

// True when the server closed fd within `within` (EOF or reset on read).
bool closed_by_server(int fd, std::chrono::milliseconds within) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(within.count())) != 1) return false;
  char c;
  return recv(fd, &c, 1, 0) <= 0;
}

}  // namespace

TEST(TcpStore, RanksExchangeValuesCountersAndBarrier) {
  // Rank 0 hosts the server and is a client too; ranks 1..3 are threads with their own client.
  constexpr int kWorld = 4;
  auto server = make_server(kWorld);
  const int port = server->port();
  ASSERT_GT(port, 0);

  std::vector<std::string> errors(kWorld);
  std::vector<std::vector<std::string>> seen(kWorld);
  std::vector<int64_t> added(kWorld);
  auto rank_main = [&](int rank, TcpStore& store) {
    try {
      // Arbitrary bytes, including zeros.
      const Bytes mine{static_cast<uint8_t>(rank), 0, 255, static_cast<uint8_t>('a' + rank)};
      store.set("value/" + std::to_string(rank), mine);
      added[rank] = store.add("counter", rank + 1);
      std::vector<std::string> keys;
      for (int r = 0; r < kWorld; ++r) keys.push_back("value/" + std::to_string(r));
      store.wait(keys);
      EXPECT_TRUE(store.check(keys));
      for (int r = 0; r < kWorld; ++r) {
        const Bytes b = store.get(keys[r]);
        seen[rank].push_back(std::string(b.begin(), b.end()));
      }
      store.barrier();
      // After the barrier every rank's add has happened: 1 + 2 + 3 + 4.
      EXPECT_EQ(store.add("counter", 0), 10);
      store.barrier();
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      TcpStore client = make_client(port, kWorld);
      rank_main(r, client);
    });
  }
  rank_main(0, *server);
  for (auto& t : threads) t.join();

  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(seen[r].size(), static_cast<size_t>(kWorld));
    for (int q = 0; q < kWorld; ++q) {
      const std::string want{static_cast<char>(q), '\0', static_cast<char>(255),
                             static_cast<char>('a' + q)};
      EXPECT_EQ(seen[r][q], want) << "rank " << r << " reading rank " << q;
    }
  }
  // The adds were atomic: the values returned are distinct partial sums ending at 10.
  std::vector<int64_t> sorted = added;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted.back(), 10);
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_LT(sorted[i - 1], sorted[i]);
  EXPECT_EQ(server->get_string("counter"), "10");  // counters are decimal text
}

// Clients with a key prefix (tcv-run's rounds) share one server without
// seeing each other's keys, counters or barriers.
TEST(TcpStore, KeyPrefixesKeepClientsApart) {
  auto server = make_server(1);
  TcpStoreOptions a{.world_size = 1, .timeout = 5s, .key_prefix = "/r0/"};
  TcpStoreOptions b{.world_size = 1, .timeout = 5s, .key_prefix = "/r1/"};
  TcpStore r0("127.0.0.1", server->port(), a), r1("127.0.0.1", server->port(), b);
  r0.set("k", std::string_view("zero"));
  r1.set("k", std::string_view("one"));
  EXPECT_EQ(r0.get_string("k"), "zero");
  EXPECT_EQ(r1.get_string("k"), "one");
  EXPECT_EQ(server->get_string("/r0/k"), "zero");  // the server holds the full keys
  EXPECT_EQ(r0.add("n", 2), 2);
  EXPECT_EQ(r1.add("n", 5), 5);
  EXPECT_TRUE(r1.delete_key("k"));
  EXPECT_FALSE(r1.check({"k"}));
  EXPECT_TRUE(r0.check({"k"}));
  r0.barrier();  // world 1 each: their own generation counters
  r1.barrier();
  EXPECT_TRUE(server->check({"/r0/tcv/barrier/0/done", "/r1/tcv/barrier/0/done"}));
}

TEST(TcpStore, GetBlocksUntilAnotherRankSets) {
  auto server = make_server(2);
  TcpStore client = make_client(server->port(), 2);
  EXPECT_FALSE(client.check({"late"}));
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    server->set("late", std::string_view("here"));
  });
  const auto t0 = Clock::now();
  EXPECT_EQ(client.get_string("late"), "here");
  EXPECT_GE(ms_since(t0), 50.0);
  setter.join();
  EXPECT_TRUE(client.check({"late"}));
  EXPECT_FALSE(client.check({"late", "other"}));
  EXPECT_TRUE(client.delete_key("late"));
  EXPECT_FALSE(client.delete_key("late"));
  EXPECT_FALSE(client.check({"late"}));
}

TEST(TcpStore, LargeValuesRoundTrip) {
  auto server = make_server(1);
  Bytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  server->set("big", big);
  TcpStore client = make_client(server->port(), 1);
  EXPECT_EQ(client.get("big"), big);
  server->set("big", Bytes{});  // an empty value still exists
  EXPECT_TRUE(client.check({"big"}));
  EXPECT_TRUE(client.get("big").empty());
}

TEST(TcpStore, GetTimeoutNamesKeyAndTimeoutThenStoreStillWorks) {
  auto server = make_server(2);
  TcpStore client = make_client(server->port(), 2);
  const auto t0 = Clock::now();
  try {
    client.get("missing/key", 200ms);
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "get('missing/key') timed out after 200 ms")) << msg;
    EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server->port()))) << msg;
  }
  const double waited = ms_since(t0);
  EXPECT_GE(waited, 190.0);
  EXPECT_LT(waited, 2000.0);
  try {
    client.wait({"a", "b"}, 100ms);
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "wait(['a', 'b']) timed out after 100 ms")) << e.what();
  }
  // The client reconnects; the stale requests were dropped with the old connection.
  server->set("missing/key", std::string_view("now"));
  EXPECT_EQ(client.get_string("missing/key"), "now");
  EXPECT_EQ(client.add("n", 5), 5);
}

TEST(TcpStore, AddOnNonCounterNamesKey) {
  auto server = make_server(1);
  server->set("text", std::string_view("abc"));
  try {
    server->add("text", 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "add('text'): the key holds a value that is not a counter"))
        << e.what();
  }
  EXPECT_EQ(server->add("fresh", -3), -3);  // the connection is still good
}

TEST(TcpStore, ConnectToNothingFailsWithinTimeout) {
  // A bound socket that never listens holds the port, so connecting is refused.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  const auto t0 = Clock::now();
  try {
    make_client(port, 2, 300ms);
    FAIL() << "expected a connection error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "could not connect to the store at 127.0.0.1:" +
                                  std::to_string(port) + " within 300 ms"))
        << msg;
    EXPECT_TRUE(contains(msg, "refused")) << msg;
  }
  const double waited = ms_since(t0);
  EXPECT_GE(waited, 290.0);  // it retried until the timeout
  EXPECT_LT(waited, 2000.0);
  close(fd);
}

TEST(TcpStore, ListeningOnATakenPortNamesIt) {
  auto first = make_server(1);
  try {
    TcpStore second(kHost, first->port(), {.is_server = true, .world_size = 1, .timeout = 1s});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "cannot listen on 127.0.0.1:" + std::to_string(first->port())))
        << e.what();
  }
}

TEST(TcpStore, ServerShutdownFailsBlockedClients) {
  auto server = make_server(3);
  const int port = server->port();
  std::vector<std::string> errors(2);
  std::vector<double> waited(2);
  std::atomic<int> connected{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      TcpStore client = make_client(port, 3, 10s);
      ++connected;
      const auto t0 = Clock::now();
      try {
        if (i == 0) {
          client.get("never");
        } else {
          client.barrier();  // rank 0 never arrives
        }
      } catch (const Error& e) {
        errors[i] = e.what();
      }
      waited[i] = ms_since(t0);
    });
  }
  while (connected < 2) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(200ms);  // let both block on the server
  server.reset();                      // rank 0 exits
  for (auto& t : threads) t.join();
  EXPECT_TRUE(contains(errors[0], "lost the connection to the store at 127.0.0.1:" +
                                      std::to_string(port) + " during get('never')"))
      << errors[0];
  EXPECT_TRUE(contains(errors[1], "barrier")) << errors[1];
  for (int i = 0; i < 2; ++i)
    EXPECT_LT(waited[i], 5000.0) << "client " << i;  // not the 10 s timeout
}

TEST(TcpStore, KilledServerProcessFailsBlockedClient) {
  // Rank 0 in its own process, killed with SIGKILL while this process waits on it.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    try {
      auto server = make_server(2);
      server->set("from/rank0", std::string_view("hello"));
      const int port = server->port();
      if (write(fds[1], &port, sizeof(port)) != sizeof(port)) _exit(2);
      sleep(30);  // killed long before this
    } catch (...) {
    }
    _exit(1);
  }
  close(fds[1]);
  int port = 0;
  ASSERT_EQ(read(fds[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  close(fds[0]);

  TcpStore client = make_client(port, 2, 10s);
  EXPECT_EQ(client.get_string("from/rank0"), "hello");
  std::thread killer([pid] {
    std::this_thread::sleep_for(200ms);
    kill(pid, SIGKILL);
  });
  const auto t0 = Clock::now();
  std::string err;
  try {
    client.get("never");
  } catch (const Error& e) {
    err = e.what();
  }
  killer.join();
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(contains(err, "lost the connection to the store at 127.0.0.1:" +
                                std::to_string(port) + " during get('never')"))
      << err;
  EXPECT_LT(ms_since(t0), 5000.0);  // failed when the server died, not at the 10 s timeout
}

TEST(TcpStore, BarrierTimeoutCountsArrivals) {
  auto server = make_server(3, 300ms);
  TcpStore client = make_client(server->port(), 3, 300ms);
  std::string err;
  std::thread t([&] {
    try {
      client.barrier();
    } catch (const Error& e) {
      err = e.what();
    }
  });
  try {
    server->barrier();
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "barrier #0 timed out after 300 ms: 2 of 3 ranks arrived"))
        << e.what();
  }
  t.join();
  EXPECT_TRUE(contains(err, "barrier #0 timed out after 300 ms: 2 of 3 ranks arrived")) << err;
}

TEST(TcpStore, RejectsBadArguments) {
  EXPECT_THROW(TcpStore(kHost, 0, {.is_server = false}), Error);
  EXPECT_THROW(TcpStore(kHost, 70000, {.is_server = true}), Error);
  EXPECT_THROW(TcpStore(kHost, 0, {.is_server = true, .world_size = 0}), Error);
}

// A client that announces a 1 GiB frame and keeps sending is cut off after the
// 4-byte header: nothing of it is buffered, and the store keeps serving.
TEST(TcpStore, OversizedFrameClosesTheConnectionBeforeBuffering) {
  LogCapture log;
  auto server = make_server(1);
  const double rss0 = rss_mib();
  const int fd = raw_connect(server->port());
  ASSERT_GE(fd, 0);
  const uint8_t head[4] = {0, 0, 0, 0x40};  // 1 GiB, little-endian
  ASSERT_EQ(send(fd, head, 4, MSG_NOSIGNAL), 4);
  std::vector<uint8_t> chunk(1 << 20, 0x5a);
  size_t sent = 0;
  const auto t0 = Clock::now();
  while (sent < (size_t{200} << 20) && ms_since(t0) < 10000) {
    const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // reset by the server
    sent += static_cast<size_t>(n);
  }
  const double grown = rss_mib() - rss0;
  close(fd);
  std::printf("sent %.1f MiB before the server cut the connection; RSS grew %.1f MiB\n",
              static_cast<double>(sent) / (1 << 20), grown);
  EXPECT_LT(sent, size_t{64} << 20) << "the server kept reading an oversized frame";
  EXPECT_LT(grown, 32.0) << "the server buffered the oversized frame";
  EXPECT_TRUE(contains(log.all(), "announced a frame of 1073741824 bytes (limit 67108864)"))
      << log.all();
  EXPECT_TRUE(contains(log.all(), "connection from 127.0.0.1:")) << log.all();
  TcpStore client = make_client(server->port(), 1);
  client.set("k", std::string_view("v"));
  EXPECT_EQ(client.get_string("k"), "v");
}

// A value over the frame limit fails on the client, naming the limit.
TEST(TcpStore, ValueOverTheFrameLimitFailsOnTheClient) {
  TcpStore server(kHost, 0, {.is_server = true, .world_size = 1, .max_frame_bytes = 1 << 20});
  try {
    server.set("big", Bytes(2 << 20));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "over the store's frame limit of 1048576 bytes")) << e.what();
  }
  server.set("small", Bytes(1000));  // the connection is still good
  EXPECT_EQ(server.get("small").size(), 1000u);
}

// A client that sends part of a frame and stalls is dropped after
// stalled_frame_timeout; other clients are served meanwhile.
TEST(TcpStore, StalledPartialFrameIsDropped) {
  LogCapture log;
  TcpStore server(kHost, 0, {.is_server = true, .world_size = 1, .stalled_frame_timeout = 300ms});
  const int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  const uint8_t part[14] = {100, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 10 of 100 bytes
  ASSERT_EQ(send(fd, part, sizeof(part), MSG_NOSIGNAL), 14);
  const auto t0 = Clock::now();
  TcpStore client = make_client(server.port(), 1);
  client.set("k", std::string_view("v"));  // not blocked by the stalled one
  EXPECT_EQ(client.get_string("k"), "v");
  const bool dropped = closed_by_server(fd, 3000ms);
  const double waited = ms_since(t0);
  close(fd);
  std::printf("the stalled connection was dropped after %.0f ms\n", waited);
  EXPECT_TRUE(dropped) << "a half-open connection stays open forever";
  EXPECT_GE(waited, 250.0);
  EXPECT_LT(waited, 2000.0);
  EXPECT_TRUE(contains(log.all(), "it sent 10 of the 100 bytes of a frame, then nothing for 0.3 s"))
      << log.all();
  // An idle connection between requests is not a stalled frame.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(client.get_string("k"), "v");
}

// A client that asks for a large value again and again without reading the
// replies: the server closes it once 2 x max_frame_bytes of replies are
// queued, instead of holding them all (40 GETs of 32 MiB grew the server by
// 800 MiB before).
TEST(TcpStore, ClientThatDoesNotReadItsRepliesIsClosed) {
  LogCapture log;
  TcpStore server(kHost, 0, {.is_server = true, .world_size = 1, .max_frame_bytes = 4u << 20});
  server.set("big", Bytes(3u << 20, 7));
  const int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  Bytes get{static_cast<uint8_t>(StoreOp::get)};
  put_str(get, "big");
  Bytes frame;
  put_u32(frame, static_cast<uint32_t>(get.size()));
  frame.insert(frame.end(), get.begin(), get.end());
  const double before = rss_mib();
  for (int i = 0; i < 40; ++i)
    if (send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) < 0) break;
  std::this_thread::sleep_for(500ms);  // not reading
  // Then read what was sent until the server closes (or 5 s pass).
  bool dropped = false;
  size_t got = 0;
  const auto t0 = Clock::now();
  std::vector<char> sink(1 << 16);
  while (!dropped && Clock::now() - t0 < 5000ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    const ssize_t n = recv(fd, sink.data(), sink.size(), 0);
    dropped = n <= 0;
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::printf("read %zu bytes of replies before the server closed\n", got);
  close(fd);
  const double grew = rss_mib() - before;
  std::printf("40 unread GETs of 3 MiB: closed %d, the process grew %.0f MiB\n", dropped, grew);
  EXPECT_TRUE(dropped);
  EXPECT_TRUE(contains(log.all(), "bytes of replies queued that it does not read (limit 8388608)"))
      << log.all();
  EXPECT_LT(grew, 40.0);  // at most ~3 replies held, not 40 (120 MiB)
  // The server still serves.
  TcpStore client = make_client(server.port(), 1);
  EXPECT_EQ(client.get("big").size(), 3u << 20);
}

// A connection that never sends a byte is closed after
// silent_connection_timeout; a client whose connection was closed that way
// before its first call reconnects transparently.
TEST(TcpStore, SilentConnectionsAreClosedAndAFreshClientReconnects) {
  LogCapture log;
  TcpStore server(kHost, 0,
                  {.is_server = true, .world_size = 1, .silent_connection_timeout = 300ms});
  const int fd = raw_connect(server.port());
  ASSERT_GE(fd, 0);
  TcpStore client = make_client(server.port(), 1);  // connected, nothing sent yet
  EXPECT_TRUE(closed_by_server(fd, 3000ms));
  close(fd);
  std::this_thread::sleep_for(200ms);  // the client's connection is closed too
  EXPECT_TRUE(contains(log.all(), "it sent nothing for 0.3 s after connecting")) << log.all();
  client.set("k", std::string_view("v"));
  EXPECT_EQ(client.get_string("k"), "v");
}

// A blocked get says what it waits for at every wait_log_interval, and the
// timeout error says it too.
TEST(TcpStore, BlockedGetSaysWhatItWaitsFor) {
  LogCapture log;
  auto server = make_server(2);
  TcpStore client(kHost, server->port(),
                  {.world_size = 2, .timeout = 5s, .wait_log_interval = 100ms, .rank = 1});
  try {
    client.get("addr/0", 450ms, "rank 0 to publish its address");
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "timed out after 450 ms waiting for rank 0 to publish its "
                         "address"))
        << e.what();
  }
  const auto lines = log.lines();
  EXPECT_GE(lines.size(), 3u) << log.all();
  EXPECT_LE(lines.size(), 5u) << log.all();
  EXPECT_TRUE(contains(log.all(),
                       "[TcpStore] rank 1 is still waiting for rank 0 to publish its "
                       "address (get('addr/0')) after "))
      << log.all();
}

// Connecting to a store that is not there yet says so at intervals.
TEST(TcpStore, ConnectingSaysWhatItWaitsFor) {
  LogCapture log;
  const int port = [] {
    TcpStore probe(kHost, 0, {.is_server = true});
    return probe.port();
  }();
  EXPECT_THROW(TcpStore(kHost, port,
                        {.world_size = 2, .timeout = 400ms, .wait_log_interval = 100ms, .rank = 1}),
               Error);
  EXPECT_GE(log.lines().size(), 2u) << log.all();
  EXPECT_TRUE(contains(log.all(), "rank 1 is still waiting for the store at 127.0.0.1:" +
                                      std::to_string(port) + " (hosted by rank 0)"))
      << log.all();
}
