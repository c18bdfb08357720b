// One rank of the multi-process DDP tests (tests/dist/test_ddp.cpp starts
// `world` of these with fork + exec). Usage:
//   tcv_ddp_worker SCENARIO RANK WORLD RENDEZVOUS_FILE
// Rank 0 hosts the TcpStore on a free port and writes the port to
// RENDEZVOUS_FILE; the others read it from there. Each rank trains a small
// CNN with DDP over Gloo on its slice of a batch, then compares its parameters
// and buffers with one model trained on the union batch. Exit status 0 and
// "ok" on stdout when they match (or, for "unused_error", when backward fails
// with the expected message); 1 and a message on stderr otherwise. The
// "hook_*" scenarios register a comm hook, record every bucket it gets and
// gives in DIR/hooks_rank<R>.safetensors (DIR: the rendezvous file's folder)
// for the test to check against the f64 reference, and check that the ranks
// end with the same parameters.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "dist/ddp.h"
#include "dist/hook_reference.h"
#include "dist/store.h"
#include "dist/thread_ranks.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "engine/serialize.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/sync_batch_norm.h"
#include "support/tasks.h"
#include "train/optim.h"
#include "train/trainer.h"

using namespace tcv;

namespace {

// conv-BN-relu, conv(stride 2)-BN-relu, global average pool, fc (+ an unused head).
struct SmallCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Linear> fc, unused;
  explicit SmallCnn(bool with_unused) {
    conv1 = register_module("conv1",
                            std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = 1}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(4));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(
                                         4, 8, 3, nn::Conv2dOptions{.stride = 2, .padding = 1}));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(8));
    fc = register_module("fc", std::make_shared<nn::Linear>(8, 5));
    if (with_unused) unused = register_module("unused", std::make_shared<nn::Linear>(8, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = ops::relu(bn1->forward(conv1->forward(x)));
    h = ops::relu(bn2->forward(conv2->forward(h)));
    return fc->forward(ops::mean(h, {2, 3}));
  }
  std::string type_name() const override { return "SmallCnn"; }
};

int fail(const std::string& msg) {
  std::cerr << msg << std::endl;
  return 1;
}

// What a hook got and gave, per call "k<N>": tensors k<N>.in and k<N>.out, and
// metadata k<N> = "<bucket index> <is_last> <ndim> <dims...> <ndim> ...".
struct HookLog {
  NamedTensors tensors;
  std::map<std::string, std::string> meta;
  int64_t calls = 0;
};

std::shared_ptr<dist::CommHook> recording(std::shared_ptr<dist::CommHook> inner, HookLog& log) {
  return dist::make_comm_hook(
      inner->name(),
      [inner, &log](dist::ProcessGroup& g, const dist::GradBucket& b) {
        const std::string k = "k" + std::to_string(log.calls++);
        std::string desc = std::to_string(b.index()) + (b.is_last() ? " 1" : " 0");
        for (const Shape& sh : b.shapes()) {
          desc += ' ';
          desc += std::to_string(sh.size());
          for (int64_t d : sh) {
            desc += ' ';
            desc += std::to_string(d);
          }
        }
        log.meta[k] = desc;
        log.tensors.emplace_back(k + ".in", b.buffer().clone());
        const Tensor buf = b.buffer();
        dist::CommFuturePtr f = inner->run(g, b);
        f->then([&log, k, buf] { log.tensors.emplace_back(k + ".out", buf.clone()); });
        return f;
      },
      inner->keeps_bucket_state_from());
}

// "trainer": the whole tcv-train path (network.distributed = true) with the
// config DIR/config.toml, out dir DIR/ddp, DIR being the rendezvous file's folder.
// Rank 0 picks a free port for the trainer's store and publishes it.
int run_trainer(int rank, int world, const std::string& rdv) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(rdv).parent_path();
  int port = 0;
  if (rank == 0) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return fail("no free port");
    port = ntohs(a.sin_port);
    ::close(fd);
    std::ofstream(rdv + ".tmp") << port << "\n";
    fs::rename(rdv + ".tmp", rdv);
  } else {
    for (int i = 0; i < 3000 && port == 0; ++i) {
      std::ifstream f(rdv);
      if (!(f >> port)) {
        port = 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  train::Config cfg = train::Config::from_file((dir / "config.toml").string());
  train::TrainOptions o;
  o.out_dir = (dir / "ddp").string();
  o.progress = train::ProgressMode::quiet;
  train::Trainer(cfg, o).run();
  std::cout << "ok" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return fail("usage: tcv_ddp_worker SCENARIO RANK WORLD RENDEZVOUS_FILE");
  const std::string scenario = argv[1];
  const int rank = std::atoi(argv[2]), world = std::atoi(argv[3]);
  const std::string rdv = argv[4];
  try {
    if (scenario == "trainer") return run_trainer(rank, world, rdv);
    // Rendezvous: rank 0 picks a free port and publishes it.
    dist::TcpStoreOptions so;
    so.is_server = rank == 0;
    so.world_size = world;
    so.timeout = std::chrono::seconds(30);
    std::shared_ptr<dist::TcpStore> store;
    if (rank == 0) {
      store = std::make_shared<dist::TcpStore>("127.0.0.1", 0, so);
      const std::string tmp = rdv + ".tmp";
      std::ofstream(tmp) << store->port() << "\n";
      std::filesystem::rename(tmp, rdv);
    } else {
      int port = 0;
      for (int i = 0; i < 3000 && port == 0; ++i) {
        std::ifstream f(rdv);
        if (!(f >> port)) {
          port = 0;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      if (port == 0) return fail("rank " + std::to_string(rank) + ": no rendezvous file " + rdv);
      store = std::make_shared<dist::TcpStore>("127.0.0.1", port, so);
    }
    dist::ProcessGroupOptions po;
    po.timeout = std::chrono::seconds(30);
    po.gloo_hostname = "127.0.0.1";
    const bool hook_scenario = scenario.rfind("hook_", 0) == 0;
    // A chain of collectives per bucket beside SyncBatchNorm's: every rank
    // must issue them in one order, so compare every fingerprint.
    if (hook_scenario) po.check_collectives = -1;
    auto group = dist::make_gloo_group(store, rank, world, po);

    const bool unused = scenario == "unused" || scenario == "unused_error";
    const bool no_sync = scenario == "nosync" ||
                         (scenario.size() > 7 && scenario.substr(scenario.size() - 7) == "_nosync");
    const int64_t b = 3, steps = hook_scenario ? 5 : 3, micro = no_sync ? 2 : 1;
    // The union batches, the same on every rank.
    manual_seed(42);
    std::vector<Tensor> xs, ys;
    for (int64_t s = 0; s < steps * micro; ++s) {
      xs.push_back(randn({world * b, 1, 8, 8}));
      ys.push_back(ops::cast(ops::clamp(uniform({world * b}, 0, 5), 0, 4.99), DType::i64));
    }
    manual_seed(7);
    auto ref = std::make_shared<SmallCnn>(unused);
    manual_seed(100 + rank);  // a different init on each rank: DDP broadcasts rank 0's
    auto model = std::make_shared<SmallCnn>(unused);
    if (rank == 0) model->load_state_dict(ref->state_dict());
    // (TCV_DDP_WORKER_PLAIN_BN=1 shows the check is sharp: per-rank BN statistics differ.)
    if (!std::getenv("TCV_DDP_WORKER_PLAIN_BN"))
      nn::convert_sync_batchnorm(*model, dist::sync_bn_group(group));

    train::SGDOptions opt;
    opt.lr = 0.1;
    opt.momentum = 0.9;
    // Reference: one process, the union batch, plain BatchNorm.
    {
      train::SGD sgd(ref->named_parameters(), opt);
      for (int64_t s = 0; s < steps; ++s) {
        sgd.zero_grad();
        for (int64_t m = 0; m < micro; ++m)
          ops::cross_entropy(ref->forward(xs[s * micro + m]), ys[s * micro + m]).backward();
        sgd.step();
      }
    }

    dist::DDPOptions o;
    o.reducer.bucket_cap_mb = 0.0005;  // a few buckets even for this small model
    o.reducer.first_bucket_mb = 0.0002;
    o.reducer.find_unused_parameters = scenario == "unused";
    dist::DDP ddp(model, group, o);
    if (scenario == "bf16") ddp.register_comm_hook(dist::bf16_compress_hook());
    HookLog log;
    if (scenario.rfind("hook_powersgd", 0) == 0)
      ddp.register_comm_hook(
          recording(dist::powersgd_hook(dist::testing::gloo_test_powersgd()), log));
    else if (scenario.rfind("hook_fp16", 0) == 0)
      ddp.register_comm_hook(recording(dist::fp16_compress_hook(), log));
    else if (hook_scenario)
      return fail("unknown scenario " + scenario);
    train::SGD sgd(model->named_parameters(), opt);
    for (int64_t s = 0; s < steps; ++s) {
      sgd.zero_grad(false);
      try {
        dist::testing::accumulate_step(
            ddp, xs, ys, s, micro, rank, b,
            [](const Tensor& out, const Tensor& y) { return ops::cross_entropy(out, y); });
      } catch (const Error& e) {
        if (scenario != "unused_error") throw;
        const std::string w = e.what();
        if (w.find("unused.weight") != std::string::npos &&
            w.find("find_unused_parameters = true") != std::string::npos) {
          std::cout << "ok" << std::endl;
          return 0;
        }
        return fail("unexpected error: " + w);
      }
      if (scenario == "unused_error") return fail("backward with an unused parameter did not fail");
      sgd.step();
      log.meta["bytes.s" + std::to_string(s)] = std::to_string(ddp.reducer().last_stats().bytes);
    }
    if (hook_scenario) {
      save_safetensors((std::filesystem::path(rdv).parent_path() /
                        ("hooks_rank" + std::to_string(rank) + ".safetensors"))
                           .string(),
                       log.tensors, log.meta);
      // Every rank applied the same averaged gradients: the same parameters, bit for bit.
      std::vector<int64_t> hash = {0};
      uint64_t h = 1469598103934665603ULL;
      for (const auto& [name, p] : model->state_dict())
        for (double v : p.to_vector<double>()) {
          uint64_t bits = 0;
          std::memcpy(&bits, &v, sizeof(bits));
          h = (h ^ bits) * 1099511628211ULL;
        }
      hash[0] = static_cast<int64_t>(h >> 1);
      Tensor all = empty({world}, {.dtype = DType::i64});
      group->all_gather(all, from_vector(hash))->wait();
      for (int64_t v : all.to_vector<int64_t>())
        if (v != hash[0])
          return fail("rank " + std::to_string(rank) + ": parameters differ between ranks");
      std::cout << "ok rank " << rank << std::endl;
      group->barrier()->wait();
      return 0;
    }
    const auto got = model->state_dict(), want = ref->state_dict();
    double worst = 0;
    std::string worst_name;
    for (size_t i = 0; i < got.size(); ++i) {
      const auto g = got[i].second.to_vector<double>(), w = want[i].second.to_vector<double>();
      for (size_t k = 0; k < g.size(); ++k) {
        // bf16 on the wire: gradients carry ~3 significant digits.
        const double tol = scenario == "bf16" ? 5e-3 : 1e-5;
        const double err = std::abs(g[k] - w[k]) / (tol + tol * std::abs(w[k]));
        if (!(err <= worst)) {
          worst = err;
          worst_name = got[i].first + "[" + std::to_string(k) + "] " + std::to_string(g[k]) +
                       " vs " + std::to_string(w[k]);
        }
      }
    }
    if (!(worst <= 1.0))
      return fail("rank " + std::to_string(rank) + ": differs from the union-batch reference at " +
                  worst_name);
    const auto& st = ddp.reducer().last_stats();
    std::cout << "ok rank " << rank << " buckets " << st.num_buckets << std::endl;
    group->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    return fail("rank " + std::to_string(rank) + ": " + e.what());
  }
}
