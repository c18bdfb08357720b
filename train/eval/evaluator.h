// What every task's evaluation does: accumulate on each rank, combine across
// ranks, finish into named metrics. A task's evaluator (top-k accuracy, VOC or
// COCO mAP, a confusion matrix) keeps its state as plain data that it can
// write to bytes and merge from bytes, so the ranks of a data-parallel run
// exchange it with one all-gather and all finish with the same numbers.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/error.h"

namespace tcv::dist {
class ProcessGroup;
}

namespace tcv::train {

/// Named metric values, in the order an evaluator reports them.
using Metrics = std::vector<std::pair<std::string, double>>;

/// The value of metric `name`; an error naming the known metrics if absent.
double metric(const Metrics& m, const std::string& name);

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  /// Forgets everything accumulated.
  virtual void reset() = 0;
  /// This evaluator's state as bytes (for merge() on another rank).
  virtual std::string serialize() const = 0;
  /// Adds state that serialize() of an evaluator with the same options wrote.
  /// Malformed bytes are a tcv::Error.
  virtual void merge(const std::string& bytes) = 0;
  /// The metrics of everything accumulated and merged.
  virtual Metrics finish() const = 0;
};

/// Every rank's `mine`, in rank order, on every rank: an all-gather of the
/// lengths, then one of the bytes padded to the longest (as i64 words, which
/// every backend moves). Must be called by every rank of the group.
std::vector<std::string> all_gather_bytes(dist::ProcessGroup& pg, const std::string& mine);

/// Makes `e` on every rank hold the state of all ranks: gathers each rank's
/// serialize(), resets, and merges them in rank order, so every rank finishes
/// with identical state (and metrics) whatever the number of ranks.
void combine(Evaluator& e, dist::ProcessGroup& pg);

/// Appends plain values to a byte string (host byte order: the ranks of one
/// run share a machine architecture).
class ByteWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// Reads what ByteWriter wrote; reading past the end is a tcv::Error naming `what`.
class ByteReader {
 public:
  ByteReader(const std::string& bytes, std::string what) : b_(bytes), what_(std::move(what)) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const auto n = get<uint64_t>();
    TCV_CHECK(n <= (b_.size() - at_) / sizeof(T), what_, ": truncated state (a vector of ", n,
              " entries at byte ", at_, " of ", b_.size(), ")");
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), b_.data() + at_, n * sizeof(T));  // an empty v has no data()
    at_ += n * sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto n = get<uint64_t>();
    need(n);
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  void need(size_t n) const {
    TCV_CHECK(n <= b_.size() - at_, what_, ": truncated state (", n, " bytes wanted at byte ", at_,
              " of ", b_.size(), ")");
  }
  const std::string& b_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace tcv::train
