// Lines the distributed runtime prints while it waits or drops a connection:
// one write(2) per line, so lines from several threads and processes never
// interleave. Tests redirect them.
#pragma once

#include <functional>
#include <string>

namespace tcv::dist {

/// Receives every line (without its newline).
using LogSink = std::function<void(const std::string& line)>;

/// Writes `line` and a newline to stderr in one write, or hands it to the sink
/// installed with set_log_sink().
void log_line(const std::string& line);

/// Routes log_line() to `sink` (an empty sink: stderr again); returns the
/// previous sink. Thread-safe.
LogSink set_log_sink(LogSink sink);

}  // namespace tcv::dist
