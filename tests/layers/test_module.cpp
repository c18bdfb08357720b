// Module: names, state_dict order and keys, load_state_dict checks, train/eval,
// dtype conversion that keeps handles valid, printing, parameter counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/layers.h"
#include "models/registry.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

// Registers a child before its own parameter and buffer: state_dict still lists
// own parameters, then own buffers, then children (PyTorch's order).
class Net : public nn::Module {
 public:
  Net() {
    conv1 = register_module("conv1",
                            std::make_shared<nn::Conv2d>(1, 2, 3, nn::Conv2dOptions{.padding = 1}));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
    head = register_module(
        "head", std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
                    std::make_shared<nn::Linear>(8, 4), std::make_shared<nn::ReLU>(),
                    std::make_shared<nn::Linear>(4, 3, nn::LinearOptions{.bias = false})}));
    scale = register_parameter("scale", ones({1}));
    steps = register_buffer("steps", zeros({1}));
  }
  Tensor forward(const Tensor& x) override {  // (N, 1, 2, 2) -> (N, 3)
    Tensor h = bn->forward(conv1->forward(x)).flatten(1);
    return head->forward(h) * scale;
  }
  std::string type_name() const override { return "Net"; }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Sequential> head;
  Tensor scale, steps;
};

std::vector<std::string> keys(const nn::StateDict& sd) {
  std::vector<std::string> k;
  for (const auto& [n, t] : sd) k.push_back(n);
  return k;
}

std::string load_error(nn::Module& m, const nn::StateDict& sd, nn::Strict strict) {
  try {
    m.load_state_dict(sd, strict);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Module, StateDictOrderAndKeysMatchPyTorch) {
  Net net;
  // The same list PyTorch 1.13 prints for the equivalent torch.nn.Module.
  EXPECT_EQ(keys(net.state_dict()),
            (std::vector<std::string>{"scale", "steps", "conv1.weight", "conv1.bias", "bn.weight",
                                      "bn.bias", "bn.running_mean", "bn.running_var",
                                      "bn.num_batches_tracked", "head.0.weight", "head.0.bias",
                                      "head.2.weight"}));
  EXPECT_EQ(keys(net.named_parameters()),
            (std::vector<std::string>{"scale", "conv1.weight", "conv1.bias", "bn.weight", "bn.bias",
                                      "head.0.weight", "head.0.bias", "head.2.weight"}));
  EXPECT_EQ(keys(net.named_parameters(false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(keys(net.named_buffers()),
            (std::vector<std::string>{"steps", "bn.running_mean", "bn.running_var",
                                      "bn.num_batches_tracked"}));
  std::vector<std::string> mods;
  for (auto& [n, m] : net.named_modules()) mods.push_back(n + ":" + m->type_name());
  EXPECT_EQ(mods,
            (std::vector<std::string>{":Net", "conv1:Conv2d", "bn:BatchNorm2d", "head:Sequential",
                                      "head.0:Linear", "head.1:ReLU", "head.2:Linear"}));
  EXPECT_EQ(net.named_children().size(), 3u);
  EXPECT_EQ(net.num_parameters(), 1 + (18 + 2) + (2 + 2) + (32 + 4) + 12);
  EXPECT_EQ(net.parameters().size(), 8u);
  // Parameters require grad, buffers do not; state_dict holds the same storage.
  EXPECT_TRUE(net.conv1->weight.requires_grad());
  EXPECT_FALSE(net.bn->running_mean.requires_grad());
  EXPECT_EQ(net.state_dict()[2].second.data_ptr(), net.conv1->weight.data_ptr());
  EXPECT_EQ(net.bn->num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(net.bn->num_batches_tracked.dim(), 0);
}

TEST(Module, SharedParametersAreListedOnce) {
  auto lin = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential seq{lin, lin};
  EXPECT_EQ(keys(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(seq.num_parameters(), 6);
  EXPECT_EQ(seq.state_dict().size(), 4u);  // state_dict keeps every name, as PyTorch
}

TEST(Module, LoadStateDictCopiesInPlace) {
  Net a, b;
  a.bn->running_mean.fill_(0.25);
  const void* ptr = b.conv1->weight.data_ptr();
  const Tensor handle = b.conv1->weight;
  b.load_state_dict(a.state_dict());
  for (const auto& [k, t] : a.state_dict()) {
    const auto& sd = b.state_dict();
    auto it = std::find_if(sd.begin(), sd.end(), [&](const auto& p) { return p.first == k; });
    ASSERT_NE(it, sd.end()) << k;
    EXPECT_EQ(it->second.to_vector<double>(), t.to_vector<double>()) << k;
  }
  EXPECT_EQ(b.conv1->weight.data_ptr(), ptr);  // no reallocation
  EXPECT_TRUE(handle.same(b.conv1->weight));
  EXPECT_EQ(handle.to_vector<float>(), a.conv1->weight.to_vector<float>());
  EXPECT_TRUE(b.conv1->weight.requires_grad());
  // Values in another dtype are converted on the way in.
  nn::StateDict sd = a.state_dict();
  for (auto& [k, t] : sd)
    if (is_floating(t.dtype())) t = t.to(DType::f64);
  b.load_state_dict(sd);
  EXPECT_EQ(b.conv1->weight.dtype(), DType::f32);
  EXPECT_EQ(b.bn->running_mean.to_vector<float>(), std::vector<float>(2, 0.25f));
}

TEST(Module, LoadStateDictListsMissingUnexpectedAndMisShapedKeys) {
  Net a, b;
  nn::StateDict sd = a.state_dict();
  sd.erase(sd.begin() + 2);  // conv1.weight
  sd.erase(sd.begin() + 5);  // bn.running_mean (after the first erase)
  sd.emplace_back("head.3.weight", zeros({3}));
  sd.emplace_back("extra", zeros({1}));
  const std::string err = load_error(b, sd, nn::Strict::yes);
  EXPECT_NE(err.find("[load_state_dict]"), std::string::npos) << err;
  EXPECT_NE(err.find("missing keys: \"conv1.weight\", \"bn.running_mean\""), std::string::npos)
      << err;
  EXPECT_NE(err.find("unexpected keys: \"head.3.weight\", \"extra\""), std::string::npos) << err;

  // A failed load leaves the model untouched.
  Net c;
  const auto before = c.head->at<nn::Linear>(0)->weight.to_vector<float>();
  EXPECT_FALSE(load_error(c, sd, nn::Strict::yes).empty());
  EXPECT_EQ(c.head->at<nn::Linear>(0)->weight.to_vector<float>(), before);

  // Strict::no skips missing and unexpected keys and loads the rest.
  EXPECT_EQ(load_error(c, sd, nn::Strict::no), "");
  EXPECT_EQ(c.head->at<nn::Linear>(0)->weight.to_vector<float>(),
            a.head->at<nn::Linear>(0)->weight.to_vector<float>());
  EXPECT_NE(c.conv1->weight.to_vector<float>(), a.conv1->weight.to_vector<float>());

  // Shape mismatches are errors even with Strict::no, naming the key and both shapes.
  nn::StateDict bad = a.state_dict();
  bad[9].second = zeros({4, 9});  // head.0.weight is (4, 8)
  for (auto strict : {nn::Strict::yes, nn::Strict::no}) {
    const std::string e = load_error(b, bad, strict);
    EXPECT_NE(e.find("size mismatch for \"head.0.weight\": checkpoint (4, 9) vs model (4, 8)"),
              std::string::npos)
        << e;
  }
}

TEST(Module, TrainEvalPropagates) {
  Net net;
  for (auto& [n, m] : net.named_modules()) EXPECT_TRUE(m->is_training()) << n;
  net.eval();
  for (auto& [n, m] : net.named_modules()) EXPECT_FALSE(m->is_training()) << n;
  net.head->train();
  EXPECT_FALSE(net.is_training());
  EXPECT_TRUE(net.head->at<nn::Linear>(2)->is_training());
  net.train();
  for (auto& [n, m] : net.named_modules()) EXPECT_TRUE(m->is_training()) << n;
}

TEST(Module, ToDtypeKeepsHandlesValid) {
  Net net;
  const Tensor held = net.conv1->weight;  // e.g. an optimizer's handle
  const std::vector<float> values = held.to_vector<float>();
  net.conv1->weight.set_grad(full(held.shape(), 0.5));
  net.to(DType::f64);
  EXPECT_EQ(held.dtype(), DType::f64);
  EXPECT_TRUE(held.same(net.conv1->weight));
  EXPECT_TRUE(held.requires_grad());
  EXPECT_EQ(held.grad().dtype(), DType::f64);
  EXPECT_EQ(net.state_dict()[2].second.dtype(), DType::f64);
  EXPECT_EQ(net.bn->running_var.dtype(), DType::f64);
  EXPECT_EQ(net.bn->num_batches_tracked.dtype(), DType::i64);  // integers stay
  const auto converted = held.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(converted[i], static_cast<double>(values[i]));
  // The model runs in f64, and gradients reach the held handle.
  net.zero_grad();
  EXPECT_FALSE(held.grad().defined());
  Tensor y = net.forward(rand({2, 1, 2, 2}, {.dtype = DType::f64}));
  EXPECT_EQ(y.dtype(), DType::f64);
  ops::sum(y).backward();
  ASSERT_TRUE(held.grad().defined());
  EXPECT_EQ(held.grad().dtype(), DType::f64);
  net.zero_grad(false);
  EXPECT_EQ(held.grad().to_vector<double>(), std::vector<double>(held.numel(), 0.0));
  net.to(DType::f32);
  EXPECT_EQ(held.dtype(), DType::f32);
  EXPECT_THROW(net.to(DType::i32), Error);
  net.to(kCPU);  // same device: a no-op that keeps the data
  EXPECT_EQ(held.to_vector<float>(), values);
}

TEST(Module, PrintsLikePyTorch) {
  Net net;
  EXPECT_EQ(net.str(),
            "Net(\n"
            "  (conv1): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (bn): BatchNorm2d(2, eps=1e-05, momentum=0.1, affine=True, "
            "track_running_stats=True)\n"
            "  (head): Sequential(\n"
            "    (0): Linear(in_features=8, out_features=4, bias=True)\n"
            "    (1): ReLU()\n"
            "    (2): Linear(in_features=4, out_features=3, bias=False)\n"
            "  )\n"
            ")");
}

TEST(Module, RegistrationRejectsBadNames) {
  struct Bad : nn::Module {
    Tensor forward(const Tensor& x) override { return x; }
    std::string type_name() const override { return "Bad"; }
    void add(const std::string& name) { register_parameter(name, zeros({1})); }
    void add_child(const std::string& name) { register_module(name, std::make_shared<nn::ReLU>()); }
  } m;
  m.add("w");
  EXPECT_THROW(m.add("w"), Error);
  EXPECT_THROW(m.add("a.b"), Error);
  EXPECT_THROW(m.add(""), Error);
  m.add_child("c");
  EXPECT_THROW(m.add_child("c"), Error);
}

TEST(Module, FmnistCnnHas421642Parameters) {
  models::register_builtin_models();
  auto m = models::create_model("fmnist_cnn", {.num_classes = 10, .in_channels = 1});
  EXPECT_EQ(m->num_parameters(), 421642);
  EXPECT_EQ(keys(m->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "7.weight",
                                      "7.bias", "9.weight", "9.bias"}));
}

}  // namespace
}  // namespace tcv
