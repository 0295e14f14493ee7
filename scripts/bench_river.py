#!/usr/bin/env python3
"""denoiser replay against River's BiasedMF on the same stream (make bench-river).

River (https://riverml.xyz) is the online-learning library a Python user
would reach for. Its reco.BiasedMF is a biased matrix factorisation learnt
one event at a time, the nearest thing it has to the collaborative part of
denoiser's model. This script runs one click stream through both and prints
events per second (and per CPU-second) of each and their ratio.

    python3 scripts/bench_river.py [--events N] [--negatives M] [--runs R] [--log FILE]

The first run creates a virtual environment (--venv, default out/river-venv,
not committed) and installs River into it with pip; later runs reuse it.

What each side does per event, in stream order:
  - River: parse the JSON line, predict_one(user, item) (the event's score
    before learning from it, as denoiser scores it), learn_one(user, item, 1),
    then learn_one(user, j, 0) for M negatives j drawn uniformly from the items
    seen so far that the user has not clicked (10 draws at most each, as
    denoiser does). n_factors = 32 (denoiser's default dim), log loss, River's
    default SGD; the stream is read into memory first.
  - denoiser: `denoiser replay --truth none` with its default configuration
    (M = 4 negatives, d = 32): decode, the RGBT model, and the scored JSON
    output written to a file. Like River's loop it evaluates nothing, so it
    steps no plain model for the report's loss baseline and keeps no
    report counters (until stop 34 it did both, and the ratio was 6.8x per
    CPU-second). Its events/s is the report's (the replay loop; start-up
    excluded), its CPU time the whole process's.
Each side runs --runs times; the best run of each is reported (on a shared
machine the best is the least disturbed).
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

RIVER = "river==0.26.1"  # the version these figures were taken with (docs/perf.md)
IN_VENV = "BENCH_RIVER_IN_VENV"  # not DENOISER_*: replay reads those as settings


def ensure_venv(venv):
    """Re-executes this script with the venv's Python, creating it first."""
    if os.environ.get(IN_VENV) == "1":
        return
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        print(f"bench-river: creating {venv} and installing {RIVER}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    probe = subprocess.run([python, "-c", "import river; print(river.__version__)"], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != RIVER.split("==")[1]:
        subprocess.run([python, "-m", "pip", "install", "--quiet", RIVER], check=True)
    env = dict(os.environ, **{IN_VENV: "1"})
    os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


def river_run(lines, negatives, seed):
    """Runs the stream through a new BiasedMF; returns (seconds, CPU seconds)."""
    from river import optim, reco

    model = reco.BiasedMF(n_factors=32, loss=optim.losses.Log(), seed=seed)
    rnd = random.Random(seed)
    items, index, clicked = [], {}, {}
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for line in lines:
        ev = json.loads(line)
        user, item = str(ev["user"]), str(ev["item"])
        model.predict_one(user, item)
        model.learn_one(user, item, 1)
        mine = clicked.setdefault(user, set())
        if item not in index:
            index[item] = len(items)
            items.append(item)
        for _ in range(negatives):
            for _ in range(10):
                j = items[rnd.randrange(len(items))]
                if j != item and j not in mine:
                    model.learn_one(user, j, 0)
                    break
        mine.add(item)
    return time.perf_counter() - wall0, time.process_time() - cpu0


def denoiser_run(binary, log, work):
    """Runs denoiser replay on log; returns (replay loop seconds, process CPU seconds, events)."""
    report = os.path.join(work, "denoiser-report.json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run([binary, "replay", "--in", log, "--out", os.path.join(work, "denoiser-scored.jsonl"), "--report", report, "--truth", "none"],
                         stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"bench-river: denoiser replay failed ({run.returncode}):\n{run.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(report) as f:
        r = json.load(f)
    return r["seconds"], cpu, r["events"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--denoiser", default="bin/denoiser", help="the denoiser binary")
    p.add_argument("--lab", default="bin/denoiser-lab", help="the lab binary (gen)")
    p.add_argument("--work", default="out/bench-river", help="directory for the stream and outputs")
    p.add_argument("--venv", default="out/river-venv", help="virtual environment for River")
    p.add_argument("--log", help="event log to use (default: denoiser-lab gen --events N --seed S into --work)")
    p.add_argument("--events", type=int, default=100_000, help="events of the generated stream")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated stream and of River")
    p.add_argument("--negatives", type=int, default=4, help="negatives River learns per event (denoiser: its configuration, 4)")
    p.add_argument("--runs", type=int, default=3, help="runs of each; the best is reported")
    a = p.parse_args()
    ensure_venv(a.venv)

    import river

    os.makedirs(a.work, exist_ok=True)
    log = a.log
    if log is None:
        log = os.path.join(a.work, f"stream-{a.events}-seed{a.seed}.jsonl")
        if not os.path.exists(log):
            subprocess.run([a.lab, "gen", "--out", log, "--events", str(a.events), "--seed", str(a.seed)], check=True)
    with open(log) as f:
        lines = [line for line in f if line.strip()]
    n = len(lines)

    den = [denoiser_run(a.denoiser, log, a.work) for _ in range(a.runs)]
    scored = {e for _, _, e in den}
    if scored != {n}:
        sys.exit(f"bench-river: denoiser scored {sorted(scored)} of {n} events")
    den_s, den_cpu = min(s for s, _, _ in den), min(c for _, c, _ in den)
    riv = [river_run(lines, a.negatives, a.seed) for _ in range(a.runs)]
    riv_s, riv_cpu = min(s for s, _ in riv), min(c for _, c in riv)

    print(f"stream: {log}, {n} events; best of {a.runs} runs each")
    print(f"{'':34} {'events/s':>10} {'events/CPU-s':>13}")
    print(f"{'denoiser replay --truth none':34} {n / den_s:10.0f} {n / den_cpu:13.0f}")
    print(f"{f'River {river.__version__} BiasedMF, {a.negatives} negatives':34} {n / riv_s:10.0f} {n / riv_cpu:13.0f}")
    print(f"ratio denoiser/River: {riv_s / den_s:.1f}x events/s, {riv_cpu / den_cpu:.1f}x events/CPU-s")
    print("(denoiser's CPU: the whole process, start-up and every goroutine; River's: its loop)")


if __name__ == "__main__":
    main()
