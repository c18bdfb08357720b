// tcv-conv-accuracy: the rounding error of each pass of the CPU f32
// convolution (forward, backward-data, backward-weights) against an f64
// reference, per algorithm, on the 3x3 layers of the models tcv trains
// (issue 28). For every output element e of a pass,
//
//   ratio = |f32 − f64| / (u · Σ|terms|),  u = 2⁻²⁴,
//
// where Σ|terms| is the pass evaluated in f64 on magnitudes (Σ|x||w| for y,
// Σ|dy||w| for dx, Σ|x||dy| for dweight). Direct convolution sums K terms per
// element (C·9 forward, K·9 backward-data, N·OH·OW backward-weights), so in
// any order ratio ≤ K/(1 − K·u) (Higham §3.1, tests/support/error_bound.h) and,
// modelling roundings as independent and of mean zero, ratio ≤ λ·√K with
// probability 1 − 2K·exp(−λ²/2) per element (Higham and Mary 2019); λ = 9
// keeps a miss below 1e-12 over every element here. Each row prints the
// largest ratio, those two bounds, and max|f32 − f64| / max|f64|.
//
// Three kinds of data: `random` (x = relu(N(0, 1)) independently per element,
// dy ~ N(0, 1)); `maps` (what a network carries: x = relu of a smooth random
// field per channel, so regions of each map are zero, and dy ~ N(0, 1) masked
// by another such field's ReLU); `masked` (maps whose every channel is also
// zero over a shared region, as an image's padding or background). An element whose terms are all
// zero has Σ|terms| = 0: direct convolution returns exactly 0 there in any order, and any other
// value is an infinite ratio ("inf").
//
//   OMP_NUM_THREADS=2 build/bench/tcv-conv-accuracy [--algo direct,winograd,auto]
//       [--data random,maps,masked] [--only SUBSTRING] [--batch N] [--time REPEATS]
//
// --time prints each pass's fastest of REPEATS calls in ms (plain NCHW in and
// out, so with the reorders a layer between other layouts pays); --check no
// skips the f64 reference (errors print as 0).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/cpu/conv.h"

namespace {

using namespace tcv;

struct LayerShape {
  const char* model;
  const char* layer;
  int64_t n, c, k, hw;
  int64_t dil = 1, stride = 1;
};

// 3x3, stride 1, "same" padding (1, or d where dilated by d), or stride 2 with
// padding 1: the layers Winograd can take. Batches as the issue and
// bench/compare run them.
const LayerShape kShapes[] = {
    {"vgg11_bn 64x64 b3", "features.4 64->128 @32", 3, 64, 128, 32},
    {"vgg11_bn 64x64 b3", "features.11 256->256 @16", 3, 256, 256, 16},
    {"vgg11_bn 64x64 b3", "features.15 256->512 @8", 3, 256, 512, 8},
    {"vgg11_bn 64x64 b3", "features.18 512->512 @8", 3, 512, 512, 8},
    {"resnet18 64x64 b3", "layer1 64->64 @16", 3, 64, 64, 16},
    {"resnet18 64x64 b3", "layer2 128->128 @8", 3, 128, 128, 8},
    {"resnet18 cifar b32", "layer1 64->64 @32", 32, 64, 64, 32},
    {"resnet18 cifar b32", "layer2 128->128 @16", 32, 128, 128, 16},
    {"resnet18 cifar b32", "layer3 256->256 @8", 32, 256, 256, 8},
    {"ssd300 b4", "conv1_2 64->64 @300", 4, 64, 64, 300},
    {"ssd300 b4", "conv3_3 256->256 @75", 4, 256, 256, 75},
    {"ssd300 b4", "conv4_3 512->512 @38", 4, 512, 512, 38},
    {"ssd300 b4", "conv5_3 512->512 @19", 4, 512, 512, 19},
    {"ssd300 b4", "loc0 512->16 @38", 4, 512, 16, 38},
    {"deeplabv3_r50 256 b4", "layer1 64->64 @64", 4, 64, 64, 64},
    {"deeplabv3_r50 256 b4", "layer2 128->128 @32", 4, 128, 128, 32},
    {"deeplabv3_r50 256 b4", "head 256->256 @32", 4, 256, 256, 32},
    {"deeplabv3_r50 256 b4", "layer3 256->256 d2 @32", 4, 256, 256, 32, 2},
    {"deeplabv3_r50 256 b4", "layer4 512->512 d4 @32", 4, 512, 512, 32, 4},
    {"pspnet_r50 256 b4", "head 4096->512 @32", 4, 4096, 512, 32},
    {"pspnet_r50 256 b4", "aux 1024->256 @32", 4, 1024, 256, 32},
    {"openpose 368 b2", "conv1_2 64->64 @368", 2, 64, 64, 368},
    {"openpose 368 b2", "conv3_4 256->256 @92", 2, 256, 256, 92},
    {"openpose 368 b2", "conv4_2 512->512 @46", 2, 512, 512, 46},
    {"openpose 368 b2", "cpm 512->256 @46", 2, 512, 256, 46},
    {"openpose 368 b2", "stage1 128->128 @46", 2, 128, 128, 46},
    {"resnet18 cifar b32", "layer2.0 64->128 s2 @32", 32, 64, 128, 32, 1, 2},
    {"resnet18 cifar b32", "layer3.0 128->256 s2 @16", 32, 128, 256, 16, 1, 2},
    {"resnet18 cifar b32", "layer4.0 256->512 s2 @8", 32, 256, 512, 8, 1, 2},
    {"deeplabv3_r50 256 b4", "layer2.0 128->128 s2 @64", 4, 128, 128, 64, 1, 2},
};

kernels::Conv2dGeom geom(const LayerShape& s) {
  kernels::Conv2dGeom g;
  g.n = s.n, g.c = s.c, g.h = s.hw, g.w = s.hw, g.k = s.k, g.r = 3, g.s = 3;
  g.oh = g.ow = s.stride == 2 ? (s.hw + 1) / 2 : s.hw;
  g.pad[0] = g.pad[1] = s.dil;
  g.dilation[0] = g.dilation[1] = s.dil;
  g.stride[0] = g.stride[1] = s.stride;
  return g;
}

struct PassError {
  double ratio = 0;     // max |err| / (u Σ|terms|)
  double normwise = 0;  // max |err| / max |ref|
};

PassError measure(const Tensor& got32, const Tensor& ref64, const Tensor& sums64) {
  const Tensor got = got32.to(DType::f64).contiguous();
  const double* a = got.data<double>();
  const double* r = ref64.data<double>();
  const double* m = sums64.data<double>();
  const double u = std::ldexp(1.0, -24);
  double worst = 0, max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double e = std::fabs(a[i] - r[i]);
    max_err = std::max(max_err, e);
    max_ref = std::max(max_ref, std::fabs(r[i]));
    if (m[i] > 0)
      worst = std::max(worst, e / (u * m[i]));
    else if (e > 0)
      worst = HUGE_VAL;
  }
  return {worst, max_ref > 0 ? max_err / max_ref : 0};
}

// relu of a random field smooth over about `scale` pixels: regions of zeros
// between positive blobs, as a ReLU network's feature maps.
Tensor smooth_field(const Shape& s, double scale, Generator* gen) {
  const auto coarse = [&](int64_t n) { return n / static_cast<int64_t>(scale) + 2; };
  const Tensor low = randn({s[0], s[1], coarse(s[2]), coarse(s[3])}, {.dtype = DType::f64}, gen);
  return ops::upsample(low, {s[2], s[3]}, {.mode = ops::InterpMode::bilinear});
}

Tensor empty_like_shape(const Shape& s, DType dt) {
  return empty(s, {.dtype = dt});
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> algos{"direct", "winograd", "auto"};
  std::vector<std::string> datas{"random", "maps", "masked"};
  std::string only;
  int64_t batch = 0;
  int repeats = 0;
  bool check = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--algo")
      algos = split(v);
    else if (flag == "--data")
      datas = split(v);
    else if (flag == "--only")
      only = v;
    else if (flag == "--time")
      repeats = std::atoi(v.c_str());
    else if (flag == "--check")
      check = v != "no";
    else if (flag == "--batch")
      batch = std::atoll(v.c_str());
    else {
      std::fprintf(
          stderr,
          "usage: %s [--algo direct,winograd,auto] [--data random,maps,masked] [--only TEXT] "
          "[--batch N] [--time REPEATS] [--check no]\n",
          argv[0]);
      return 2;
    }
  }
  std::printf("%-22s %-26s %-6s %-5s %-9s %-13s %10s %9s %9s %9s %9s\n", "model", "layer", "data",
              "pass", "algo", "impl", "max|e|/mx", "ratio", "l*sqrtK", "K", "ms");
  uint64_t seed = 1;
  for (LayerShape s : kShapes) {
    const std::string label = std::string(s.model) + " " + s.layer;
    if (!only.empty() && label.find(only) == std::string::npos) continue;
    if (batch > 0) s.n = batch;
    const kernels::Conv2dGeom g = geom(s);
    for (const std::string& data : datas) {
      Generator gen(seed++);
      // Post-ReLU activations, He-initialised weights, signed upstream gradients.
      const Shape xs{g.n, g.c, g.h, g.w}, ws{g.k, g.c, 3, 3}, ys{g.n, g.k, g.oh, g.ow};
      const bool maps = data == "maps" || data == "masked";
      Tensor x64 =
          ops::relu(maps ? smooth_field(xs, 6, &gen) : randn(xs, {.dtype = DType::f64}, &gen));
      const Tensor w64 =
          ops::mul(randn(ws, {.dtype = DType::f64}, &gen), std::sqrt(2.0 / (g.c * 9)));
      Tensor dy64 = randn(ys, {.dtype = DType::f64}, &gen);
      if (maps) dy64 = ops::mul(dy64, ops::gt(smooth_field(ys, 6, &gen), 0.0).to(DType::f64));
      if (data == "masked") {
        // About a third of each image zero in every channel.
        const auto shared = [&](const Shape& t) {
          return ops::gt(smooth_field({t[0], 1, t[2], t[3]}, 6, &gen), -0.45).to(DType::f64);
        };
        x64 = ops::mul(x64, shared(xs));
        dy64 = ops::mul(dy64, shared(ys));
      }
      // Round to f32 first: the reference sees exactly the f32 inputs.
      const Tensor x32 = x64.to(DType::f32), w32 = w64.to(DType::f32), dy32 = dy64.to(DType::f32);
      const Tensor x = x32.to(DType::f64), w = w32.to(DType::f64), dy = dy32.to(DType::f64);
      const Tensor ax = ops::abs(x).contiguous(), aw = ops::abs(w).contiguous(),
                   ady = ops::abs(dy).contiguous();
      Tensor y_ref = empty_like_shape(ys, DType::f64), y_abs = empty_like_shape(ys, DType::f64);
      Tensor dx_ref = empty_like_shape(xs, DType::f64), dx_abs = empty_like_shape(xs, DType::f64);
      Tensor dw_ref = empty_like_shape(ws, DType::f64), dw_abs = empty_like_shape(ws, DType::f64);
      if (check) {
        kernels::cpu::conv2d_forward(g, x.strided_desc(), w.strided_desc(), nullptr,
                                     y_ref.strided_desc());
        kernels::cpu::conv2d_forward(g, ax.strided_desc(), aw.strided_desc(), nullptr,
                                     y_abs.strided_desc());
        const kernels::KTensor dxk = dx_ref.strided_desc(), dwk = dw_ref.strided_desc();
        kernels::cpu::conv2d_backward(g, x.strided_desc(), w.strided_desc(), dy.strided_desc(),
                                      &dxk, &dwk, nullptr);
        const kernels::KTensor dxa = dx_abs.strided_desc(), dwa = dw_abs.strided_desc();
        kernels::cpu::conv2d_backward(g, ax.strided_desc(), aw.strided_desc(), ady.strided_desc(),
                                      &dxa, &dwa, nullptr);
      }
      const int64_t terms[3] = {g.c * 9, g.k * 9, g.n * g.oh * g.ow};
      for (const std::string& name : algos) {
        const ops::ConvAlgo algo = ops::parse_conv_algo(name, "--algo");
        ops::set_conv_algo(algo);
        const std::string impls = kernels::cpu::conv2d_impl_names(g);
        std::vector<std::string> impl(3);
        {
          size_t p0 = 0;
          for (int i = 0; i < 3; ++i) {
            const size_t p1 = impls.find(" / ", p0);
            impl[i] = impls.substr(p0, p1 == std::string::npos ? std::string::npos : p1 - p0);
            impl[i] = impl[i].substr(0, impl[i].find(':'));
            p0 = p1 == std::string::npos ? impls.size() : p1 + 3;
          }
        }
        Tensor y = empty_like_shape(ys, DType::f32), dx = empty_like_shape(xs, DType::f32),
               dw = empty_like_shape(ws, DType::f32);
        kernels::cpu::conv2d_forward(g, x32.strided_desc(), w32.strided_desc(), nullptr,
                                     y.strided_desc());
        const kernels::KTensor dxk = dx.strided_desc(), dwk = dw.strided_desc();
        kernels::cpu::conv2d_backward(g, x32.strided_desc(), w32.strided_desc(),
                                      dy32.strided_desc(), &dxk, nullptr, nullptr);
        kernels::cpu::conv2d_backward(g, x32.strided_desc(), w32.strided_desc(),
                                      dy32.strided_desc(), nullptr, &dwk, nullptr);
        PassError e[3];
        if (check)
          e[0] = measure(y, y_ref, y_abs), e[1] = measure(dx, dx_ref, dx_abs),
          e[2] = measure(dw, dw_ref, dw_abs);
        // The fastest of `repeats` calls of each pass (plain NCHW in and out).
        double ms[3] = {0, 0, 0};
        for (int i = 0; i < 3 && repeats > 0; ++i) {
          ms[i] = HUGE_VAL;
          for (int rep = 0; rep < repeats; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            if (i == 0)
              kernels::cpu::conv2d_forward(g, x32.strided_desc(), w32.strided_desc(), nullptr,
                                           y.strided_desc());
            else
              kernels::cpu::conv2d_backward(g, x32.strided_desc(), w32.strided_desc(),
                                            dy32.strided_desc(), i == 1 ? &dxk : nullptr,
                                            i == 2 ? &dwk : nullptr, nullptr);
            ms[i] = std::min(ms[i], std::chrono::duration<double, std::milli>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
          }
        }
        const char* pass[3] = {"fwd", "bwdd", "bwdw"};
        for (int i = 0; i < 3; ++i)
          std::printf("%-22s %-26s %-6s %-5s %-9s %-13s %10.2e %9.1f %9.1f %9lld %9.2f\n", s.model,
                      s.layer, data.c_str(), pass[i], name.c_str(), impl[i].c_str(), e[i].normwise,
                      e[i].ratio, 9.0 * std::sqrt(static_cast<double>(terms[i])),
                      static_cast<long long>(terms[i]), ms[i]);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
