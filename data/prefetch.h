// Items made ahead of their consumer on worker threads and handed out in
// order: what the data loaders run their batches through.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/base.h"

namespace tcv::data {

/// Makes items k = begin, begin + 1, ..., end - 1 with `make(k)` and returns
/// them from next() in that order. With workers > 0, that many threads make
/// items concurrently, at most `depth` ahead of the one the consumer waits
/// for; with 0, next() makes each item on the calling thread. The first error
/// a worker throws is rethrown (as a tcv::Error with its message) by next().
template <typename T>
class OrderedPrefetcher {
 public:
  OrderedPrefetcher() = default;
  ~OrderedPrefetcher() { stop(); }
  OrderedPrefetcher(const OrderedPrefetcher&) = delete;
  OrderedPrefetcher& operator=(const OrderedPrefetcher&) = delete;

  /// Stops any run in progress and starts making [begin, end).
  void start(int64_t begin, int64_t end, int workers, int64_t depth,
             std::function<T(int64_t)> make) {
    stop();
    make_ = std::move(make);
    next_ = claim_ = begin;
    end_ = std::max(begin, end);
    depth_ = std::max<int64_t>(depth, 1);
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
  }

  /// The next item; false once all of [begin, end) were handed out.
  bool next(T& out) {
    if (next_ >= end_) return false;
    if (threads_.empty()) {
      out = make_(next_++);
      return true;
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return ready_.count(next_) > 0 || !error_.empty(); });
    TCV_CHECK(error_.empty(), error_);
    auto it = ready_.find(next_);
    out = std::move(it->second);
    ready_.erase(it);
    ++next_;
    l.unlock();
    cv_.notify_all();
    return true;
  }

  /// Joins the workers and drops what they made; next() returns false afterwards.
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    ready_.clear();
    stop_ = false;
    error_.clear();
    next_ = end_ = claim_ = 0;
  }

  /// Items handed out so far, counted from 0 (the index next() returns next).
  int64_t position() const { return next_; }

 private:
  void worker_loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || claim_ >= end_ || claim_ < next_ + depth_; });
      if (stop_ || claim_ >= end_) return;
      const int64_t k = claim_++;
      l.unlock();
      T item;
      std::string err;
      try {
        item = make_(k);
      } catch (const std::exception& e) {
        err = e.what();
      }
      l.lock();
      if (!err.empty() && error_.empty()) error_ = err;
      ready_.emplace(k, std::move(item));
      cv_.notify_all();
    }
  }

  std::function<T(int64_t)> make_;
  int64_t next_ = 0;  // the item the consumer takes next
  int64_t end_ = 0;
  int64_t depth_ = 1;
  // Worker state, guarded by mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  std::map<int64_t, T> ready_;
  int64_t claim_ = 0;  // the next item a worker makes
  bool stop_ = false;
  std::string error_;  // the first worker error
};

}  // namespace tcv::data
