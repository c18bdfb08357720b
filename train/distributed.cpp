#include "train/distributed.h"

#include <cmath>
#include <cstdio>

#include "layers/sync_batch_norm.h"

namespace tcv::train {

DistContext::DistContext(const Config& cfg, Device device) {
  const dist::EnvMap env = dist::process_dist_env();
  if (!dist::has_dist_env(env))
    throw ConfigError(cfg.source("network.distributed") +
                      ": network.distributed = true needs a distributed launch (RANK, "
                      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as tcv-run or torchrun set them); "
                      "start it with tcv-run --nproc-per-node N -- tcv-train ...");
  env_ = dist::parse_dist_env(env);
  device_ = device;
  dist::TcpStoreOptions so;
  so.is_server = env_.rank == 0;
  so.world_size = env_.world_size;
  store_ = std::make_shared<dist::TcpStore>(env_.master_addr, env_.master_port, so);
  group_ = device.is_cpu() ? dist::make_gloo_group(store_, env_.rank, env_.world_size)
                           : dist::make_nccl_group(store_, env_.rank, env_.world_size);
}

std::shared_ptr<dist::DistributedDataParallel> DistContext::wrap(
    const Config& cfg, std::shared_ptr<nn::Module> model) {
  if (cfg.get_bool("network.sync_bn"))
    nn::convert_sync_batchnorm(*model, dist::sync_bn_group(group_));
  dist::DDPOptions o;
  o.bucket_cap_mb = cfg.get_double("network.bucket_cap_mb");
  o.find_unused_parameters = cfg.get_bool("network.find_unused_parameters");
  return std::make_shared<dist::DistributedDataParallel>(std::move(model), group_, o);
}

void DistContext::all_reduce_sum(std::vector<double>& values) {
  if (values.empty()) return;
  // f64 on the CPU (Gloo); f32 on the device for NCCL, which moves only device memory.
  Tensor t = from_vector<double>(values);
  if (!device_.is_cpu()) t = t.to(DType::f32).to(device_);
  group_->all_reduce(t, dist::ReduceOp::sum)->wait();
  values = t.to(kCPU).to(DType::f64).to_vector<double>();
}

void DistContext::reduce_eval(AccuracyMeter& acc, AverageMeter& loss) {
  std::vector<double> v = {static_cast<double>(acc.correct1()), static_cast<double>(acc.correct5()),
                           static_cast<double>(acc.count()),
                           loss.mean() * static_cast<double>(loss.count()),
                           static_cast<double>(loss.count())};
  all_reduce_sum(v);
  acc.reset();
  acc.add_counts(std::llround(v[0]), std::llround(v[1]), std::llround(v[2]));
  loss.reset();
  const int64_t n = std::llround(v[4]);
  if (n > 0) loss.update(v[3] / v[4], n);
}

void DistContext::barrier() {
  group_->barrier()->wait();
}

std::string ddp_summary(dist::DistributedDataParallel& ddp) {
  const dist::StepStats& s = ddp.reducer().last_stats();
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "ddp: %lld buckets; last step: backward %.1f ms, all-reduce %.1f ms (%.0f%% hidden "
                "behind backward), end-of-backward wait %.1f ms",
                static_cast<long long>(s.num_buckets), 1e3 * s.backward_s, 1e3 * s.comm_s,
                s.comm_s > 0 ? 100.0 * s.hidden_s / s.comm_s : 0.0, 1e3 * s.wait_s);
  return buf;
}

std::unique_ptr<DistContext> init_distributed(const Config& cfg, Device device) {
  if (!cfg.get_bool("network.distributed")) return nullptr;
  return std::make_unique<DistContext>(cfg, device);
}

}  // namespace tcv::train
