#!/usr/bin/python3
"""Validates tenax metrics outputs with Python's own JSON parser (the tests' independent reader).

  check_outputs.py steps PATH STEPS RANKS      steps.jsonl: valid JSON lines, STEPS step records from RANKS ranks, the
                                               phases of every step adding up to its time
  check_outputs.py trace PATH RANKS FIRST END  a Chrome trace of steps [FIRST, END): one process per rank, a step event
                                               per traced step per rank, phase events inside their step
Exits non-zero with a message naming the first problem.
"""
import json
import sys

PHASES = ["data_wait", "h2d", "compute", "comm", "optimizer", "checkpoint", "other"]


def fail(message):
    print("check_outputs: " + message, file=sys.stderr)
    sys.exit(1)


def check_steps(path, steps, ranks):
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    step_records = [r for r in records if r.get("event") == "step"]
    if len(step_records) != steps:
        fail(f"{path}: {len(step_records)} step records, expected {steps}")
    if not any(r.get("event") == "start" for r in records):
        fail(f"{path}: no start record")
    for r in step_records:
        if r["ranks"] != ranks:
            fail(f"step {r['step']}: ranks {r['ranks']}, expected {ranks}")
        if sorted(r["phases_s"]) != sorted(PHASES):
            fail(f"step {r['step']}: phases {sorted(r['phases_s'])}")
        total = r["step_s"]
        if not total["min"] <= total["median"] <= total["max"]:
            fail(f"step {r['step']}: min/median/max out of order: {total}")
        phase_sum = sum(r["phases_s"][p]["mean"] for p in PHASES)
        if abs(phase_sum - total["mean"]) > 1e-9 * max(1.0, total["mean"]) + 1e-11:
            fail(f"step {r['step']}: phases add up to {phase_sum}, step time is {total['mean']}")
        if ranks == 1:
            for p in PHASES:
                s = r["phases_s"][p]
                if not s["min"] == s["median"] == s["max"] == s["mean"]:
                    fail(f"step {r['step']}: one rank but differing statistics for {p}: {s}")
        if not 0 <= r["slowest_rank"] < ranks:
            fail(f"step {r['step']}: slowest_rank {r['slowest_rank']}")
    for attempt in {r["attempt"] for r in step_records}:
        numbers = [r["step"] for r in step_records if r["attempt"] == attempt]
        if numbers != sorted(numbers):
            fail(f"{path}: steps of attempt {attempt} out of order: {numbers}")


def check_trace(path, ranks, first, end):
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    if sorted(names) != list(range(ranks)):
        fail(f"{path}: processes {sorted(names)}, expected ranks 0..{ranks - 1}")
    for rank in range(ranks):
        mine = [e for e in events if e.get("ph") == "X" and e["pid"] == rank and e["tid"] == 0]
        steps = {e["args"]["step"]: e for e in mine if e["cat"] == "step"}
        if sorted(steps) != list(range(first, end)):
            fail(f"rank {rank}: step events {sorted(steps)}, expected {first}..{end - 1}")
        for e in mine:
            if e["dur"] < 0 or e["ts"] < 0:
                fail(f"rank {rank}: negative time in {e}")
            if e["cat"] == "phase":
                if e["name"] not in PHASES:
                    fail(f"rank {rank}: unknown phase {e['name']}")
                outer = steps[e["args"]["step"]]
                if e["ts"] < outer["ts"] - 1 or e["ts"] + e["dur"] > outer["ts"] + outer["dur"] + 1:
                    fail(f"rank {rank}: {e['name']} of step {e['args']['step']} lies outside its step")
        for step, outer in steps.items():
            inside = sum(e["dur"] for e in mine if e["cat"] == "phase" and e["args"]["step"] == step)
            if abs(inside - outer["dur"]) > 1 + 1e-6 * outer["dur"]:
                fail(f"rank {rank} step {step}: phases last {inside} us, the step {outer['dur']} us")
        phases = {e["name"] for e in mine if e["cat"] == "phase"}
        for expected in ("data_wait", "compute", "other"):
            if expected not in phases:
                fail(f"rank {rank}: no {expected} event")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "steps" and len(sys.argv) == 5:
        check_steps(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "trace" and len(sys.argv) == 6:
        check_trace(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
