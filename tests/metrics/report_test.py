#!/usr/bin/python3
"""ctest driver for scripts/tenax-report: generate a run directory with two attempts (a restart) and a launcher ledger
by running make_run_dir under mpirun, turn it into a PNG, and check the PNG. Then feed it bad input (an output it
cannot write, damaged or unreadable files in copies of the run directory, bad arguments) and check that each case
ends with the documented exit status and a message, never a traceback, and leaves no file behind.

  report_test.py MPIRUN NP MAKE_RUN_DIR TENAX_REPORT BASE_DIR   (works in a fresh directory under BASE_DIR)
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

USAGE, FAILED, NO_STEPS = 64, 1, 2  # tenax-report's exit statuses
SUMMARY = "(110 steps, 1 restarts, 110 progress records, 6 validation points)"


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


def attempt(report, args, limit_file_bytes=None):
    """tenax-report with `args` (and at most `limit_file_bytes` per file written), echoed to the log."""
    print("+ " + " ".join([report] + args), flush=True)
    limit = None
    if limit_file_bytes is not None:
        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))
    result = subprocess.run([report] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                            preexec_fn=limit)
    print(result.stdout + result.stderr, flush=True)
    return result


def problems_with(result, status, expected):
    """What is wrong with a run that should exit with `status` and each of `expected` on stderr, and never with a
    traceback."""
    problems = [] if result.returncode == status else [f"exit status {result.returncode}, expected {status}"]
    problems += [f"stderr lacks {text!r}" for text in expected if text not in result.stderr]
    return problems + (["a Python traceback on stderr"] if "Traceback" in result.stderr else [])


def files_under(path):
    return {os.path.join(d, n) for d, dirs, names in os.walk(path) for n in dirs + names}


def copy_run(run_dir, work, name):
    """A copy of the run directory to damage."""
    copy = os.path.join(work, name)
    shutil.copytree(run_dir, copy)
    return copy


def insert_lines(path, after, lines):
    with open(path, "rb") as f:
        old = f.readlines()
    with open(path, "wb") as f:
        f.writelines(old[:after] + lines + old[after:])


def refuses_output(report, run_dir, work, output, status, expected, limit_file_bytes=None):
    """Problems of a run that must refuse to write `output`: besides those of problems_with, any file it leaves (a
    temporary file, half a PNG)."""
    before = files_under(work)
    problems = problems_with(attempt(report, [run_dir, "-o", output], limit_file_bytes), status, expected)
    return problems + [f"left {path} behind" for path in sorted(files_under(work) - before)]


def output_cases(report, run_dir, work):
    """Name -> problems, for an -o that cannot be written."""
    missing = os.path.join(work, "missing", "report.png")
    directory = os.path.join(work, "out-dir")
    os.makedirs(directory)
    a_file = os.path.join(work, "a-file")
    with open(a_file, "w", encoding="utf-8") as f:
        f.write("not a directory\n")
    read_only = os.path.join(work, "read-only")
    os.makedirs(read_only)
    os.chmod(read_only, 0o555)
    cases = {
        "-o in a missing directory": refuses_output(report, run_dir, work, missing, USAGE,
                                                    [f"cannot write {missing}", "does not exist"]),
        "-o a directory": refuses_output(report, run_dir, work, directory, USAGE,
                                         [f"cannot write {directory}", "is a directory"]),
        "-o under a file": refuses_output(report, run_dir, work, os.path.join(a_file, "x.png"), USAGE,
                                          ["cannot write", "is not a directory"]),
        # A failure only the write itself meets (a full disk, a quota): a file size limit makes it here. The report
        # drawn before has filled matplotlib's font cache, so only the PNG meets the limit.
        "-o whose write fails": refuses_output(report, run_dir, work, os.path.join(work, "big.png"), FAILED,
                                               ["cannot write", "File too large"], limit_file_bytes=4096),
    }
    # Never replaced: what is not a PNG picture (a run's records, a checkpoint's files), whatever its name.
    ledger_copy = copy_run(run_dir, work, "output-onto-inputs")
    ledger = os.path.join(ledger_copy, "ledger.jsonl")
    not_a_picture = os.path.join(work, "notes.png")
    with open(not_a_picture, "w", encoding="utf-8") as f:
        f.write("my notes\n")
    with open(ledger, "rb") as f:
        ledger_bytes = f.read()
    cases["-o onto the run's ledger"] = refuses_output(report, run_dir, work, ledger, USAGE,
                                                       [f"cannot write {ledger}", "name a file ending in .png"])
    link = os.path.join(work, "link.png")
    os.symlink(os.path.join(work, "report.png"), link)
    cases["-o onto a symbolic link"] = refuses_output(report, run_dir, work, link, USAGE,
                                                      [f"will not replace {link}: it is a symbolic link"])
    fifo = os.path.join(work, "fifo.png")
    os.mkfifo(fifo)
    cases["-o onto a FIFO"] = refuses_output(report, run_dir, work, fifo, USAGE,
                                             [f"will not replace {fifo}: it exists and is not a PNG picture"])
    cases["-o onto a file that is not a PNG"] = refuses_output(
        report, run_dir, work, not_a_picture, USAGE, [f"will not replace {not_a_picture}", "is not a PNG picture"])
    with open(ledger, "rb") as f, open(not_a_picture, encoding="utf-8") as g:
        if f.read() != ledger_bytes or g.read() != "my notes\n":
            cases["-o onto the run's ledger"].append("a refused output was changed")
    if os.geteuid() != 0:  # root writes to a read-only directory all the same
        cases["-o in a read-only directory"] = refuses_output(
            report, run_dir, work, os.path.join(read_only, "x.png"), USAGE, ["cannot write", "not writable"])
    os.chmod(read_only, 0o755)
    return cases


def damaged_lines_case(report, run_dir, work):
    """Undecodable, malformed, non-object and incomplete lines in every JSON-lines file: each is named with its file
    and line and skipped, and the rest of the file is still read."""
    copy = copy_run(run_dir, work, "damaged-lines")
    bad = [b"\xff\xfe\x00bad\n", b'{"event": "step", \n', b"[1, 2]\n"]
    files = [os.path.join(copy, "metrics", "steps.jsonl"), os.path.join(copy, "metrics", "training.jsonl"),
             os.path.join(copy, "ledger.jsonl")]
    for path in files:
        insert_lines(path, 1, bad)
    insert_lines(files[0], 4, [b'{"event": "step", "step": 7, "ranks": 2}\n'])  # no step time: nothing to draw
    result = attempt(report, [copy, "-o", os.path.join(work, "damaged-lines.png")])
    expected = [f"{path} line {line} skipped" for path in files for line in (2, 3, 4)]
    expected += ["not UTF-8", "not JSON", "not a JSON object", f"{files[0]} line 5 skipped: step record"]
    problems = problems_with(result, 0, expected)
    return problems + ([] if SUMMARY in result.stdout else [f"stdout lacks {SUMMARY!r}: the good lines were lost"])


def nonsense_values_case(report, run_dir, work):
    """Step records whose fields hold values no run writes (a negative or boolean step, no ranks, a step time of
    1e308 s): each is named and skipped, so that the title and the axes come from the real records."""
    copy = copy_run(run_dir, work, "nonsense-values")
    path = os.path.join(copy, "metrics", "steps.jsonl")
    with open(path, "rb") as f:
        real = next(json.loads(line) for line in f if b'"event":"step"' in line.replace(b" ", b""))
    variants = []
    for change in [("step", -5), ("step", True), ("ranks", 0)]:
        variants.append(dict(real, **{change[0]: change[1]}))
    huge = json.loads(json.dumps(real))
    huge["phases_s"]["compute"]["mean"] = 1e308
    variants.append(huge)
    insert_lines(path, 1, [(json.dumps(v) + "\n").encode() for v in variants])
    result = attempt(report, [copy, "-o", os.path.join(work, "nonsense-values.png")])
    expected = [f"{path} line {line} skipped: step record" for line in (2, 3, 4, 5)]
    problems = problems_with(result, 0, expected)
    return problems + ([] if SUMMARY in result.stdout else [f"stdout lacks {SUMMARY!r}"])


def undecodable_ledger_case(report, run_dir, work):
    """The launcher's ledger ending in bytes that are not UTF-8 (as a disk fault leaves it): the line is named and
    skipped, the report is drawn with the rest."""
    copy = copy_run(run_dir, work, "undecodable-ledger")
    with open(os.path.join(copy, "ledger.jsonl"), "ab") as f:
        f.write(b"\xff\xfe\x00bad\n")
    result = attempt(report, [copy, "-o", os.path.join(work, "undecodable-ledger.png")])
    problems = problems_with(result, 0, [f"{copy}/ledger.jsonl line 3 skipped", "not UTF-8"])
    return problems + ([] if SUMMARY in result.stdout else [f"stdout lacks {SUMMARY!r}"])


def unreadable_file_cases(report, run_dir, work):
    """Name -> problems, for a file of the run that is a directory or cannot be read: the ledger and the summary are
    left out, without steps.jsonl there is nothing to draw."""
    ledger = copy_run(run_dir, work, "ledger-is-a-directory")
    os.remove(os.path.join(ledger, "ledger.jsonl"))
    os.makedirs(os.path.join(ledger, "ledger.jsonl"))
    steps = copy_run(run_dir, work, "steps-is-a-directory")
    os.remove(os.path.join(steps, "metrics", "steps.jsonl"))
    os.makedirs(os.path.join(steps, "metrics", "steps.jsonl"))
    summary = copy_run(run_dir, work, "damaged-summary")
    with open(os.path.join(summary, "metrics", "summary-attempt2.json"), "wb") as f:
        f.write(b'\xff{"step_efficiency": ')
    cases = {
        "ledger.jsonl a directory": problems_with(attempt(report, [ledger, "-o", os.path.join(work, "l.png")]), 0,
                                                  [f"cannot read {ledger}/ledger.jsonl", "Is a directory"]),
        "steps.jsonl a directory": problems_with(attempt(report, [steps, "-o", os.path.join(work, "s.png")]), FAILED,
                                                 [f"cannot read {steps}/metrics/steps.jsonl", "Is a directory"]),
        "damaged summary": problems_with(attempt(report, [summary, "-o", os.path.join(work, "d.png")]), 0,
                                         ["summary-attempt2.json skipped"]),
    }
    if os.geteuid() != 0:  # root reads a file without read permission all the same
        unreadable = copy_run(run_dir, work, "unreadable-steps")
        os.chmod(os.path.join(unreadable, "metrics", "steps.jsonl"), 0)
        cases["steps.jsonl unreadable"] = problems_with(attempt(report, [unreadable]), FAILED,
                                                        ["cannot read", "Permission denied"])
    return cases


def huge_number_case(report, run_dir, work):
    """Numbers JSON allows but a float cannot hold (an integer of 401 digits) in a step record and the progress: named
    and skipped, never a traceback."""
    copy = copy_run(run_dir, work, "huge-numbers")
    huge = "1" + "0" * 400
    insert_lines(os.path.join(copy, "metrics", "steps.jsonl"), 1,
                 [('{"event": "step", "step": 3, "ranks": 2, "step_s": {"max": ' + huge + '}}\n').encode()])
    insert_lines(os.path.join(copy, "metrics", "training.jsonl"), 1,
                 [('{"event": "progress", "step": ' + huge + ', "loss": ' + huge + ', "tokens": ' + huge +
                   ', "step_s": 1}\n').encode()])
    result = attempt(report, [copy, "-o", os.path.join(work, "huge-numbers.png")])
    problems = problems_with(result, 0, [f"{copy}/metrics/steps.jsonl line 2 skipped: step record"])
    return problems + ([] if SUMMARY in result.stdout else [f"stdout lacks {SUMMARY!r}"])


def special_file_cases(report, run_dir, work):
    """Name -> problems, for inputs that are not regular files (a FIFO would block the open, a link to /dev/zero never
    ends) and a line longer than any record: refused or skipped at once, in bounded memory."""
    zero = copy_run(run_dir, work, "steps-is-dev-zero")
    os.remove(os.path.join(zero, "metrics", "steps.jsonl"))
    os.symlink("/dev/zero", os.path.join(zero, "metrics", "steps.jsonl"))
    fifo = copy_run(run_dir, work, "steps-is-a-fifo")
    os.remove(os.path.join(fifo, "metrics", "steps.jsonl"))
    os.mkfifo(os.path.join(fifo, "metrics", "steps.jsonl"))
    ledger_fifo = copy_run(run_dir, work, "ledger-is-a-fifo")
    os.remove(os.path.join(ledger_fifo, "ledger.jsonl"))
    os.mkfifo(os.path.join(ledger_fifo, "ledger.jsonl"))
    long_line = copy_run(run_dir, work, "long-line")
    insert_lines(os.path.join(long_line, "metrics", "steps.jsonl"), 1, [b'{"event": "step", "x": "' +
                                                                       b"y" * (3 << 20) + b'"}\n'])
    return {
        "steps.jsonl a link to /dev/zero": problems_with(
            attempt(report, [zero, "-o", os.path.join(work, "z.png")]), FAILED,
            [f"cannot read {zero}/metrics/steps.jsonl", "not a regular file"]),
        "steps.jsonl a FIFO": problems_with(attempt(report, [fifo, "-o", os.path.join(work, "f.png")]), FAILED,
                                            ["not a regular file"]),
        "ledger.jsonl a FIFO": problems_with(attempt(report, [ledger_fifo, "-o", os.path.join(work, "lf.png")]), 0,
                                             ["ledger.jsonl: it is not a regular file", "leaves out"]),
        "a line over 1 MiB": problems_with(attempt(report, [long_line, "-o", os.path.join(work, "ll.png")]), 0,
                                           [f"{long_line}/metrics/steps.jsonl line 2 skipped: longer than 1 MiB"]),
    }


def argument_cases(report, run_dir, work):
    """Name -> problems, for bad arguments and run directories that hold nothing to draw."""
    a_file = os.path.join(work, "run-is-a-file")
    with open(a_file, "w", encoding="utf-8") as f:
        f.write("not a run directory\n")
    empty = os.path.join(work, "empty-run")
    os.makedirs(empty)
    cases = {f"--max-points {value}": problems_with(attempt(report, [run_dir, "--max-points", value]), USAGE,
                                                    ["--max-points", "at least 1"])
             for value in ["0", "-5", "many"]}
    cases["RUN_DIR missing"] = problems_with(attempt(report, [os.path.join(work, "no-such-run")]), USAGE,
                                             ["no-such-run", "does not exist", "TENAX_RUN_DIR"])
    cases["RUN_DIR a file"] = problems_with(attempt(report, [a_file]), USAGE,
                                            [f"{a_file} is not a directory", "TENAX_RUN_DIR"])
    metrics_file = os.path.join(work, "metrics-is-a-file")
    os.makedirs(metrics_file)
    with open(os.path.join(metrics_file, "metrics"), "w", encoding="utf-8") as f:
        f.write("not a directory\n")
    cases["metrics a file"] = problems_with(attempt(report, [metrics_file]), FAILED,
                                            [f"{metrics_file}/metrics is not a directory"])
    cases["RUN_DIR empty"] = problems_with(attempt(report, [empty]), NO_STEPS, ["steps.jsonl does not exist",
                                                                                "TENAX_RUN_DIR"])
    return cases


def bad_input_failures(report, run_dir, work):
    """Runs every bad-input case (all of them, so that a log names every one that fails); the failures."""
    cases = output_cases(report, run_dir, work)
    cases["ledger.jsonl ending in non-UTF-8 bytes"] = undecodable_ledger_case(report, run_dir, work)
    cases["damaged JSON lines"] = damaged_lines_case(report, run_dir, work)
    cases["nonsense field values"] = nonsense_values_case(report, run_dir, work)
    cases["numbers too large for a float"] = huge_number_case(report, run_dir, work)
    cases.update(unreadable_file_cases(report, run_dir, work))
    cases.update(special_file_cases(report, run_dir, work))
    cases.update(argument_cases(report, run_dir, work))
    for name, problems in cases.items():
        print(f"report_test: bad input, {name}: " + ("; ".join(problems) if problems else "ok"), flush=True)
    return [name for name, problems in cases.items() if problems]


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
    run([report, run_dir, "-o", png], dict(os.environ))  # a picture it drew before is replaced
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

    failures = bad_input_failures(report, run_dir, work)
    if failures:
        fail(f"tenax-report mishandled bad input: {', '.join(failures)} (see above; the files are in {work})")
    if "METRICS_TEST_KEEP_DIRS" not in os.environ:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
