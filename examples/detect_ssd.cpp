// Object detection in a hand-written loop: writes a small data set of
// generated scenes (Fashion-MNIST items over textured backgrounds, with Pascal
// VOC annotations), trains the light SSD300 on it for a few steps with SSD's
// augmentation and MultiBox loss, then detects on the val split and scores the
// detections with the Pascal VOC 2007 mAP.
//
//   detect_ssd --data DIR [--steps 40] [--batch 8] [--lr 0.003]
//              [--fmnist /usr/share/datasets/fashion-mnist]
// The exit status is 1 when the loss of the last ten steps, averaged, is not
// below that of the first ten.
#include <tcv/det.h>
#include <tcv/train.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "example_args.h"

using namespace tcv;

int main(int argc, char** argv) try {
  const ExampleArgs arg(argc, argv,
                        {{"--steps", "40"},
                         {"--batch", "8"},
                         {"--lr", "0.003"},
                         {"--fmnist", "/usr/share/datasets/fashion-mnist"}});
  const std::string root = arg.text("--data");
  if (root.empty()) throw Error("usage: detect_ssd --data DIR [--steps N] [--batch B] [--lr LR]");
  const int64_t steps = arg.integer("--steps"), batch = arg.integer("--batch");
  const Device device = cuda_is_available() ? Device(DeviceType::CUDA) : kCPU;

  // The data: 96 training and 24 val scenes of 300 x 300, drawn once.
  if (!std::filesystem::exists(root + "/Annotations"))
    data::write_scene_set({.fmnist_dir = arg.text("--fmnist"), .train = 96, .val = 24, .seed = 1},
                          root);
  auto train_set =
      std::make_shared<const data::DetDataset>(data::read_voc({.roots = {root}, .split = "train"}));
  auto val_set =
      std::make_shared<const data::DetDataset>(data::read_voc({.roots = {root}, .split = "val"}));
  const data::Normalize imagenet{255.0, {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
  data::DetDataLoader train_loader(train_set, data::ssd_train_transform({.size = 300}),
                                   {.batch_size = batch, .drop_last = true, .normalize = imagenet});
  data::DetDataLoader val_loader(val_set, data::det_eval_transform(300),
                                 {.batch_size = batch, .shuffle = false, .normalize = imagenet});

  // SSD300 at a quarter of VGG-16's width, with batch norm: 10 classes + background.
  const int64_t classes = static_cast<int64_t>(train_set->class_names().size()) + 1;
  auto net = models::det::ssd300_lite({.num_classes = classes});
  net->to(device);
  const Tensor anchors = net->default_boxes(300, 300, device);  // (8732, 4) pixels
  train::SGD sgd(net->named_parameters(), {.lr = arg.number("--lr"),
                                           .momentum = 0.9,
                                           .weight_decay = 5e-4,
                                           .no_decay = train::NoDecay::bn_and_bias});

  std::vector<double> losses;
  net->train();
  for (int64_t epoch = 0; static_cast<int64_t>(losses.size()) < steps; ++epoch) {
    train_loader.start_epoch(epoch);
    for (data::DetBatch b; static_cast<int64_t>(losses.size()) < steps && train_loader.next(b);) {
      // Targets in network-input pixels: the loader gives fractions of the image.
      std::vector<models::det::DetTarget> targets;
      for (int64_t i = 0; i < b.size(); ++i)
        targets.push_back({(b.boxes[i] * 300.0).to(device), b.labels[i].to(device)});
      const models::det::SsdOutput out = net->forward_heads(b.images.to(device));
      const models::det::MultiBoxLosses l =
          models::det::multibox_loss(out.loc, out.conf, anchors, targets);
      sgd.zero_grad();
      Tensor loss = l.total();
      loss.backward();
      sgd.step();
      losses.push_back(loss.item());
      if (losses.size() % 10 == 0)
        std::printf("step %zu loss %.4f (boxes %.4f, classes %.4f, %lld anchors matched)\n",
                    losses.size(), loss.item(), l.bbox_regression.item(), l.classification.item(),
                    static_cast<long long>(l.num_matched));
    }
  }

  // Detect on the val split; boxes back to each image's own pixels for the evaluator.
  net->eval();
  NoGradGuard no_grad;
  train::DetectionEvaluator evaluator(
      {.metric = train::DetMetric::voc07, .class_names = train_set->class_names()});
  val_loader.start_epoch(0);
  for (data::DetBatch b; val_loader.next(b);) {
    const models::det::SsdOutput out = net->forward_heads(b.images.to(device));
    const auto dets = models::det::postprocess_detections(out.loc, out.conf, anchors, {300, 300});
    for (int64_t i = 0; i < b.size(); ++i) {
      const auto [h, w] = b.sizes[i];
      evaluator.add(b.image_ids[i], val_set->record(b.indices[i]).target,
                    (dets[i].boxes / 300.0).to(kCPU), dets[i].scores.to(kCPU),
                    dets[i].labels.to(kCPU), static_cast<double>(w), static_cast<double>(h));
    }
  }
  const train::Metrics m = evaluator.finish();
  std::printf("val: %lld images, VOC07 mAP %.4f\n", static_cast<long long>(evaluator.images()),
              train::metric(m, "map"));

  return loss_fell(losses) ? 0 : 1;
} catch (const std::exception& e) {  // no Fashion-MNIST, an unwritable DIR, ...
  std::fprintf(stderr, "detect_ssd: %s\n", e.what());
  return 1;
}
