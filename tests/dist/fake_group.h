// An in-process ProcessGroup for tests: `size` ranks are threads of one
// process sharing a FakeWorld; each collective blocks until every rank has
// called it (so it is synchronous: Work is complete at once), reduces in f64,
// and records what was called (and counts it in ProcessGroup::stats()).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace tcv::dist::testing {

struct CallRecord {
  std::string op;
  int64_t numel = 0;
  DType dtype = DType::f32;
  const void* data = nullptr;
};

class FakeWorld {
 public:
  explicit FakeWorld(int size) : size_(size) {}
  int size() const { return size_; }

  // Rank `rank`'s contribution to collective number `seq`; returns every rank's
  // contribution (in rank order) once all have arrived.
  std::vector<std::vector<double>> exchange(int64_t seq, int rank, std::vector<double> mine) {
    std::unique_lock lock(mu_);
    Slot& s = slots_[seq];
    if (s.data.empty()) s.data.resize(size_);
    s.data[rank] = std::move(mine);
    if (++s.arrived == size_) cv_.notify_all();
    cv_.wait(lock, [&] { return s.arrived == size_; });
    auto out = s.data;
    if (++s.left == size_) slots_.erase(seq);
    return out;
  }

 private:
  struct Slot {
    std::vector<std::vector<double>> data;
    int arrived = 0, left = 0;
  };
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Slot> slots_;
};

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

class FakeGroup final : public ProcessGroup {
 public:
  FakeGroup(std::shared_ptr<FakeWorld> world, int rank)
      : ProcessGroup(rank, world->size()), world_(std::move(world)) {}
  std::string backend_name() const override { return "fake"; }

  WorkPtr all_reduce(const Tensor& t, ReduceOp op) override {
    record("all_reduce", t);
    const auto all = world_->exchange(seq_++, rank(), t.to_vector<double>());
    std::vector<double> r = all[0];
    for (size_t k = 1; k < all.size(); ++k)
      for (size_t i = 0; i < r.size(); ++i) {
        const double v = all[k][i];
        if (op == ReduceOp::max)
          r[i] = std::max(r[i], v);
        else if (op == ReduceOp::min)
          r[i] = std::min(r[i], v);
        else
          r[i] += v;
      }
    if (op == ReduceOp::avg)
      for (double& v : r) v /= static_cast<double>(size());
    write(t, r);
    return std::make_shared<DoneWork>();
  }
  WorkPtr broadcast(const Tensor& t, int root) override {
    record("broadcast", t);
    const auto all = world_->exchange(seq_++, rank(), t.to_vector<double>());
    write(t, all[root]);
    return std::make_shared<DoneWork>();
  }
  WorkPtr all_gather(const Tensor& out, const Tensor& in) override {
    record("all_gather", in);
    // i64 hashes do not survive a trip through double: gather raw bits.
    std::vector<double> bits(static_cast<size_t>(in.nbytes() / sizeof(double) + 1), 0.0);
    const Tensor c = in.contiguous();
    std::memcpy(bits.data(), c.data_ptr(), in.nbytes());
    const auto all = world_->exchange(seq_++, rank(), bits);
    auto* dst = static_cast<char*>(out.data_ptr());
    for (const auto& a : all) {
      std::memcpy(dst, a.data(), in.nbytes());
      dst += in.nbytes();
    }
    return std::make_shared<DoneWork>();
  }
  WorkPtr reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override {
    TCV_THROW("[FakeGroup] reduce_scatter is not implemented");
  }
  WorkPtr barrier() override {
    count_collective(0);
    world_->exchange(seq_++, rank(), {});
    return std::make_shared<DoneWork>();
  }

  std::vector<CallRecord> calls;

 private:
  void record(const char* op, const Tensor& t) {
    calls.push_back({op, t.numel(), t.dtype(), t.data_ptr()});
    count_collective(static_cast<int64_t>(t.nbytes()));
  }
  static void write(const Tensor& t, const std::vector<double>& v) {
    Tensor src = from_vector<double>(v, t.shape()).to(t.dtype());
    Tensor(t).copy_(src);
  }
  std::shared_ptr<FakeWorld> world_;
  int64_t seq_ = 0;
};

}  // namespace tcv::dist::testing
