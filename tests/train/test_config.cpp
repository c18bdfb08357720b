#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "support/gradcheck.h"
#include "support/tasks.h"
#include "support/temp_dir.h"
#include "train/config.h"

using tcv::testing::error_of;
using tcv::train::Config;
using tcv::train::ConfigError;

namespace {

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

TEST(Config, SettingsHoldTheParsedKeys) {
  Config c = Config::from_string(R"(
seed = 7
device = "cpu"
[train]
batch_size = 32
amp = "f16"
[solver]
nonfinite = "skip"
[solver.lr]
base_lr = 2            # an integer for a float key
lr_policy = "poly"     # lambda_poly's alias
metric = "iters"
is_warm = true
warm.warm_epochs = 3
[solver.optim]
optim_method = "adamw"
adamw.betas = [0.8, 0.99]
[network]
bucket_plan = "cap"
comm_hook = "powersgd"
powersgd.rank = 4
powersgd.start_iter = 10
[data]
normalize.mean = [0.5, 0.25, 0.125]
)",
                                 "s.toml");
  const tcv::train::Settings& s = c.settings();
  EXPECT_EQ(s.task, "cls");
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.device, tcv::train::DeviceChoice::cpu);
  EXPECT_EQ(s.train.batch_size, 32);
  EXPECT_EQ(s.train.amp, tcv::train::AmpMode::f16);
  EXPECT_FALSE(s.train.conv_algo_set);
  EXPECT_EQ(s.solver.nonfinite, tcv::train::NonFinite::skip);
  EXPECT_DOUBLE_EQ(s.solver.lr.base_lr, 2.0);
  EXPECT_EQ(s.solver.lr.lr_policy, tcv::train::LrPolicyKind::lambda_poly);
  EXPECT_FALSE(s.solver.lr.per_epoch);
  EXPECT_TRUE(s.solver.lr.is_warm);
  EXPECT_EQ(s.solver.lr.warm_epochs, 3);
  EXPECT_EQ(s.solver.optim.method, tcv::train::OptimMethod::adamw);
  EXPECT_DOUBLE_EQ(s.solver.optim.adamw.beta1, 0.8);
  EXPECT_DOUBLE_EQ(s.solver.optim.adamw.beta2, 0.99);
  EXPECT_DOUBLE_EQ(s.solver.optim.adamw.weight_decay, 0.01);  // the default
  EXPECT_EQ(s.network.bucket_plan, tcv::train::BucketPlanChoice::cap);
  EXPECT_EQ(s.network.comm_hook, "powersgd");
  EXPECT_EQ(s.network.powersgd.matrix_approximation_rank, 4);
  EXPECT_EQ(s.network.powersgd.start_powerSGD_iter, 10);
  EXPECT_EQ(s.data.normalize.mean, (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_DOUBLE_EQ(s.data.normalize.div_value, 255.0);
  EXPECT_EQ(&c.settings(), &s);  // parsed once
  // A change parses again; a bad value is validate()'s error, naming key and line.
  c.set_override("train.batch_size=16");
  EXPECT_EQ(c.settings().train.batch_size, 16);
  c.set_override("train.amp=fp8");
  EXPECT_EQ(error_of<ConfigError>([&] { c.settings(); }),
            "--set: train.amp: unknown value 'fp8' (valid: off, bf16, f16)");
  EXPECT_EQ(error_of<ConfigError>(
                [] { Config::from_string("[val]\nbatch_size = 0\n", "v.toml").settings(); }),
            "v.toml:2: val.batch_size: must be positive, got 0");
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

  const std::string unknown =
      error_of<ConfigError>([&] { c.set_override("solver.lr.base_lrr=0.1"); });
  EXPECT_TRUE(has(unknown, "solver.lr.base_lrr")) << unknown;
  EXPECT_TRUE(has(unknown, "did you mean 'solver.lr.base_lr'")) << unknown;
  const std::string bad = error_of<ConfigError>([&] { c.set_override("train.batch_size=abc"); });
  EXPECT_TRUE(has(bad, "train.batch_size")) << bad;
  EXPECT_TRUE(has(bad, "expected an integer")) << bad;
  EXPECT_TRUE(has(error_of<ConfigError>([&] { c.set_override("train.batch_size"); }), "key=value"));
}

TEST(Config, UnknownKeyNamesKeyLineAndSuggestion) {
  const std::string msg = error_of<ConfigError>([] {
    Config::from_string("seed = 1\n[train]\nbatch_size = 8\nbatchsize = 16\n", "cfg.toml");
  });
  EXPECT_TRUE(has(msg, "cfg.toml:4")) << msg;
  EXPECT_TRUE(has(msg, "train.batchsize")) << msg;
  EXPECT_TRUE(has(msg, "did you mean 'train.batch_size'")) << msg;

  // The right name in the wrong table.
  const std::string moved =
      error_of<ConfigError>([] { Config::from_string("\n[data]\nbase_lr = 0.1\n", "m.toml"); });
  EXPECT_TRUE(has(moved, "m.toml:3")) << moved;
  EXPECT_TRUE(has(moved, "solver.lr.base_lr")) << moved;

  // A table given a value.
  const std::string table =
      error_of<ConfigError>([] { Config::from_string("[solver]\nlr = 0.1\n", "t.toml"); });
  EXPECT_TRUE(has(table, "it is a table")) << table;
}

TEST(Config, WrongTypeNamesKeyAndLine) {
  const std::string msg = error_of<ConfigError>(
      [] { Config::from_string("[solver.lr]\n\nbase_lr = \"fast\"\n", "configs/x.toml"); });
  EXPECT_EQ(msg, "configs/x.toml:3: solver.lr.base_lr: expected a number, got string");
  const std::string arr = error_of<ConfigError>(
      [] { Config::from_string("[solver.lr.multistep]\nstepvalue = [1, 2.5]\n", "a.toml"); });
  EXPECT_TRUE(has(arr, "a.toml:2: solver.lr.multistep.stepvalue: expected an array of integers"))
      << arr;
  const std::string syntax =
      error_of<ConfigError>([] { Config::from_string("seed = = 1\n", "s.toml"); });
  EXPECT_TRUE(has(syntax, "s.toml:1:")) << syntax;
}

TEST(Config, BadValuesNameKeyAndLine) {
  const std::string neg = error_of<ConfigError>(
      [] { Config::from_string("[train]\nbatch_size = -4\n", "b.toml").validate(); });
  EXPECT_EQ(neg, "b.toml:2: train.batch_size: must be positive, got -4");

  const std::string policy = error_of<ConfigError>(
      [] { Config::from_string("[solver.lr]\nlr_policy = \"linear\"\n", "p.toml").validate(); });
  EXPECT_TRUE(has(policy, "p.toml:2: solver.lr.lr_policy: unknown value 'linear'")) << policy;
  EXPECT_TRUE(has(policy, "fixed, step, multistep, cosine, lambda_poly")) << policy;

  const std::string dist = error_of<ConfigError>(
      [] { Config::from_string("[network]\nbucket_cap_mb = 0\n", "d.toml").validate(); });
  EXPECT_TRUE(has(dist, "d.toml:2: network.bucket_cap_mb: must be > 0")) << dist;

  Config c;
  c.set_override("loss.label_smoothing=1.5");
  EXPECT_TRUE(has(error_of<ConfigError>([&] { c.validate(); }),
                  "--set: loss.label_smoothing: must be in [0, 1)"));
  Config w;
  w.set_override("solver.lr.is_warm=true");
  EXPECT_TRUE(has(error_of<ConfigError>([&] { w.validate(); }), "solver.lr.warm.warm_iters"));

  // data.max_pixels: PIL's decompression-bomb limit by default, positive.
  EXPECT_EQ(Config().get_int("data.max_pixels"), 178956970);
  Config m;
  m.set_override("data.max_pixels=0");
  const std::string px = error_of<ConfigError>([&] { m.validate(); });
  EXPECT_TRUE(has(px, "--set: data.max_pixels: must be positive, got 0")) << px;
  const std::string algo = error_of<ConfigError>(
      [] { Config::from_string("[train]\nconv_algo = \"fast\"\n", "a.toml").validate(); });
  EXPECT_EQ(algo,
            "a.toml:2: train.conv_algo: unknown value 'fast' (valid: auto, direct, winograd)");
  for (const char* ok : {"auto", "direct", "winograd"}) {
    Config a;
    a.set_override(std::string("train.conv_algo=\"") + ok + "\"");
    EXPECT_NO_THROW(a.validate()) << ok;
    EXPECT_TRUE(a.is_set("train.conv_algo"));
  }
  EXPECT_FALSE(Config().is_set("train.conv_algo"));  // then TCV_CONV_ALGO, else auto
}

TEST(Config, CommHookKeysAreChecked) {
  const std::string hook = error_of<ConfigError>(
      [] { Config::from_string("[network]\ncomm_hook = \"fp8\"\n", "h.toml").validate(); });
  EXPECT_EQ(hook,
            "h.toml:2: network.comm_hook: unknown value 'fp8' (valid: none, bf16, fp16, powersgd)");
  const std::string rank = error_of<ConfigError>([] {
    Config::from_string("[network]\ncomm_hook = \"powersgd\"\n[network.powersgd]\nrank = 0\n",
                        "r.toml")
        .validate();
  });
  EXPECT_EQ(rank, "r.toml:4: network.powersgd.rank: must be positive, got 0");
  const std::string rate = error_of<ConfigError>([] {
    Config::from_string("[network.powersgd]\nmin_compression_rate = -1\n", "c.toml").validate();
  });
  EXPECT_TRUE(has(rate, "c.toml:2: network.powersgd.min_compression_rate: must be positive"))
      << rate;
  // PyTorch's PowerSGDState rule: state kept per bucket starts after DDP's bucket rebuild.
  Config early;
  early.set_override("network.comm_hook=\"powersgd\"");
  early.set_override("network.powersgd.start_iter=1");
  const std::string start = error_of<ConfigError>([&] { early.validate(); });
  EXPECT_TRUE(has(start, "--set: network.powersgd.start_iter: must be > 1 when")) << start;
  early.set_override("network.powersgd.error_feedback=false");
  early.set_override("network.powersgd.warm_start=false");
  EXPECT_NO_THROW(early.validate());
  // Defaults as PyTorch's PowerSGDState.
  const Config d;
  EXPECT_EQ(d.get_string("network.comm_hook"), "none");
  EXPECT_EQ(d.get_int("network.powersgd.rank"), 1);
  EXPECT_EQ(d.get_int("network.powersgd.start_iter"), 1000);
  EXPECT_EQ(d.get_double("network.powersgd.min_compression_rate"), 2.0);
  EXPECT_TRUE(d.get_bool("network.powersgd.error_feedback"));
  EXPECT_TRUE(d.get_bool("network.powersgd.warm_start"));
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

  const tcv::testing::TempDir tmp("config");
  const auto p = tmp.root() / "config.toml";
  std::ofstream(p) << text;
  EXPECT_EQ(Config::from_file(p.string()).get_double("solver.lr.base_lr"), 0.05);
  EXPECT_TRUE(has(error_of<ConfigError>([] { Config::from_file("/nonexistent/x.toml"); }),
                  "/nonexistent/x.toml"));
}

TEST(Config, ShippedConfigsAreValid) {
  const std::string root = tcv::testing::source_dir();
  // Every shipped config parses and validates.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(root + "/configs/cls"))
    if (e.path().extension() == ".toml") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 4u);
  std::map<std::string, Config> by_name;
  for (const auto& f : files) {
    const Config c = Config::from_file(root + "/configs/cls/" + f);
    EXPECT_NO_THROW(c.validate()) << f;
    by_name.emplace(f, c);
  }
  for (const char* f : {"fmnist_cnn.toml", "fmnist_resnet.toml"})
    EXPECT_EQ(by_name.at(f).get_string("data.dataset"), "fashion_mnist") << f;

  const Config& cifar = by_name.at("cifar10_resnet18.toml");
  EXPECT_EQ(cifar.get_string("data.dataset"), "cifar10");
  EXPECT_EQ(cifar.get_string("network.model_name"), "resnet18_cifar");
  EXPECT_EQ(cifar.get_int("train.batch_size"), 128);
  EXPECT_EQ(cifar.get_int("solver.max_epoch"), 200);
  EXPECT_TRUE(cifar.get_bool("train.aug.random_crop.enable"));
  EXPECT_EQ(cifar.get_int("train.aug.random_crop.padding"), 4);
  EXPECT_DOUBLE_EQ(cifar.get_double("train.aug.hflip"), 0.5);
  EXPECT_TRUE(cifar.get_bool("solver.optim.sgd.nesterov"));
  EXPECT_DOUBLE_EQ(cifar.get_double("solver.optim.sgd.weight_decay"), 5e-4);
  EXPECT_EQ(cifar.get_string("solver.lr.lr_policy"), "cosine");

  const Config& inet = by_name.at("imagenet_resnet50.toml");
  EXPECT_EQ(inet.get_string("data.dataset"), "image_folder");
  EXPECT_EQ(inet.get_string("network.model_name"), "resnet50");
  EXPECT_EQ(inet.get_ints("data.input_size"), (std::vector<int64_t>{224, 224}));
  EXPECT_EQ(inet.get_int("train.batch_size"), 128);
  EXPECT_EQ(inet.get_int("solver.max_epoch"), 90);
  EXPECT_DOUBLE_EQ(inet.get_double("solver.lr.base_lr"), 0.1);
  EXPECT_DOUBLE_EQ(inet.get_double("solver.optim.sgd.weight_decay"), 1e-4);
  EXPECT_DOUBLE_EQ(inet.get_double("loss.label_smoothing"), 0.1);
  EXPECT_EQ(inet.get_int("solver.lr.warm.warm_epochs"), 5);
  EXPECT_TRUE(inet.get_bool("train.aug.random_resized_crop.enable"));
  EXPECT_EQ(inet.get_int("val.aug.resize_shorter"), 256);
  EXPECT_TRUE(inet.get_bool("val.aug.center_crop"));
}

TEST(Config, DatasetKeysNameKeyAndLine) {
  const Config folder = Config::from_string(
      "[data]\ndataset = \"image_folder\"\ntrain_dir = \"/a\"\nval_dir = \"/b\"\n"
      "input_size = [16, 24]\nchannels = 3\nskip_corrupt = true\n[train]\nmixup_alpha = 0.2\n"
      "[train.aug]\nrandom_resized_crop.enable = true\nhflip = 1.0\n"
      "color_jitter = [0.4, 0.4, 0.4, 0.1]\n",
      "f.toml");
  EXPECT_NO_THROW(folder.validate());
  EXPECT_EQ(folder.get_ints("data.input_size"), (std::vector<int64_t>{16, 24}));
  EXPECT_DOUBLE_EQ(folder.get_double("train.mixup_alpha"), 0.2);
  EXPECT_TRUE(folder.get_bool("data.skip_corrupt"));

  const std::string ds = error_of<ConfigError>(
      [] { Config::from_string("[data]\ndataset = \"imagenet\"\n", "d.toml").validate(); });
  EXPECT_TRUE(has(ds, "d.toml:2: data.dataset: unknown value 'imagenet'")) << ds;
  EXPECT_TRUE(has(ds, "cifar10, cifar100, image_folder, list")) << ds;
  const std::string dir = error_of<ConfigError>([] {
    Config::from_string("[data]\ndataset = \"image_folder\"\ninput_size = [8, 8]\n", "g.toml")
        .validate();
  });
  EXPECT_TRUE(has(dir, "data.train_dir: must be set with data.dataset \"image_folder\"")) << dir;
  const std::string size = error_of<ConfigError>([] {
    Config::from_string("[data]\ndataset = \"list\"\ntrain_list = \"a\"\nval_list = \"b\"\n",
                        "l.toml")
        .validate();
  });
  EXPECT_TRUE(has(size, "data.input_size: must be set")) << size;
  const std::string bad_size = error_of<ConfigError>(
      [] { Config::from_string("[data]\n\ninput_size = [0, 4, 4]\n", "s.toml").validate(); });
  EXPECT_TRUE(has(bad_size, "s.toml:3: data.input_size: expected [h, w]")) << bad_size;
  const std::string cifar = error_of<ConfigError>(
      [] { Config::from_string("[data]\ndataset = \"cifar10\"\n", "c.toml").validate(); });
  EXPECT_TRUE(has(cifar, "data.data_dir: must be set")) << cifar;
  const std::string ch = error_of<ConfigError>(
      [] { Config::from_string("[data]\nchannels = 2\n", "h.toml").validate(); });
  EXPECT_TRUE(has(ch, "h.toml:2: data.channels: must be 0 (the dataset's own), 1 or 3, got 2"))
      << ch;
  Config flip;
  flip.set_override("train.aug.hflip=1.5");
  EXPECT_TRUE(
      has(error_of<ConfigError>([&] { flip.validate(); }), "--set: train.aug.hflip: must be a"));
  Config jitter;
  jitter.set_override("train.aug.color_jitter=[0.4, 0.4]");
  EXPECT_TRUE(
      has(error_of<ConfigError>([&] { jitter.validate(); }), "train.aug.color_jitter: expected"));
  Config scale;
  scale.set_override("train.aug.random_resized_crop.scale=[0.5, 0.1]");
  EXPECT_TRUE(
      has(error_of<ConfigError>([&] { scale.validate(); }), "random_resized_crop.scale: expected"));
  Config both;
  both.set_override("train.aug.random_resized_crop.enable=true");
  both.set_override("train.aug.random_crop.enable=true");
  EXPECT_TRUE(has(error_of<ConfigError>([&] { both.validate(); }), "set only one of"));
  Config mix;
  mix.set_override("train.mixup_alpha=-1");
  EXPECT_TRUE(
      has(error_of<ConfigError>([&] { mix.validate(); }), "train.mixup_alpha: must be >= 0"));
  Config warm;
  warm.set_override("solver.lr.is_warm=true");
  warm.set_override("solver.lr.warm.warm_epochs=2");
  EXPECT_NO_THROW(warm.validate());
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
  EXPECT_TRUE(has(error_of<ConfigError>([&] { bad.validate(); }),
                  "solver.optim.adam.betas: expected 2 values"));
  Config neg;
  neg.set_override("solver.clip_grad_norm=-1");
  EXPECT_TRUE(
      has(error_of<ConfigError>([&] { neg.validate(); }), "solver.clip_grad_norm: must be >= 0"));
  Config opt;
  opt.set_override("solver.optim.optim_method=rmsprop");
  EXPECT_TRUE(has(error_of<ConfigError>([&] { opt.validate(); }), "(valid: sgd, adam, adamw)"));
  Config poly;
  poly.set_override("solver.lr.lr_policy=poly");
  poly.validate();
}

TEST(Config, SetBareWordMustBeTextTomlCanHold) {
  // Found by fuzz_config_set: a quoted value with a byte that is not UTF-8 fails
  // as TOML and was then kept as a bare word, bytes and quotes included; the
  // config.toml written from it did not read back ("invalid utf-8 sequence").
  Config c;
  const std::string msg = error_of<ConfigError>([&] {
    c.set_override(
        "network.model_name=\"resnet\xb7"
        "6\"");
  });
  EXPECT_TRUE(has(msg,
                  "--set network.model_name: the value holds bytes that are not UTF-8 at "
                  "byte 7"))
      << msg;
  EXPECT_TRUE(has(error_of<ConfigError>([&] { c.set_override("device=cpu\x01"); }),
                  "--set device: the value holds control character 0x01 at byte 3"));
  EXPECT_EQ(c.get_string("network.model_name"), "fmnist_cnn");  // unchanged
  // Bare words that are text still work, UTF-8 included.
  c.set_override("network.model_name=r\xc3\xa9snet");
  EXPECT_EQ(c.get_string("network.model_name"), "r\xc3\xa9snet");
  EXPECT_EQ(Config::from_string(c.to_toml()).get_string("network.model_name"), "r\xc3\xa9snet");
}

TEST(Config, ResolvedTomlEscapesEveryControlCharacter) {
  // TOML strings hold no raw DEL (0x7f); the resolved config escapes it like
  // the other control characters, so it reads back.
  Config c = Config::from_string("network.model_name = \"a\\u007fb\\u0001c\\td\"\n", "c.toml");
  EXPECT_EQ(c.get_string("network.model_name"),
            "a\x7f"
            "b\x01"
            "c\td");
  const std::string text = c.to_toml();
  EXPECT_TRUE(has(text, "model_name = \"a\\u007fb\\u0001c\\td\"")) << text;
  EXPECT_EQ(Config::from_string(text).get_string("network.model_name"),
            "a\x7f"
            "b\x01"
            "c\td");
}
