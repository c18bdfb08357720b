// Data-parallel training of a custom model with DistributedDataParallel, one
// process per rank, Gloo between CPU processes:
//   tcv-run --nproc-per-node 2 -- ./ddp_train [--epochs 5]
// tcv-run (as torchrun) sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
// Backward averages the gradients over the ranks, so every rank makes the same
// updates; the program checks that at the end.
#include <tcv/tcv.h>

#include <cstdio>
#include <string>

using namespace tcv;

// 16x16 images whose brighter quadrant is the class (0..3), the same on every rank.
std::shared_ptr<data::ImageClassificationDataset> quadrants(int64_t n) {
  manual_seed(0);
  Tensor images = randint(0, 200, {n, 1, 16, 16}, {.dtype = DType::u8});
  Tensor labels = randint(0, 4, {n});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = labels.data<int64_t>()[i];
    Tensor quadrant = images.select(0, i).narrow(1, y / 2 * 8, 8).narrow(2, y % 2 * 8, 8);
    quadrant.add_(full({1}, 50, {.dtype = DType::u8}));  // a view: changes images
  }
  return std::make_shared<data::ImageClassificationDataset>(images, labels, 4, "quadrants");
}

struct QuadrantNet : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc;
  QuadrantNet() {
    conv1 = register_module("conv1",
                            std::make_shared<nn::Conv2d>(1, 8, 3, nn::Conv2dOptions{.padding = 1}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(
                                         8, 16, 3, nn::Conv2dOptions{.stride = 2, .padding = 1}));
    fc = register_module("fc", std::make_shared<nn::Linear>(16 * 8 * 8, 4));
  }
  Tensor forward(const Tensor& x) override {  // (N, 1, 16, 16) -> (N, 4)
    Tensor h = ops::relu(conv2->forward(ops::relu(conv1->forward(x))));
    return fc->forward(h.flatten(1));
  }
  std::string type_name() const override { return "QuadrantNet"; }
};

int main(int argc, char** argv) try {
  const int64_t epochs = argc == 3 && std::string(argv[1]) == "--epochs" ? std::stoll(argv[2]) : 5;
  const dist::DistEnv env = dist::read_dist_env();
  auto store = dist::connect_job_store(env);  // rank 0's, or tcv-run's
  auto group = dist::make_gloo_group(store, env.rank, env.world_size);

  // Each rank iterates its share of every epoch (with a DistributedSampler).
  data::DataLoader loader(quadrants(512),
                          {.batch_size = 16, .world_size = env.world_size, .rank = env.rank});
  manual_seed(100 + env.rank);  // other initial weights on each rank...
  auto model = std::make_shared<QuadrantNet>();
  dist::DDP ddp(model, group);  // ...until DDP broadcasts rank 0's
  train::SGD sgd(model->named_parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    train::AverageMeter loss;
    loader.start_epoch(epoch);
    for (data::Batch b; loader.next(b);) {
      sgd.zero_grad();
      Tensor l = ops::cross_entropy(ddp(b.x), b.y);
      l.backward();  // all-reduces the gradients while it runs
      sgd.step();
      loss.update(l.item(), b.x.size(0));
    }
    if (env.rank == 0) std::printf("epoch %lld: loss %.4g\n", (long long)epoch + 1, loss.mean());
  }

  Tensor differing = zeros({1});  // parameters unlike rank 0's, over all ranks
  for (const auto& [name, p] : model->named_parameters()) {
    Tensor rank0 = p.detach().clone();
    group->broadcast(rank0, 0)->wait();
    if (ops::max(ops::abs(rank0 - p.detach())).item() != 0.0) differing.add_(ones({1}));
  }
  group->all_reduce(differing)->wait();
  if (env.rank == 0) std::printf("parameters differing between ranks: %g\n", differing.item());
  return differing.item() == 0 ? 0 : 1;
} catch (const std::exception& e) {  // e.g. started without tcv-run: no RANK, WORLD_SIZE, ...
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
