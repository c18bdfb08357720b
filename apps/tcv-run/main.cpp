// tcv-run: starts the ranks of a data-parallel job on this node, as torchrun does.
//
//   tcv-run --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]
//           [--max-restarts K] [--rdzv-timeout S] [--quiet-others] -- CMD ARGS...
//
// Exit status: that of the first rank that failed (all others are stopped) once
// no restart is left, 0 when every rank succeeded, 2 for a bad command line.
#include <iostream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "dist/launcher.h"

namespace {

constexpr const char* kUsage =
    "usage: tcv-run --nproc-per-node N [options] -- CMD ARGS...\n"
    "\n"
    "Starts N copies of CMD with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR\n"
    "and MASTER_PORT set (env://). When one rank exits non-zero the others are stopped\n"
    "(SIGTERM, then SIGKILL after 5 s), on every machine; with --max-restarts K all ranks\n"
    "are started again, up to K times, else tcv-run exits with that rank's code, saying\n"
    "which rank failed, on which machine and why. The ranks die with tcv-run.\n"
    "\n"
    "Several machines: run tcv-run on each with the same --nnodes, --nproc-per-node,\n"
    "--master-addr and --master-port, and its own --node-rank. The first machine's tcv-run\n"
    "(--node-rank 0) hosts the job's store at MASTER_ADDR:MASTER_PORT; every round of\n"
    "ranks starts once all machines have joined and agree on the options.\n"
    "\n"
    "  --nproc-per-node N   ranks on this node (one per GPU)\n"
    "  --nnodes M           nodes in the job (1)\n"
    "  --node-rank R        this node's index (0)\n"
    "  --master-addr A      host of rank 0 (127.0.0.1)\n"
    "  --master-port P      port of rank 0's store (default: MASTER_PORT from the\n"
    "                       environment, else a free port on one node, else 29500)\n"
    "  --max-restarts K     restart every rank after a failure, up to K times (0); the\n"
    "                       ranks see TCV_RESTART_COUNT; with network.resume = \"auto\"\n"
    "                       tcv-train continues from the newest checkpoint in --out\n"
    "  --rdzv-timeout S     seconds to wait for the other machines to join, and for the\n"
    "                       store to answer (default TCV_DIST_TIMEOUT, else 300)\n"
    "  --quiet-others       drop the output of every rank but each machine's first\n"
    "                       local rank (rank 0 on one machine); default: prefix the\n"
    "                       lines of ranks other than 0 with \"[rank N] \"\n"
    "\n"
    "GPUs: with CUDA_VISIBLE_DEVICES set, rank i sees only the i-th listed device;\n"
    "without it every rank sees all devices and uses cuda:LOCAL_RANK.\n";

}  // namespace

int main(int argc, char** argv) {
  return tcv::apps::run_tool("tcv-run", kUsage, [&]() -> int {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) throw tcv::apps::UsageError{"--nproc-per-node and a command are required"};
    for (const auto& a : args) {
      if (a == "--") break;
      if (a == "--help" || a == "-h") {
        std::cout << kUsage;
        return 0;
      }
    }
    tcv::dist::LaunchOptions opts;
    try {
      opts = tcv::dist::parse_launch_args(args, tcv::dist::process_dist_env());
    } catch (const tcv::Error& e) {
      throw tcv::apps::UsageError{e.what()};
    }
    return tcv::dist::launch(opts);
  });
}
