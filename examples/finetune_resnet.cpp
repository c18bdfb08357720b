// Fine-tunes a torchvision ResNet on an image folder in a hand-written loop.
//
// Convert torchvision's weights once (on a machine with PyTorch; tcv never needs it):
//   python3 scripts/convert_torchvision.py resnet18.pth resnet18.safetensors
// and lay the images out as torchvision's ImageFolder, one directory per class
// under DIR/train and DIR/val:
//   ./finetune_resnet --weights resnet18.safetensors --data DIR [--arch resnet18]
//                     [--size 224] [--epochs 1] [--batch 32] [--lr 0.01] [--min-top1 0]
// The exit status is 1 when the validation top-1 (%) ends below --min-top1.
#include <tcv/tcv.h>

#include <cstdio>
#include <string>

#include "example_args.h"

using namespace tcv;

int main(int argc, char** argv) try {
  const ExampleArgs arg(argc, argv,
                        {{"--arch", "resnet18"},
                         {"--size", "224"},
                         {"--epochs", "1"},
                         {"--batch", "32"},
                         {"--lr", "0.01"},
                         {"--min-top1", "0"}});
  const int64_t size = arg.integer("--size"), epochs = arg.integer("--epochs");
  const Device device = cuda_is_available() ? Device(DeviceType::CUDA) : kCPU;

  // torchvision's ImageNet preprocessing: random crops and flips to train on,
  // the central crop to evaluate.
  const std::vector<double> mean{0.485, 0.456, 0.406}, std{0.229, 0.224, 0.225};
  auto train_set = std::make_shared<data::ImageFolder>(
      arg.text("--data") + "/train",
      data::Compose({data::RandomResizedCrop{.size = size}, data::RandomHorizontalFlip{},
                     data::NormalizeImage{mean, std}}));
  auto val_set = std::make_shared<data::ImageFolder>(
      arg.text("--data") + "/val",
      data::Compose({data::Resize{.size = size * 8 / 7}, data::CenterCrop{size},
                     data::NormalizeImage{mean, std}}));
  const int64_t batch = arg.integer("--batch"), classes = train_set->num_classes();
  data::DataLoader train_loader(train_set, {.batch_size = batch, .workers = 2});
  data::DataLoader val_loader(val_set, {.batch_size = batch, .shuffle = false});

  // The ResNet with a head for our classes; every pretrained tensor loads by its
  // torchvision name, except the 1000-class head fc.*, which keeps its fresh init.
  models::register_builtin_models();
  auto net = models::create_model(arg.text("--arch"), {.num_classes = classes});
  const train::PretrainedLoad loaded = train::load_pretrained(arg.text("--weights"), *net);
  std::printf("%lld pretrained tensors loaded, %zu left at init (new head), %lld classes\n",
              (long long)loaded.loaded, loaded.kept.size(), (long long)classes);
  net->to(device);

  train::SGD sgd(net->named_parameters(),
                 {.lr = arg.number("--lr"), .momentum = 0.9, .weight_decay = 1e-4});
  const train::LrPolicy cosine({.kind = train::LrPolicyKind::cosine,
                                .base_lr = sgd.lr(),
                                .max_iters = epochs * train_loader.num_batches()});
  int64_t iter = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    net->train();
    train_loader.start_epoch(epoch);
    for (data::Batch b; train_loader.next(b); ++iter) {
      sgd.set_lr(cosine.lr_at(iter));
      sgd.zero_grad();
      Tensor loss = ops::cross_entropy(net->forward(b.x.to(device)), b.y.to(device));
      loss.backward();
      sgd.step();
      if (iter % 10 == 0)
        std::printf("epoch %lld iter %lld lr %.4f loss %.4f\n", (long long)epoch + 1,
                    (long long)iter + 1, sgd.lr(), loss.item());
    }
  }

  net->eval();
  NoGradGuard no_grad;
  train::AccuracyMeter accuracy;
  val_loader.start_epoch(0);
  for (data::Batch b; val_loader.next(b);)
    accuracy.update(net->forward(b.x.to(device)), b.y.to(device));
  std::printf("val top-1 %.1f%% of %lld images (chance %.1f%%)\n", accuracy.top1(),
              (long long)accuracy.count(), 100.0 / classes);
  return accuracy.top1() >= arg.number("--min-top1") ? 0 : 1;
} catch (const std::exception& e) {  // a missing file, weights that do not fit the model, ...
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
