#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/store.h"
#include "kernels/base.h"

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

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
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
