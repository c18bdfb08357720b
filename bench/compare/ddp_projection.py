#!/usr/bin/env python3
"""Checks `tcv-bench ddp --project` against measured DDP steps on this machine.

Runs tcv-ddp-bench (fmnist_resnet, batch 64 per rank, 1 thread per rank)
interleaved: 2 ranks and 1 rank, --rounds times, each run keeping a timeline
(the median-length of 9 timed steps). Then compares the measured 2-rank step
(the median of the run's 60 timed steps) with two projections onto 1 machine
x 2 ranks:

  self:  the 2-rank timeline, with the all-reduce cost its reducer
         calibrated (--intra-from itself): the model of the exposed tail;
  cross: the 1-rank timeline (no communication at all), with the link of
         the 2-rank timeline of the same round (--intra-from): compute
         measured alone, communication modelled.

Prints the medians over rounds and the relative errors.

    /usr/bin/python3 bench/compare/ddp_projection.py [--build build] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from common import last_json


def bench(build, nproc, batch, steps, timeline, model):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [os.path.join(build, "apps", "tcv-run"), "--nproc-per-node", str(nproc), "--quiet-others",
           "--", os.path.join(build, "bench", "tcv-ddp-bench"), "--model", model, "--batch",
           str(batch), "--steps", str(steps), "--timeline", timeline]
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def project(build, timeline, link):
    cmd = [os.path.join(build, "apps", "tcv-bench"), "ddp", "--project", timeline, "--machines", "1",
           "--gpus-per-machine", "2", "--algo", "ring", "--intra-from", link, "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--model", default="fmnist_resnet")
    p.add_argument("--keep", default=None, help="directory to keep the timelines in")
    args = p.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="tcv-projection-")
    os.makedirs(work, exist_ok=True)
    measured, one_rank, selfp, crossp, exposed_m, exposed_p = [], [], [], [], [], []
    for r in range(args.rounds):
        t2 = os.path.join(work, "world2-%d.json" % (r + 1))
        t1 = os.path.join(work, "world1-%d.json" % (r + 1))
        m2 = bench(args.build, 2, args.batch, args.steps, t2, args.model)
        m1 = bench(args.build, 1, args.batch, args.steps, t1, args.model)
        s = project(args.build, t2, t2)
        c = project(args.build, t1, t2)
        measured.append(m2["median_step_ms"])
        one_rank.append(m1["median_step_ms"])
        selfp.append(s["step_ms"])
        crossp.append(c["step_ms"])
        exposed_m.append(m2["exposed_ms"])
        exposed_p.append(s["exposed_ms"])
        print("round %d: measured 2-rank step %.1f ms (1 rank %.1f), projected self %.1f, cross %.1f; "
              "exposed %.2f measured, %.2f projected" % (r + 1, measured[-1], one_rank[-1], selfp[-1],
                                                         crossp[-1], exposed_m[-1], exposed_p[-1]),
              file=sys.stderr)
    med = statistics.median
    m = med(measured)
    print("%s, batch %d per rank, 1 thread per rank, medians of %d interleaved rounds (load %.2f "
          "at the end)" % (args.model, args.batch, args.rounds, os.getloadavg()[0]))
    print("  measured 2-rank step      %8.1f ms  (1 rank alone %.1f ms)" % (m, med(one_rank)))
    print("  projected from 2-rank     %8.1f ms  %+5.1f%%  (exposed %.2f ms measured, %.2f projected)"
          % (med(selfp), 100 * (med(selfp) / m - 1), med(exposed_m), med(exposed_p)))
    print("  projected from 1-rank     %8.1f ms  %+5.1f%%" % (med(crossp), 100 * (med(crossp) / m - 1)))
    print("  timelines in %s" % work)


if __name__ == "__main__":
    main()
