#!/usr/bin/env python3
"""Re-writes a log with quick clicks of a given kind, to probe the bursts.

    python3 scripts/burst_variants.py --in IN.jsonl --out OUT.jsonl --kind KIND [options]

Reads JSON lines with "user", "item", "ts" (ms) and "truth" ("genuine" or
"noise"), drops "event" and "dwell_ms" (--keep to keep them), and writes
the log with quick clicks (1-2 s after the user's previous click, or
--qlo..--qhi s after the click they follow) of one kind:

  bots       --bots N bots (users b0..), each click on one of --items items
             (the --item-prefix and 1..N), in chains of --chain clicks
             1-2 s apart, noise; chains start after a share of the events
             so that the bots send --share of the output
  noise      a --share of the noise events re-timed 1-2 s after their
             user's previous event (noise that comes quickly, from every
             user)
  taps       after a --share of the genuine events, a noise click on the
             same item --qlo..--qhi s later (a double tap); with --recent,
             on one of the user's 10 latest items instead
  habit      a --share of the genuine events of a --users-frac of the users
             (chosen by a hash of the id) re-timed 1-2 s after their user's
             previous event (readers who open items in tabs, and readers
             who do not)

Inserted events are placed in time order. The output is a stream whose
truth the model does not see (denoiser replay --truth field). Written at
stop 73 for the probes of docs/design/model.md, "Found at stop 73, not
built: a disputed burst's spread"; not part of make test.
"""

import argparse
import json
import random
import zlib


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--in", dest="src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--kind", required=True, choices=["bots", "noise", "taps", "habit"])
    p.add_argument("--share", type=float, default=0.2)
    p.add_argument("--bots", type=int, default=20)
    p.add_argument("--items", type=int, default=10)
    p.add_argument("--item-prefix", default="i")
    p.add_argument("--chain", type=int, default=10)
    p.add_argument("--recent", action="store_true")
    p.add_argument("--qlo", type=float, default=0.3)
    p.add_argument("--qhi", type=float, default=2.0)
    p.add_argument("--users-frac", type=float, default=0.33)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--seed", type=int, default=3)
    a = p.parse_args()
    rnd = random.Random(a.seed)
    bot_items = [f"{a.item_prefix}{k}" for k in range(1, a.items + 1)]
    chain_start = a.share / (1 - a.share) / a.chain if a.kind == "bots" else 0
    last, recent, out = {}, {}, []
    with open(a.src) as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            ev = json.loads(line)
            if not a.keep:
                ev.pop("event", None)
                ev.pop("dwell_ms", None)
            user, genuine = ev["user"], ev.get("truth") == "genuine"
            if user in last:
                quick = last[user] + 1000 + rnd.randint(0, 1000)
                if a.kind == "noise" and not genuine and rnd.random() < a.share:
                    ev["ts"] = min(ev["ts"], quick)
                elif a.kind == "habit" and genuine and zlib.crc32(user.encode()) % 1000 < a.users_frac * 1000 and rnd.random() < a.share:
                    ev["ts"] = min(ev["ts"], quick)
            last[user] = ev["ts"]
            out.append((ev["ts"], n, 0, ev))
            if a.kind == "taps" and genuine and rnd.random() < a.share:
                seen = recent.get(user, [])
                item = rnd.choice(seen) if a.recent and seen else ev["item"]
                t = ev["ts"] + int(1000 * rnd.uniform(a.qlo, a.qhi))
                out.append((t, n, 1, {"user": user, "item": item, "ts": t, "truth": "noise"}))
            recent.setdefault(user, []).append(ev["item"])
            del recent[user][:-10]
            if rnd.random() < chain_start:
                bot, t = f"b{rnd.randrange(a.bots)}", ev["ts"]
                t = max(t, last.get(bot, t))
                for k in range(a.chain):
                    t += 1000 + rnd.randint(0, 1000)
                    out.append((t, n, 1 + k, {"user": bot, "item": rnd.choice(bot_items), "ts": t, "truth": "noise"}))
                last[bot] = t
    out.sort(key=lambda e: (e[0], e[1], e[2]))
    with open(a.out, "w") as g:
        for e in out:
            g.write(json.dumps(e[3]) + "\n")


if __name__ == "__main__":
    main()
