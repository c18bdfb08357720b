#include "dist/store.h"
#include "dist/store_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <exception>
#include <list>
#include <map>
#include <system_error>

#include "dist/log.h"
#include "dist/net.h"
#include "engine/error.h"

namespace tcv::dist {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using Op = StoreOp;
using Status = StoreStatus;

using StoreTimeout = StoreTimeoutError;

std::string errno_str(int err) {
  return std::system_category().message(err);
}

std::string keys_str(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) s += ", ";
    s.append("'").append(keys[i]).append("'");
  }
  return s + "]";
}

int64_t ms_left(Clock::time_point deadline) {
  return std::max<int64_t>(
      0, std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// "host:port" of an accepted connection's peer.
std::string peer_name(const sockaddr_storage& ss) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&ss), sizeof(ss), host, sizeof(host), port,
              sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

std::string seconds_str(milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace

// ---- server -------------------------------------------------------------------

/// The store itself: one thread polling the listening socket and every client
/// connection, so requests are applied one at a time without locks.
class StoreServer {
 public:
  StoreServer(const std::string& host, int port, uint32_t max_frame, milliseconds stalled_timeout,
              milliseconds silent_timeout)
      : max_frame_(max_frame), stalled_timeout_(stalled_timeout), silent_timeout_(silent_timeout) {
    // A loopback host keeps the store on this machine; any other listens on
    // every address (IPv6 and IPv4), as PyTorch's TCPStore does: MASTER_ADDR
    // may be a name that resolves to 127.0.0.1 here and to a real address on
    // the other machines, or an address this machine only reaches through NAT.
    const bool local_only = is_loopback_address(host);
    std::string err = "no address";
    if (local_only) {
      listen_on(host.c_str(), AF_UNSPEC, port, false, err);
    } else if (!listen_on(nullptr, AF_INET6, port, true, err)) {  // no IPv6 here
      listen_on(nullptr, AF_INET, port, false, err);
    }
    TCV_CHECK(listen_fd_ >= 0, "[TcpStore] cannot listen on ", host, ":", port, ": ", err);

    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    if (pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) {
      const int e = errno;
      close(listen_fd_);
      TCV_THROW("[TcpStore] cannot create the server's wake-up pipe: ", errno_str(e));
    }
    thread_ = std::thread([this] { run(); });
  }

  ~StoreServer() {
    const char c = 0;
    while (write(wake_[1], &c, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
    for (Conn& c : conns_) close(c.fd);
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

  int port() const { return port_; }

 private:
  // Listens on the first address of `host` (null: every address) in `family`
  // that binds; false with `err` set when none does.
  bool listen_on(const char* host, int family, int port, bool dual_stack, std::string& err) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    const std::string port_s = std::to_string(port);
    const int gai = getaddrinfo(host, port_s.c_str(), &hints, &res);
    if (gai != 0) {
      err = gai_strerror(gai);
      return false;
    }
    for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        err = errno_str(errno);
        continue;
      }
      int one = 1, zero = 0;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (dual_stack) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        err = errno_str(errno);
        close(fd);
        continue;
      }
      listen_fd_ = fd;
    }
    freeaddrinfo(res);
    return listen_fd_ >= 0;
  }

  struct Conn {
    int fd = -1;
    std::string peer;           // host:port, for the log
    Clock::time_point last_rx;  // when the last byte arrived
    bool heard = false;         // any byte yet
    Bytes in;
    Bytes out;
    size_t out_pos = 0;
    bool dead = false;
    // A GET or WAIT whose keys do not all exist yet; the connection's later
    // requests wait behind it, so replies stay in order.
    bool waiting = false;
    Op pending_op = Op::wait;
    std::vector<std::string> pending_keys;
  };

  void run() {
    try {
      loop();
    } catch (...) {
      // Out of memory or similar: stop serving; the destructor closes every
      // connection, so clients fail instead of hanging.
    }
  }

  void loop() {
    std::vector<pollfd> fds;
    while (true) {
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      // Wake up in time to drop the first connection whose partial frame stalls.
      int wait_ms = -1;
      const auto now = Clock::now();
      for (const Conn& c : conns_) {
        const short ev = static_cast<short>(POLLIN | (c.out_pos < c.out.size() ? POLLOUT : 0));
        fds.push_back({c.fd, ev, 0});
        if (!c.in.empty() || !c.heard) {
          const milliseconds limit = c.heard ? stalled_timeout_ : silent_timeout_;
          const int64_t left = std::max<int64_t>(
              0, std::chrono::duration_cast<milliseconds>(c.last_rx + limit - now).count());
          const int w = static_cast<int>(std::min<int64_t>(left + 1, 1 << 30));
          wait_ms = wait_ms < 0 ? w : std::min(wait_ms, w);
        }
      }
      if (poll(fds.data(), fds.size(), wait_ms) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;  // shutdown
      size_t i = 2;
      bool changed = false;
      for (Conn& c : conns_) {
        const short re = fds[i++].revents;
        if (re & (POLLIN | POLLHUP | POLLERR)) changed |= on_readable(c);
        if (!c.dead && (re & POLLOUT)) flush(c);
        if (!c.dead && !c.in.empty() && Clock::now() - c.last_rx >= stalled_timeout_) {
          const std::string part =
              c.in.size() < 4 ? detail::str_cat(c.in.size(), " of the 4 bytes of a frame's length")
                              : detail::str_cat(c.in.size() - 4, " of the ", read_u32(c.in.data()),
                                                " bytes of a frame");
          log_line(detail::str_cat("[TcpStore] server: closing the connection from ", c.peer,
                                   ": it sent ", part, ", then nothing for ",
                                   seconds_str(stalled_timeout_)));
          c.dead = true;
        }
        if (!c.dead && !c.heard && Clock::now() - c.last_rx >= silent_timeout_) {
          log_line(
              detail::str_cat("[TcpStore] server: closing the connection from ", c.peer,
                              ": it sent nothing for ", seconds_str(silent_timeout_),
                              " after connecting (TcpStoreOptions::silent_connection_timeout)"));
          c.dead = true;
        }
      }
      while (changed) changed = serve_waiters();
      conns_.remove_if([](const Conn& c) {
        if (c.dead) close(c.fd);
        return c.dead;
      });
      if (fds[1].revents & POLLIN) accept_all();
    }
  }

  void accept_all() {
    while (true) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      const int fd =
          accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a connection that went away before we took it
      set_nodelay(fd);
      Conn& c = conns_.emplace_back();
      c.fd = fd;
      c.peer = peer_name(ss);
      c.last_rx = Clock::now();
    }
  }

  // Checks the length of every frame buffered on c (complete ones and the one
  // being read) before more bytes are taken; false after closing c.
  bool frames_ok(Conn& c) {
    size_t pos = 0;
    while (c.in.size() - pos >= 4) {
      const uint32_t len = read_u32(c.in.data() + pos);
      if (len == 0 || len > max_frame_) {
        log_line(detail::str_cat("[TcpStore] server: closing the connection from ", c.peer,
                                 ": it announced a frame of ", len, " bytes (limit ", max_frame_,
                                 "); not a tcv store client, or a value too large for the store"));
        c.dead = true;
        return false;
      }
      if (c.in.size() - pos - 4 < len) break;
      pos += 4 + len;
    }
    // Complete requests pile up only behind a waiting GET/WAIT, which a tcv
    // client never does; a client that does so anyway may not hoard memory.
    if (pos > 2 * static_cast<size_t>(max_frame_)) {
      log_line(detail::str_cat("[TcpStore] server: closing the connection from ", c.peer,
                               ": it queued ", pos, " bytes of requests behind a waiting one"));
      c.dead = true;
      return false;
    }
    return true;
  }

  // Reads what arrived and serves complete requests; true when the data changed.
  bool on_readable(Conn& c) {
    uint8_t buf[65536];
    while (true) {
      const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.insert(c.in.end(), buf, buf + n);
        c.last_rx = Clock::now();
        c.heard = true;
        if (!frames_ok(c)) return false;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      c.dead = true;  // closed by the client, or reset
      return false;
    }
    return serve_requests(c);
  }

  // Serves the complete requests buffered on c until one has to wait.
  bool serve_requests(Conn& c) {
    bool changed = false;
    size_t pos = 0;
    while (!c.waiting && !c.dead && c.in.size() - pos >= 4) {
      const uint32_t len = read_u32(c.in.data() + pos);
      if (len > max_frame_ || len == 0) {
        c.dead = true;
        break;
      }
      if (c.in.size() - pos - 4 < len) break;
      try {
        changed |= serve(c, decode_store_request(c.in.data() + pos + 4, len));
      } catch (const Error&) {
        c.dead = true;  // malformed request: not a tcv client
      }
      pos += 4 + len;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
    return changed;
  }

  bool serve(Conn& c, const StoreRequest& req) {
    switch (req.op) {
      case Op::set:
        data_[req.keys[0]] = req.value;
        reply(c, Status::ok, {});
        return true;
      case Op::get:
      case Op::wait:
        c.pending_op = req.op;
        c.pending_keys = req.keys;
        c.waiting = true;
        try_answer(c);
        return false;
      case Op::add: {
        const std::string& key = req.keys[0];
        auto it = data_.find(key);
        int64_t v = 0;
        try {
          v = store_counter_add(key, it == data_.end() ? nullptr : &it->second, req.delta);
        } catch (const Error& e) {
          const std::string msg = e.what();
          reply(c, Status::error, Bytes(msg.begin(), msg.end()));
          return false;
        }
        const std::string s = std::to_string(v);
        data_[key] = Bytes(s.begin(), s.end());
        Bytes out;
        put_i64(out, v);
        reply(c, Status::ok, out);
        return true;
      }
      case Op::check: {
        const bool all = std::all_of(req.keys.begin(), req.keys.end(),
                                     [&](const std::string& k) { return data_.count(k) != 0; });
        reply(c, Status::ok, Bytes{static_cast<uint8_t>(all)});
        return false;
      }
      case Op::del: {
        const bool existed = data_.erase(req.keys[0]) != 0;
        reply(c, Status::ok, Bytes{static_cast<uint8_t>(existed)});
        return existed;
      }
    }
    return false;
  }

  // Answers c's pending GET/WAIT when its keys exist; true when answered.
  bool try_answer(Conn& c) {
    for (const std::string& k : c.pending_keys)
      if (!data_.count(k)) return false;
    c.waiting = false;
    reply(c, Status::ok, c.pending_op == Op::get ? data_[c.pending_keys[0]] : Bytes{});
    c.pending_keys.clear();
    return true;
  }

  // Answers the waiters whose keys now exist and serves what queued behind them.
  bool serve_waiters() {
    bool changed = false;
    for (Conn& c : conns_)
      if (c.waiting && !c.dead && try_answer(c)) changed |= serve_requests(c);
    return changed;
  }

  void reply(Conn& c, Status status, const Bytes& payload) {
    if (c.dead) return;
    put_u32(c.out, static_cast<uint32_t>(payload.size() + 1));
    c.out.push_back(static_cast<uint8_t>(status));
    c.out.insert(c.out.end(), payload.begin(), payload.end());
    flush(c);
    // A tcv client reads each reply before its next request; one that keeps
    // asking without reading would make the server hold every reply.
    const size_t queued = c.out.size() - c.out_pos;
    if (!c.dead && queued > 2 * static_cast<size_t>(max_frame_)) {
      log_line(detail::str_cat("[TcpStore] server: closing the connection from ", c.peer, ": ",
                               queued, " bytes of replies queued that it does not read (limit ",
                               2 * static_cast<size_t>(max_frame_), ")"));
      c.dead = true;
      Bytes().swap(c.out);
      c.out_pos = 0;
    }
  }

  void flush(Conn& c) {
    while (c.out_pos < c.out.size()) {
      const ssize_t n =
          send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_pos += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;
      return;
    }
    c.out.clear();
    if (c.out.capacity() > (size_t{1} << 20)) Bytes().swap(c.out);  // a large reply went out
    c.out_pos = 0;
  }

  uint32_t max_frame_;
  milliseconds stalled_timeout_;
  milliseconds silent_timeout_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::list<Conn> conns_;
  std::map<std::string, Bytes> data_;
  std::thread thread_;
};

// ---- client -------------------------------------------------------------------

TcpStore::TcpStore(std::string host, int port, TcpStoreOptions options)
    : host_(std::move(host)), port_(port), options_(options) {
  TCV_CHECK(port_ >= 0 && port_ <= 65535, "[TcpStore] port ", port_, " for ", host_,
            " is not in [0, 65535]");
  TCV_CHECK(options_.is_server || port_ != 0, "[TcpStore] a client needs the server's port for ",
            host_, ", got 0");
  TCV_CHECK(options_.world_size >= 1, "[TcpStore] world_size must be at least 1, got ",
            options_.world_size);
  TCV_CHECK(options_.timeout.count() > 0, "[TcpStore] timeout must be positive, got ",
            options_.timeout.count(), " ms");
  TCV_CHECK(options_.wait_log_interval.count() >= 0,
            "[TcpStore] wait_log_interval must not be negative");
  TCV_CHECK(options_.max_frame_bytes >= 64, "[TcpStore] max_frame_bytes must be at least 64, got ",
            options_.max_frame_bytes);
  TCV_CHECK(options_.silent_connection_timeout.count() > 0,
            "[TcpStore] silent_connection_timeout must be positive");
  TCV_CHECK(options_.stalled_frame_timeout.count() > 0,
            "[TcpStore] stalled_frame_timeout must be positive");
  if (options_.is_server) {
    server_ = std::make_unique<StoreServer>(host_, port_, options_.max_frame_bytes,
                                            options_.stalled_frame_timeout,
                                            options_.silent_connection_timeout);
    port_ = server_->port();
  }
  std::lock_guard<std::mutex> l(mu_);
  connect(Clock::now() + options_.timeout);
}

TcpStore::~TcpStore() {
  disconnect();
  server_.reset();
}

std::string TcpStore::where() const {
  return host_ + ":" + std::to_string(port_);
}

std::string TcpStore::who() const {
  if (!options_.client_name.empty()) return options_.client_name;
  return options_.rank >= 0 ? "rank " + std::to_string(options_.rank) : "this process";
}

void TcpStore::disconnect() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void TcpStore::connect(Clock::time_point deadline) {
  std::string last_error = "no attempt";
  milliseconds backoff(10);
  const auto t0 = Clock::now();
  const milliseconds every = options_.wait_log_interval;
  auto next_log = t0 + every;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port_s = std::to_string(port_);
    const int gai = getaddrinfo(host_.c_str(), port_s.c_str(), &hints, &res);
    if (gai != 0) last_error = std::string("cannot resolve host: ") + gai_strerror(gai);
    for (addrinfo* a = gai == 0 ? res : nullptr; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        last_error = errno_str(errno);
        continue;
      }
      int err = 0;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms_left(deadline), 1000)));
          socklen_t len = sizeof(err);
          if (rc == 1) {
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          } else {
            err = ETIMEDOUT;
          }
        }
      }
      if (err == 0) {
        set_nodelay(fd);
        fd_ = fd;
        was_lost_ = false;
        used_ = false;
        freeaddrinfo(res);
        return;
      }
      last_error = errno_str(err);
      close(fd);
      // A server that closed this client's connection and now refuses new
      // ones has exited: waiting for it to come back would only delay the error.
      if (was_lost_ && err == ECONNREFUSED) {
        if (res) freeaddrinfo(res);
        throw StoreLostError(detail::str_cat("[TcpStore] ", who(), ": the store at ", where(),
                                             " closed the connection and now refuses new ones (",
                                             options_.server_name, ", which hosts it, exited)"));
      }
    }
    if (res) freeaddrinfo(res);
    const int64_t left = ms_left(deadline);
    TCV_CHECK(left > 0, "[TcpStore] ", who(), " could not connect to the store at ", where(),
              " within ", options_.timeout.count(), " ms (last error: ", last_error, "); ",
              options_.server_name, " hosts it: is it running, and are MASTER_ADDR/MASTER_PORT ",
              "right (a firewall, a wrong address)?");
    if (every.count() > 0 && Clock::now() >= next_log) {
      log_line(
          detail::str_cat("[TcpStore] ", who(), " is still waiting for the store at ", where(),
                          " (hosted by ", options_.server_name, ") after ",
                          seconds_str(std::chrono::duration_cast<milliseconds>(Clock::now() - t0)),
                          " of ", seconds_str(options_.timeout), ": ", last_error));
      next_log += every;
    }
    std::this_thread::sleep_for(std::min(backoff, milliseconds(left)));
    backoff = std::min(backoff * 2, milliseconds(500));
  }
}

Bytes TcpStore::roundtrip(const Bytes& request, Clock::time_point deadline, const std::string& what,
                          milliseconds timeout, const std::string& waiting_for) {
  std::lock_guard<std::mutex> l(mu_);
  if (fd_ < 0) connect(Clock::now() + options_.timeout);
  // A connection not used since it was made may have been closed by the
  // server as silent (silent_connection_timeout): one new connection, once.
  if (!used_) {
    try {
      return exchange(request, deadline, what, timeout, waiting_for);
    } catch (const StoreLostError&) {
      if (Clock::now() >= deadline) throw;
      const std::exception_ptr lost = std::current_exception();
      try {
        connect(Clock::now() + options_.timeout);
      } catch (const std::exception&) {
        std::rethrow_exception(lost);  // the server is gone: this call's own error says it best
      }
    }
  }
  return exchange(request, deadline, what, timeout, waiting_for);
}

Bytes TcpStore::exchange(const Bytes& request, Clock::time_point deadline, const std::string& what,
                         milliseconds timeout, const std::string& waiting_for) {
  TCV_CHECK(request.size() <= options_.max_frame_bytes, "[TcpStore] ", what, ": the request is ",
            request.size(), " bytes, over the store's frame limit of ", options_.max_frame_bytes,
            " bytes (TcpStoreOptions::max_frame_bytes)");
  const auto t0 = Clock::now();
  const milliseconds every = options_.wait_log_interval;
  auto next_log = every.count() > 0 ? t0 + every : Clock::time_point::max();

  auto timed_out = [&] {
    disconnect();  // the server drops the pending request with the connection
    throw StoreTimeout(detail::str_cat("[TcpStore] ", what, " timed out after ", timeout.count(),
                                       " ms", waiting_for.empty() ? "" : " waiting for ",
                                       waiting_for, " (store at ", where(), ")"));
  };
  auto lost = [&](const std::string& why) {
    disconnect();
    was_lost_ = true;
    throw StoreLostError(detail::str_cat("[TcpStore] lost the connection to the store at ", where(),
                                         " during ", what, ": ", why, " (has ",
                                         options_.server_name, ", which hosts it, exited?)"));
  };
  // Waits for `events` on the socket until the deadline; false on timeout.
  // Says what it waits for every wait_log_interval.
  auto wait_for = [&](short events) {
    while (true) {
      const auto wake = std::min(deadline, next_log);
      pollfd p{fd_, events, 0};
      const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms_left(wake), 1 << 30)));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) lost(errno_str(errno));
      if (rc == 0 && Clock::now() >= deadline) return false;
      if (Clock::now() >= next_log) {
        log_line(detail::str_cat(
            "[TcpStore] ", who(), " is still waiting for ",
            waiting_for.empty() ? what : waiting_for + " (" + what + ")", " after ",
            seconds_str(std::chrono::duration_cast<milliseconds>(Clock::now() - t0)), " of ",
            seconds_str(timeout), " (store at ", where(), ")"));
        next_log += every;
      }
    }
  };

  Bytes frame;
  frame.reserve(request.size() + 4);
  put_u32(frame, static_cast<uint32_t>(request.size()));
  frame.insert(frame.end(), request.begin(), request.end());
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(POLLOUT)) timed_out();
    } else if (!(n < 0 && errno == EINTR)) {
      lost(n < 0 ? errno_str(errno) : "send failed");
    }
  }

  auto recv_exact = [&](uint8_t* dst, size_t want) {
    size_t got = 0;
    while (got < want) {
      const ssize_t n = recv(fd_, dst + got, want - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        lost("connection closed by the server");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wait_for(POLLIN)) timed_out();
      } else if (errno != EINTR) {
        lost(errno_str(errno));
      }
    }
  };
  uint8_t head[4];
  recv_exact(head, 4);
  const uint32_t len = read_u32(head);
  if (len == 0 || len > options_.max_frame_bytes)
    lost("malformed reply of " + std::to_string(len) + " bytes");
  Bytes body(len);
  recv_exact(body.data(), len);
  if (static_cast<Status>(body[0]) != Status::ok)
    TCV_THROW(std::string(body.begin() + 1, body.end()), " (store at ", where(), ")");
  body.erase(body.begin());
  used_ = true;
  return body;
}

std::string TcpStore::full_key(const std::string& key) const {
  const std::string& p = options_.key_prefix;
  if (!p.empty() && p.back() == '/' && !key.empty() && key.front() == '/')
    return p + key.substr(1);  // "/r0/" + "/tcv/barrier/0": one slash
  return p + key;
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  Bytes req{static_cast<uint8_t>(Op::set)};
  put_str(req, full_key(key));
  put_bytes(req, value.data(), value.size());
  roundtrip(req, Clock::now() + options_.timeout, "set('" + key + "')", options_.timeout);
}

void TcpStore::set(const std::string& key, std::string_view value) {
  set(key, Bytes(value.begin(), value.end()));
}

Bytes TcpStore::get(const std::string& key) {
  return get(key, options_.timeout);
}

Bytes TcpStore::get(const std::string& key, milliseconds timeout, const std::string& waiting_for) {
  Bytes req{static_cast<uint8_t>(Op::get)};
  put_str(req, full_key(key));
  return roundtrip(req, Clock::now() + timeout, "get('" + key + "')", timeout, waiting_for);
}

std::string TcpStore::get_string(const std::string& key) {
  const Bytes b = get(key);
  return std::string(b.begin(), b.end());
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Bytes req{static_cast<uint8_t>(Op::add)};
  put_str(req, full_key(key));
  put_i64(req, delta);
  const Bytes rep =
      roundtrip(req, Clock::now() + options_.timeout, "add('" + key + "')", options_.timeout);
  WireReader r(rep.data(), rep.size());
  return r.i64();
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Bytes req{static_cast<uint8_t>(Op::check)};
  put_u32(req, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) put_str(req, full_key(k));
  const Bytes rep = roundtrip(req, Clock::now() + options_.timeout, "check(" + keys_str(keys) + ")",
                              options_.timeout);
  TCV_CHECK(rep.size() == 1, "[TcpStore] malformed reply to check (store at ", where(), ")");
  return rep[0] != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, options_.timeout);
}

void TcpStore::wait(const std::vector<std::string>& keys, milliseconds timeout,
                    const std::string& waiting_for) {
  Bytes req{static_cast<uint8_t>(Op::wait)};
  put_u32(req, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) put_str(req, full_key(k));
  roundtrip(req, Clock::now() + timeout, "wait(" + keys_str(keys) + ")", timeout, waiting_for);
}

bool TcpStore::delete_key(const std::string& key) {
  Bytes req{static_cast<uint8_t>(Op::del)};
  put_str(req, full_key(key));
  const Bytes rep = roundtrip(req, Clock::now() + options_.timeout, "delete_key('" + key + "')",
                              options_.timeout);
  TCV_CHECK(rep.size() == 1, "[TcpStore] malformed reply to delete_key (store at ", where(), ")");
  return rep[0] != 0;
}

void TcpStore::barrier() {
  barrier(options_.timeout);
}

void TcpStore::barrier(milliseconds timeout) {
  int64_t gen;
  {
    std::lock_guard<std::mutex> l(mu_);
    gen = barrier_generation_++;
  }
  const std::string key = "/tcv/barrier/" + std::to_string(gen);
  const std::string done = key + "/done";
  if (add(key, 1) == options_.world_size) set(done, std::string_view("1"));
  try {
    wait({done}, timeout,
         "the other ranks at store barrier #" + std::to_string(gen) + " (world size " +
             std::to_string(options_.world_size) + ")");
  } catch (const StoreTimeout&) {
    // Only a timeout leaves a server to ask; a lost connection is reported as it is.
    int64_t arrived = -1;
    try {
      arrived = add(key, 0);
    } catch (const Error&) {
    }
    if (arrived < 0) throw;
    TCV_THROW("[TcpStore] barrier #", gen, " timed out after ", timeout.count(), " ms: ", arrived,
              " of ", options_.world_size, " ranks arrived (store at ", where(), ")");
  }
}

std::shared_ptr<TcpStore> connect_job_store(const DistEnv& env, TcpStoreOptions options) {
  options.is_server = env.rank == 0 && env.store_prefix.empty();
  options.world_size = env.world_size;
  options.rank = env.rank;
  options.key_prefix = env.store_prefix;
  if (!env.store_prefix.empty()) options.server_name = "tcv-run on the first machine";
  return std::make_shared<TcpStore>(env.master_addr, env.master_port, options);
}

}  // namespace tcv::dist
