// The scaling projection (dist/step_projection.h): a step timeline read back,
// and projected onto clusters in closed form.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "dist/ddp.h"
#include "dist/fake_group.h"
#include "dist/step_projection.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "layers/linear.h"
#include "support/temp_dir.h"

namespace tcv::dist {
namespace {

// A step timeline in DistributedDataParallel's format: backward from 1000 us
// to 61000 us; three buckets ready at 10, 30 and 60 ms after its start whose
// all-reduces ran as `cost` says; the step 100 ms.
std::string write_timeline(const std::string& path, const AllReduceCost& cost, double exposed_ms) {
  const double begin = 1000;
  const double ready_ms[3] = {10, 30, 60};
  const int64_t bytes[3] = {4000000, 2000000, 500000};
  Json events = Json::array();
  double free_at = 0;
  for (int k = 0; k < 3; ++k) {
    const double launch = begin + 1e3 * ready_ms[k];
    const double start = std::max(launch, free_at);
    const double done = start + 1e6 * cost.seconds(static_cast<double>(bytes[k]));
    free_at = done;
    events.push_back(Json::object(
        {{"name", "allreduce bucket " + std::to_string(k)},
         {"ph", "X"},
         {"pid", 0},
         {"tid", 1},
         {"ts", launch},
         {"dur", done - launch},
         {"args",
          Json::object(
              {{"bucket", k}, {"bytes", bytes[k]}, {"params", 2}, {"started_us", start}})}}));
  }
  Json params = Json::array();
  for (int k = 0; k < 3; ++k)  // two gradients per bucket, the second ready with it
    for (int h = 0; h < 2; ++h)
      params.push_back(Json::object({{"name", "p" + std::to_string(2 * k + h)},
                                     {"bytes", bytes[k] / 2},
                                     {"ready_us", begin + 1e3 * (ready_ms[k] - (h ? 0 : 2))}}));
  Json other =
      Json::object({{"step", 3},
                    {"world", 2},
                    {"backend", "gloo"},
                    {"bucket_plan", "timed"},
                    {"num_buckets", 3},
                    {"forward_ms", 20.0},
                    {"backward_begin_us", begin},
                    {"backward_end_us", begin + 60000},
                    {"backward_ms", 60.0},
                    {"exposed_ms", exposed_ms},
                    {"step_ms", 100.0},
                    {"allreduce_cost", Json::object({{"latency_us", 1e6 * cost.latency_s},
                                                     {"gbytes_per_s", 1e-9 * cost.bytes_per_s}})},
                    {"params", params}});
  std::ofstream(path) << json_dump(Json::object({{"traceEvents", events}, {"otherData", other}}));
  return path;
}

TEST(StepProjection, OneMachineOfTheTimelinesWorldReproducesItsStep) {
  tcv::testing::TempDir dir("projection");
  const AllReduceCost cost{500e-6, 1e9};
  // The last bucket (0.5 MB) is ready at 60 ms when backward ends and runs 1 ms.
  const StepTimeline t = read_step_timeline(
      write_timeline((dir.root() / "t.json").string(), cost, /*exposed_ms=*/1.0));
  EXPECT_EQ(t.world, 2);
  ASSERT_EQ(t.buckets.size(), 3u);
  ASSERT_EQ(t.params.size(), 6u);
  EXPECT_NEAR(t.compute_s(), 0.099, 1e-12);
  EXPECT_NEAR(t.total_bytes(), 6.5e6, 1e-6);
  // The cost fitted to its buckets' runs is the one they ran with.
  const auto fitted = fit_timeline_cost(t);
  ASSERT_TRUE(fitted.has_value());
  EXPECT_NEAR(fitted->latency_s, cost.latency_s, 1e-9);
  EXPECT_NEAR(fitted->bytes_per_s, cost.bytes_per_s, 1e3);
  // As a link, projected onto 1 machine x 2 ranks: the measured step.
  ProjectionOptions o;
  o.links.machines = 1;
  o.links.ranks_per_machine = 2;
  std::tie(o.links.intra_latency_s, o.links.intra_bytes_per_s) = ring_link_from_cost(*fitted, 2);
  const Projection p = project_step(t, o);
  EXPECT_NEAR(p.step_s, 0.100, 1e-9);
  EXPECT_NEAR(p.exposed_s, 0.001, 1e-9);
  EXPECT_NEAR(p.comm_s, 3 * 500e-6 + 6.5e6 / 1e9, 1e-9);
  EXPECT_EQ(p.buckets, 3);
}

TEST(StepProjection, ClustersInClosedForm) {
  tcv::testing::TempDir dir("projection");
  const StepTimeline t =
      read_step_timeline(write_timeline((dir.root() / "t.json").string(), {500e-6, 1e9}, 1.0));
  ProjectionOptions o;
  o.links.ranks_per_machine = 1;
  // One rank alone: no communication.
  Projection one = project_step(t, o);
  EXPECT_DOUBLE_EQ(one.step_s, t.compute_s());
  EXPECT_DOUBLE_EQ(one.efficiency, 1.0);
  EXPECT_EQ(one.exposed_s, 0.0);
  // 4 machines x 8 at 400 Gb/s, ring: the last bucket's 0.5 MB is exposed.
  o.links.machines = 4;
  o.links.ranks_per_machine = 8;
  const AllReduceCost ring = cluster_allreduce_cost(AllReduceAlgo::ring, o.links);
  Projection p = project_step(t, o);
  EXPECT_NEAR(p.exposed_s, ring.seconds(500000), 1e-12);
  EXPECT_NEAR(p.step_s, t.compute_s() + ring.seconds(500000), 1e-12);
  EXPECT_NEAR(p.efficiency, t.compute_s() / p.step_s, 1e-15);
  EXPECT_NEAR(p.allreduce_all_s, ring.seconds(6.5e6), 1e-12);
  // Half the compute: everything scales but the all-reduces.
  o.compute_scale = 0.5;
  p = project_step(t, o);
  EXPECT_NEAR(p.compute_s, 0.5 * t.compute_s(), 1e-15);
  EXPECT_NEAR(p.exposed_s, ring.seconds(500000), 1e-12);
  // More machines never make the ring's exposed time shorter.
  o.compute_scale = 1;
  double prev = 0;
  for (int64_t m : {1, 2, 4, 8, 16, 32, 64, 128}) {
    o.links.machines = m;
    const double e = project_step(t, o).exposed_s;
    EXPECT_GE(e, prev) << m;
    prev = e;
  }
  // Re-planned for the target (the model taken at its word), the tail is no
  // longer than as measured.
  o.replan = true;
  o.plan.safety = 1;
  o.plan.latency_slack = 0;
  EXPECT_LE(project_step(t, o).exposed_s, prev + 1e-12);
}

TEST(StepProjection, ReadsWhatDistributedDataParallelWrites) {
  tcv::testing::TempDir dir("projection");
  const std::string path = (dir.root() / "trace.json").string();
  struct Net : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    Net() {
      a = register_module("a", std::make_shared<nn::Linear>(6, 8));
      b = register_module("b", std::make_shared<nn::Linear>(8, 3));
    }
    Tensor forward(const Tensor& x) override { return b->forward(ops::relu(a->forward(x))); }
    std::string type_name() const override { return "Net"; }
  };
  manual_seed(1);
  auto n0 = std::make_shared<Net>(), n1 = std::make_shared<Net>();
  auto world = std::make_shared<testing::FakeWorld>(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      DDPOptions o;
      o.timeline_path = path;
      o.timeline_step = 2;
      o.reducer.bucket_cap_mb = o.reducer.first_bucket_mb = 1e-4;
      DDP ddp(r == 0 ? n0 : n1, std::make_shared<testing::FakeGroup>(world, r), o);
      for (int s = 0; s < 3; ++s) ops::sum(ddp.forward(randn({2, 6}))).backward();
    });
  for (auto& t : threads) t.join();
  const StepTimeline t = read_step_timeline(path);
  EXPECT_EQ(t.world, 2);
  EXPECT_EQ(t.backend, "fake");
  EXPECT_EQ(t.params.size(), 4u);
  double bucket_bytes = 0;
  for (const BucketTiming& b : t.buckets) bucket_bytes += b.bytes;
  EXPECT_EQ(bucket_bytes, t.total_bytes());
  EXPECT_GT(t.step_s, 0.0);
  EXPECT_GE(t.compute_s(), 0.0);
  EXPECT_NEAR(t.total_bytes(), 4.0 * (6 * 8 + 8 + 8 * 3 + 3), 1e-9);
  for (size_t k = 1; k < t.params.size(); ++k)
    EXPECT_GE(t.params[k].ready_s, t.params[k - 1].ready_s);
  EXPECT_THROW(read_step_timeline((dir.root() / "missing.json").string()), Error);
}

}  // namespace
}  // namespace tcv::dist
