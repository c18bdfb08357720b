// Semantic segmentation in a hand-written loop: writes a small data set of
// generated scenes (Fashion-MNIST items over textured backgrounds, with
// Pascal VOC class masks), trains PSPNet on a dilated ResNet-18 on random
// crops for a few steps with its auxiliary loss, then scores the val split's
// whole images with mIoU (the confusion matrix as cityscapesscripts counts it).
//
//   segment --data DIR [--steps 40] [--batch 4] [--crop 160] [--lr 0.01]
//           [--fmnist /usr/share/datasets/fashion-mnist]
// The exit status is 1 when the loss of the last ten steps, averaged, is not
// below that of the first ten.
#include <tcv/seg.h>
#include <tcv/train.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "example_args.h"

using namespace tcv;

int main(int argc, char** argv) try {
  const ExampleArgs arg(argc, argv,
                        {{"--steps", "40"},
                         {"--batch", "4"},
                         {"--crop", "160"},
                         {"--lr", "0.01"},
                         {"--fmnist", "/usr/share/datasets/fashion-mnist"}});
  const std::string root = arg.text("--data");
  if (root.empty()) throw Error("usage: segment --data DIR [--steps N] [--batch B] [--crop S]");
  const int64_t steps = arg.integer("--steps"), batch = arg.integer("--batch");
  const int64_t crop = arg.integer("--crop");
  const Device device = cuda_is_available() ? Device(DeviceType::CUDA) : kCPU;

  // The data: 96 training and 24 val scenes of 300 x 300, drawn once.
  if (!std::filesystem::exists(root + "/SegmentationClass"))
    data::write_scene_set({.fmnist_dir = arg.text("--fmnist"), .train = 96, .val = 24, .seed = 1},
                          root);
  auto train_set = std::make_shared<const data::SegDataset>(
      data::read_voc_seg({.root = root, .split = "train"}));
  auto val_set =
      std::make_shared<const data::SegDataset>(data::read_voc_seg({.root = root, .split = "val"}));
  const data::Normalize imagenet{255.0, {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
  data::SegDataLoader train_loader(
      train_set,
      data::seg_train_transform(
          {.crop = {crop, crop}, .fill = data::mean_fill(imagenet.mean, imagenet.div_value)}),
      {.batch_size = batch, .drop_last = true, .normalize = imagenet});
  data::SegDataLoader val_loader(val_set, data::seg_eval_transform({}),
                                 {.batch_size = batch, .shuffle = false, .normalize = imagenet});

  // Background + 10 classes; the auxiliary head reads layer3 (weight 0.4).
  const int64_t classes = train_set->num_classes();
  auto net = models::seg::pspnet_resnet18({.num_classes = classes});
  net->to(device);
  train::SGD sgd(net->named_parameters(),
                 {.lr = arg.number("--lr"), .momentum = 0.9, .weight_decay = 5e-4});
  const train::LrPolicy poly(
      {.kind = train::LrPolicyKind::lambda_poly, .base_lr = sgd.lr(), .max_iters = steps});

  std::vector<double> losses;
  net->train();
  for (int64_t epoch = 0; static_cast<int64_t>(losses.size()) < steps; ++epoch) {
    train_loader.start_epoch(epoch);
    for (data::SegBatch b; static_cast<int64_t>(losses.size()) < steps && train_loader.next(b);) {
      sgd.set_lr(poly.lr_at(static_cast<int64_t>(losses.size())));
      const models::seg::SegOutput out = net->forward_seg(b.images.to(device));
      const models::seg::SegLossTerms l = models::seg::seg_loss(out, b.labels.to(device));
      sgd.zero_grad();
      l.total.backward();
      sgd.step();
      losses.push_back(l.total.item());
      if (losses.size() % 10 == 0)
        std::printf("step %zu loss %.4f (main %.4f, aux %.4f)\n", losses.size(), l.total.item(),
                    l.main.item(), l.aux.item());
    }
  }

  // Whole val images, one at a time (their sizes may differ), argmax per pixel.
  net->eval();
  NoGradGuard no_grad;
  train::ConfusionMeter meter(classes);
  val_loader.start_epoch(0);
  for (data::SegBatch b; val_loader.next(b);)
    meter.update(net->forward(b.images.to(device)), b.labels.to(device));
  const train::SegMetrics m = meter.compute();
  std::printf("val: mIoU %.4f, pixel accuracy %.4f over %lld pixels\n", m.miou, m.pixel_acc,
              static_cast<long long>(m.pixels));

  return loss_fell(losses) ? 0 : 1;
} catch (const std::exception& e) {  // no Fashion-MNIST, an unwritable DIR, ...
  std::fprintf(stderr, "segment: %s\n", e.what());
  return 1;
}
