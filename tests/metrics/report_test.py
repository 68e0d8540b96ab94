#!/usr/bin/python3
"""ctest driver for scripts/tenax-report: generate a run directory with two attempts (a restart) and a launcher ledger
by running make_run_dir under mpirun, turn it into a PNG, and check the PNG.

  report_test.py MPIRUN NP MAKE_RUN_DIR TENAX_REPORT BASE_DIR   (works in a fresh directory under BASE_DIR)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def fail(message):
    print("report_test: " + message, file=sys.stderr)
    sys.exit(1)


def run(command, env):
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    print(result.stdout, flush=True)
    if result.returncode != 0:
        fail(f"{command[0]} exited with {result.returncode}")
    return result.stdout


def main():
    if len(sys.argv) != 6:
        fail(__doc__)
    mpirun, np, program, report, base = sys.argv[1:]
    # A directory of this run's own (several builds or runs must never share one), removed when the test passes.
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="report-", dir=base)
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir)
    env = dict(os.environ, TENAX_RUN_DIR=run_dir, TENAX_METRICS_EVERY="20")

    # Attempt 1 runs steps 0-59 and "crashes" after its checkpoint at step 49; attempt 2 resumes at step 50. The
    # ledger lines are the ones tenax-launch writes (the fields the metrics read, plus a few it also writes).
    start = time.time()
    run([mpirun, "-n", np, program, "0", "59"], dict(env, TENAX_ATTEMPT="1"))
    middle = time.time()
    with open(os.path.join(run_dir, "ledger.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"event": "start", "time": start, "invocation": 1, "mode": "local", "ranks": int(np)}) + "\n")
        f.write(json.dumps({"event": "attempt", "invocation": 1, "attempt": 1, "start": start, "end": middle,
                            "outcome": "crash", "productive_s": middle - start, "work_lost_s": 0.1}) + "\n")
    out = run([mpirun, "-n", np, program, "50", "99"], dict(env, TENAX_ATTEMPT="2"))
    if "goodput" not in out or "over 2 attempts" not in out:
        fail("the summary of attempt 2 does not report goodput over 2 attempts")

    png = os.path.join(work, "report.png")
    if os.path.exists(png):
        os.remove(png)
    out = run([report, run_dir, "-o", png], dict(os.environ))
    # 60 + 50 steps executed; attempt 1 logs validation after steps 19, 39, 59 and attempt 2 after 59, 79, 99.
    if "(110 steps, 1 restarts, 110 progress records, 6 validation points)" not in out:
        fail("tenax-report did not see 110 steps, 1 restart, 110 progress records and 6 validation points")
    with open(png, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{png} does not start with the PNG signature")
    if data[12:16] != b"IHDR":
        fail(f"{png} has no IHDR chunk first")
    width, height = struct.unpack(">II", data[16:24])
    if width < 800 or height < 400:
        fail(f"{png} is {width}x{height}, expected at least 800x400")
    if len(data) < 20000:
        fail(f"{png} is only {len(data)} bytes: too small for the plot")
    if data[-12:-8] != b"\x00\x00\x00\x00" or data[-8:-4] != b"IEND":
        fail(f"{png} does not end with an IEND chunk")

    # Without metrics the command fails with a message naming the fix.
    empty = os.path.join(work, "empty")
    os.makedirs(empty, exist_ok=True)
    result = subprocess.run([report, empty], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode == 0 or "TENAX_RUN_DIR" not in result.stderr:
        fail("tenax-report on a directory without metrics did not fail with a helpful message")
    print(f"report_test: {png} is a {width}x{height} PNG of {len(data)} bytes")
    if "METRICS_TEST_KEEP_DIRS" not in os.environ:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
