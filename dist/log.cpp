#include "dist/log.h"

#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace tcv::dist {

namespace {

std::mutex& sink_mutex() {
  static std::mutex mu;
  return mu;
}

LogSink& sink() {
  static LogSink s;
  return s;
}

}  // namespace

void log_line(const std::string& line) {
  {
    std::lock_guard<std::mutex> lock(sink_mutex());
    if (sink()) {
      sink()(line);
      return;
    }
  }
  const std::string out = line + "\n";
  const char* p = out.data();
  size_t n = out.size();
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

LogSink set_log_sink(LogSink s) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  LogSink prev = std::move(sink());
  sink() = std::move(s);
  return prev;
}

}  // namespace tcv::dist
