#!/usr/bin/env python3
"""Re-times a share of a log's genuine clicks into bursts (make probe's T).

    python3 scripts/genuine_bursts.py --in IN.jsonl --out OUT.jsonl [--share 0.15] [--seed 5] [--strip]

Each genuine event (truth "genuine") whose user has an earlier event is,
with probability --share, moved to 1-2 s after that user's previous event
(never later than it was): a reader who opens items in tabs, whose quick
clicks are the genuine ones. The line order is kept. --strip drops the
"event" and "dwell_ms" members, leaving (user, item, ts, truth). A stream
to check that the model does not read such bursts as noise
(docs/design/model.md, "Bursts (stop 70)").
"""

import argparse
import json
import random


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--in", dest="src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--share", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--strip", action="store_true")
    a = p.parse_args()
    rnd = random.Random(a.seed)
    last = {}
    with open(a.src) as f, open(a.out, "w") as g:
        for line in f:
            if not line.strip():
                continue
            ev = json.loads(line)
            if a.strip:
                ev.pop("event", None)
                ev.pop("dwell_ms", None)
            user = ev["user"]
            if user in last and ev.get("truth") == "genuine" and rnd.random() < a.share:
                ev["ts"] = min(ev["ts"], last[user] + 1000 + rnd.randint(0, 1000))
            last[user] = ev["ts"]
            g.write(json.dumps(ev) + "\n")


if __name__ == "__main__":
    main()
