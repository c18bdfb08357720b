#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "train/config.h"

using tcv::train::Config;
using tcv::train::ConfigError;

namespace {

// The message of the ConfigError fn throws ("" and a failure when none).
template <typename F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

bool has(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

}  // namespace

TEST(Config, Defaults) {
  Config c;
  EXPECT_EQ(c.get_int("train.batch_size"), 64);
  EXPECT_EQ(c.get_string("network.model_name"), "fmnist_cnn");
  EXPECT_EQ(c.get_string("solver.lr.lr_policy"), "fixed");
  EXPECT_DOUBLE_EQ(c.get_double("solver.optim.sgd.momentum"), 0.9);
  EXPECT_FALSE(c.get_bool("network.distributed"));
  EXPECT_EQ(c.get_doubles("solver.optim.adamw.betas"), (std::vector<double>{0.9, 0.999}));
  EXPECT_EQ(c.source("train.batch_size"), "default");
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, ParsesTablesAndDottedKeys) {
  const Config c = Config::from_string(R"(
seed = 3
[train]
batch_size = 32
[solver.lr]
base_lr = 1        # an integer is fine for a float key
lr_policy = "multistep"
multistep.stepvalue = [2, 4]
)",
                                       "x.toml");
  EXPECT_EQ(c.get_int("seed"), 3);
  EXPECT_EQ(c.get_int("train.batch_size"), 32);
  EXPECT_DOUBLE_EQ(c.get_double("solver.lr.base_lr"), 1.0);
  EXPECT_EQ(c.get_ints("solver.lr.multistep.stepvalue"), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(c.source("train.batch_size"), "x.toml:4");
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, OverridesWithSet) {
  Config c = Config::from_string("[solver.lr]\nbase_lr = 0.1\n", "x.toml");
  c.set_override("solver.lr.base_lr=0.05");
  c.set_override("solver.lr.lr_policy=cosine");  // bare word for a string key
  c.set_override("network.model_name=\"fmnist_resnet\"");
  c.set_override("train.drop_last=false");
  c.set_override("data.normalize.mean=[0.5, 0.25]");
  c.set_override("solver.max_iters = 30");
  EXPECT_DOUBLE_EQ(c.get_double("solver.lr.base_lr"), 0.05);
  EXPECT_EQ(c.get_string("solver.lr.lr_policy"), "cosine");
  EXPECT_EQ(c.get_string("network.model_name"), "fmnist_resnet");
  EXPECT_FALSE(c.get_bool("train.drop_last"));
  EXPECT_EQ(c.get_doubles("data.normalize.mean"), (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(c.get_int("solver.max_iters"), 30);
  EXPECT_EQ(c.source("solver.lr.base_lr"), "--set");

  const std::string unknown = error_of([&] { c.set_override("solver.lr.base_lrr=0.1"); });
  EXPECT_TRUE(has(unknown, "solver.lr.base_lrr")) << unknown;
  EXPECT_TRUE(has(unknown, "did you mean 'solver.lr.base_lr'")) << unknown;
  const std::string bad = error_of([&] { c.set_override("train.batch_size=abc"); });
  EXPECT_TRUE(has(bad, "train.batch_size")) << bad;
  EXPECT_TRUE(has(bad, "expected an integer")) << bad;
  EXPECT_TRUE(has(error_of([&] { c.set_override("train.batch_size"); }), "key=value"));
}

TEST(Config, UnknownKeyNamesKeyLineAndSuggestion) {
  const std::string msg = error_of([] {
    Config::from_string("seed = 1\n[train]\nbatch_size = 8\nbatchsize = 16\n", "cfg.toml");
  });
  EXPECT_TRUE(has(msg, "cfg.toml:4")) << msg;
  EXPECT_TRUE(has(msg, "train.batchsize")) << msg;
  EXPECT_TRUE(has(msg, "did you mean 'train.batch_size'")) << msg;

  // The right name in the wrong table.
  const std::string moved =
      error_of([] { Config::from_string("\n[data]\nbase_lr = 0.1\n", "m.toml"); });
  EXPECT_TRUE(has(moved, "m.toml:3")) << moved;
  EXPECT_TRUE(has(moved, "solver.lr.base_lr")) << moved;

  // A table given a value.
  const std::string table = error_of([] { Config::from_string("[solver]\nlr = 0.1\n", "t.toml"); });
  EXPECT_TRUE(has(table, "it is a table")) << table;
}

TEST(Config, WrongTypeNamesKeyAndLine) {
  const std::string msg = error_of(
      [] { Config::from_string("[solver.lr]\n\nbase_lr = \"fast\"\n", "configs/x.toml"); });
  EXPECT_EQ(msg, "configs/x.toml:3: solver.lr.base_lr: expected a number, got string");
  const std::string arr = error_of(
      [] { Config::from_string("[solver.lr.multistep]\nstepvalue = [1, 2.5]\n", "a.toml"); });
  EXPECT_TRUE(has(arr, "a.toml:2: solver.lr.multistep.stepvalue: expected an array of integers"))
      << arr;
  const std::string syntax = error_of([] { Config::from_string("seed = = 1\n", "s.toml"); });
  EXPECT_TRUE(has(syntax, "s.toml:1:")) << syntax;
}

TEST(Config, BadValuesNameKeyAndLine) {
  const std::string neg =
      error_of([] { Config::from_string("[train]\nbatch_size = -4\n", "b.toml").validate(); });
  EXPECT_EQ(neg, "b.toml:2: train.batch_size: must be positive, got -4");

  const std::string policy = error_of(
      [] { Config::from_string("[solver.lr]\nlr_policy = \"linear\"\n", "p.toml").validate(); });
  EXPECT_TRUE(has(policy, "p.toml:2: solver.lr.lr_policy: unknown value 'linear'")) << policy;
  EXPECT_TRUE(has(policy, "fixed, step, multistep, cosine, lambda_poly")) << policy;

  const std::string dist =
      error_of([] { Config::from_string("[network]\ndistributed = true\n", "d.toml").validate(); });
  EXPECT_TRUE(has(dist, "d.toml:2: network.distributed")) << dist;
  EXPECT_TRUE(has(dist, "distributed backend")) << dist;

  Config c;
  c.set_override("loss.label_smoothing=1.5");
  EXPECT_TRUE(
      has(error_of([&] { c.validate(); }), "--set: loss.label_smoothing: must be in [0, 1)"));
  Config w;
  w.set_override("solver.lr.is_warm=true");
  EXPECT_TRUE(has(error_of([&] { w.validate(); }), "solver.lr.warm.warm_iters"));
}

TEST(Config, WritesResolvedTomlThatReadsBack) {
  Config c = Config::from_string("[solver.lr]\nbase_lr = 0.05\nlr_policy = \"cosine\"\n", "r.toml");
  c.set_override("data.normalize.std=[0.25, 0.5]");
  c.set_override("network.resume=\"a \\\"quoted\\\" path\"");
  const std::string text = c.to_toml();
  EXPECT_TRUE(has(text, "[solver.lr]\nbase_lr = 0.05")) << text;
  const Config back = Config::from_string(text, "back.toml");
  for (const auto& spec : tcv::train::config_schema())
    EXPECT_EQ(back.get(spec.key), c.get(spec.key)) << spec.key;
  EXPECT_EQ(back.get_string("network.resume"), "a \"quoted\" path");

  const auto p = std::filesystem::temp_directory_path() / "tcv_test_config.toml";
  std::ofstream(p) << text;
  EXPECT_EQ(Config::from_file(p.string()).get_double("solver.lr.base_lr"), 0.05);
  std::filesystem::remove(p);
  EXPECT_TRUE(
      has(error_of([] { Config::from_file("/nonexistent/x.toml"); }), "/nonexistent/x.toml"));
}

TEST(Config, ShippedConfigsAreValid) {
  const char* src = std::getenv("TCV_SOURCE_DIR");
  // ctest sets TCV_SOURCE_DIR; run by hand, the tree is three levels above this file.
  const std::string root =
      src ? src
          : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  for (const char* f : {"configs/cls/fmnist_cnn.toml", "configs/cls/fmnist_resnet.toml"}) {
    const Config c = Config::from_file(root + "/" + f);
    EXPECT_NO_THROW(c.validate()) << f;
    EXPECT_EQ(c.get_string("data.dataset"), "fashion_mnist") << f;
  }
}

TEST(Config, SolverKeysForAdamGroupsAndClipping) {
  Config c = Config::from_string(
      "[solver]\nclip_grad_norm = 5.0\n[solver.optim]\noptim_method = \"adam\"\n"
      "nodecay_bn_bias = true\nadam.betas = [0.8, 0.99]\nadam.weight_decay = 1e-4\n",
      "a.toml");
  c.validate();
  EXPECT_DOUBLE_EQ(c.get_double("solver.clip_grad_norm"), 5.0);
  EXPECT_EQ(c.get_string("solver.optim.optim_method"), "adam");
  EXPECT_TRUE(c.get_bool("solver.optim.nodecay_bn_bias"));
  EXPECT_EQ(c.get_doubles("solver.optim.adam.betas"), (std::vector<double>{0.8, 0.99}));
  EXPECT_DOUBLE_EQ(c.get_double("solver.optim.adam.eps"), 1e-8);
  EXPECT_DOUBLE_EQ(Config().get_double("solver.optim.adam.weight_decay"), 0.0);  // torch's default
  EXPECT_DOUBLE_EQ(Config().get_double("solver.clip_grad_norm"), 0.0);           // off

  Config bad;
  bad.set_override("solver.optim.adam.betas=[0.9]");
  EXPECT_TRUE(has(error_of([&] { bad.validate(); }), "solver.optim.adam.betas: expected 2 values"));
  Config neg;
  neg.set_override("solver.clip_grad_norm=-1");
  EXPECT_TRUE(has(error_of([&] { neg.validate(); }), "solver.clip_grad_norm: must be >= 0"));
  Config opt;
  opt.set_override("solver.optim.optim_method=rmsprop");
  EXPECT_TRUE(has(error_of([&] { opt.validate(); }), "(valid: sgd, adam, adamw)"));
  Config poly;
  poly.set_override("solver.lr.lr_policy=poly");
  poly.validate();
}
