#!/usr/bin/env python3
"""Every test's time from CTest's JUnit reports (ctest --output-junit), slowest first.

  scripts/test-times.py [--top N] [--label NAME] REPORT.xml [REPORT.xml ...]
  scripts/test-times.py --summary REPORT.xml [REPORT.xml ...]

For each report: one row per test (seconds, share of the sum of test times, running share, status,
name), then the sum, CTest's wall time and the share taken by the slowest 20. scripts/test.sh
writes build/<preset>/test-times.xml for each phase. --summary prints one closing line over all
reports, 'tests: N passed, N failed', for CI logs.
"""
import argparse
import sys
import xml.etree.ElementTree as ET

SLOWEST = 20


def read_report(path):
    """(name, seconds, status) of every test case, and CTest's wall time for the run."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"test-times: cannot read the JUnit report {path}: {e}")
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        sys.exit(f"test-times: {path} has no <testsuite> (not a CTest JUnit report?)")
    cases = []
    for case in suite.iter("testcase"):
        # Value-parameterized gtest names carry '  # GetParam() = ...': the name is enough.
        name = case.get("name", "?").split("  # GetParam()")[0]
        if case.find("failure") is not None or case.find("error") is not None:
            status = "FAILED"
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            status = "skipped"
        else:
            status = "passed"
        cases.append((name, float(case.get("time", 0) or 0), status))
    return cases, float(suite.get("time", 0) or 0)


def print_table(path, label, top):
    cases, wall = read_report(path)
    cases.sort(key=lambda c: -c[1])
    total = sum(c[1] for c in cases) or 1e-9
    print(f"## {label or path}: {len(cases)} tests, {total:.1f} s of test time, "
          f"{wall:.0f} s wall (CTest)")
    print(f"{'#':>5} {'seconds':>8} {'share':>6} {'cum.':>6}  status   name")
    running = 0.0
    for rank, (name, seconds, status) in enumerate(cases[:top] if top else cases, 1):
        running += seconds
        print(f"{rank:>5} {seconds:8.2f} {100 * seconds / total:5.1f}% {100 * running / total:5.1f}%"
              f"  {status:<8} {name}")
    slowest = sum(c[1] for c in cases[:SLOWEST])
    print(f"slowest {min(SLOWEST, len(cases))}: {slowest:.1f} s = {100 * slowest / total:.1f}% "
          f"of the test time\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="CTest JUnit reports (ctest --output-junit)")
    parser.add_argument("--top", type=int, default=0, help="only the N slowest tests (0: all)")
    parser.add_argument("--label", action="append", default=[],
                        help="a heading per report, in order (default: its path)")
    parser.add_argument("--summary", action="store_true",
                        help="one line over all reports: 'tests: N passed, N failed'")
    args = parser.parse_args()
    if args.summary:
        statuses = [c[2] for path in args.reports for c in read_report(path)[0]]
        skipped = statuses.count("skipped")
        print(f"tests: {statuses.count('passed')} passed, {statuses.count('FAILED')} failed"
              + (f", {skipped} skipped" if skipped else ""))
        return
    for i, path in enumerate(args.reports):
        print_table(path, args.label[i] if i < len(args.label) else None, args.top)


if __name__ == "__main__":
    main()
