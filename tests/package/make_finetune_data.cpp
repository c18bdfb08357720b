// What examples/finetune_resnet.cpp needs, made here instead of downloaded:
//   make_finetune_data DIR
// writes DIR/resnet18.safetensors, a ResNet-18 with torchvision's names and
// 1000-class head as scripts/convert_torchvision.py writes one (its weights
// are tcv's fresh initialisation, not trained ones), and DIR/images/{train,val}/
// with one folder of 40x40 PNG images per class: noise tinted red, green or
// blue, which any crop of an image shows.
#include <tcv/tcv.h>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace tcv;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_finetune_data DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  manual_seed(0);
  save_safetensors(dir + "/resnet18.safetensors", models::cls::resnet18()->state_dict());
  const char* classes[] = {"blue", "green", "red"};
  for (const auto& [split, per_class] : {std::pair<std::string, int>{"train", 16}, {"val", 8}}) {
    for (int c = 0; c < 3; ++c) {
      const std::string folder = dir + "/images/" + split + "/" + classes[c];
      std::filesystem::create_directories(folder);
      for (int i = 0; i < per_class; ++i) {
        Tensor image = randint(0, 140, {3, 40, 40}, {.dtype = DType::u8});
        image.select(0, 2 - c).add_(full({40, 40}, 110.0, {.dtype = DType::u8}));
        data::write_image(folder + "/" + std::to_string(i) + ".png", image);
      }
    }
  }
  std::printf("ok\n");
  return 0;
}
