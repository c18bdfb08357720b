#include "dist/env.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include "engine/error.h"

namespace tcv::dist {

namespace {

constexpr const char* kNames[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

const std::string& require(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  TCV_CHECK(it != env.end(), "[dist env] ", name,
            " is not set; env:// rendezvous needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
            "(set by torchrun or tcv-run)");
  return it->second;
}

// Strict decimal: optional '-', digits only, the whole string, within int range.
int parse_int(const char* name, const std::string& value) {
  int64_t v = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  TCV_CHECK(!value.empty() && ec == std::errc() && ptr == last &&
                v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
            "[dist env] ", name, "='", value, "' is not a decimal integer");
  return static_cast<int>(v);
}

}  // namespace

DistEnv parse_dist_env(const EnvMap& env) {
  DistEnv d;
  const std::string& world = require(env, "WORLD_SIZE");
  d.world_size = parse_int("WORLD_SIZE", world);
  TCV_CHECK(d.world_size >= 1, "[dist env] WORLD_SIZE='", world, "' must be at least 1");

  const std::string& rank = require(env, "RANK");
  d.rank = parse_int("RANK", rank);
  TCV_CHECK(d.rank >= 0 && d.rank < d.world_size, "[dist env] RANK='", rank,
            "' must be in [0, WORLD_SIZE=", d.world_size, ")");

  auto local = env.find("LOCAL_RANK");
  if (local == env.end()) {
    d.local_rank = d.rank;
  } else {
    d.local_rank = parse_int("LOCAL_RANK", local->second);
    TCV_CHECK(d.local_rank >= 0 && d.local_rank < d.world_size, "[dist env] LOCAL_RANK='",
              local->second, "' must be in [0, WORLD_SIZE=", d.world_size, ")");
  }

  d.master_addr = require(env, "MASTER_ADDR");
  TCV_CHECK(!d.master_addr.empty(), "[dist env] MASTER_ADDR is set but empty");

  const std::string& port = require(env, "MASTER_PORT");
  d.master_port = parse_int("MASTER_PORT", port);
  TCV_CHECK(d.master_port >= 1 && d.master_port <= 65535, "[dist env] MASTER_PORT='", port,
            "' must be in [1, 65535]");
  return d;
}

EnvMap process_dist_env() {
  EnvMap env;
  for (const char* name : kNames)
    if (const char* v = std::getenv(name)) env[name] = v;
  return env;
}

DistEnv read_dist_env() {
  return parse_dist_env(process_dist_env());
}

bool has_dist_env(const EnvMap& env) {
  return env.count("WORLD_SIZE") != 0;
}

}  // namespace tcv::dist
