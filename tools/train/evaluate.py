#!/usr/bin/python3
"""Held-out task metrics of a trained GGUF, measured through `strata serve` exactly as a client
sees it (chat template, tool-call parsing, end of turn), greedy decoding:
  - read:   share of first turns that are one read_file call with the tool's own parameter
            holding an absolute path (valid), and with the right path; share of
            answers (after the file's content comes back) that name every definition in it
  - rename: share of edits whose code block reproduces the renamed code exactly
  - write:  share of answers that are a code block parsing as Python and defining the function
and for every kind the share of answers that end their turn (finish_reason "stop").

    /usr/bin/python3 tools/train/evaluate.py --model tools/train/strata-coder-tiny.gguf \\
        --tasks build/train/held_out_tasks.json [--limit 60] [--json out.json]
"""

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
import urllib.request


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", required=True, help="held_out_tasks.json written by train.py")
    p.add_argument("--strata", default="build/release/bin/strata")
    p.add_argument("--port", type=int, default=18633)
    p.add_argument("--limit", type=int, default=60, help="tasks of each kind")
    p.add_argument("--json", help="write the metrics here as JSON")
    p.add_argument("--repeat-penalty", type=float,
                   help="sent with every request (default: the file's recommended sampling)")
    return p.parse_args()


class Server:
    def __init__(self, strata, model, port, repeat_penalty=None):
        self.repeat_penalty = repeat_penalty
        self.url = "http://127.0.0.1:%d/v1/chat/completions" % port
        self.proc = subprocess.Popen(
            [strata, "serve", "-m", model, "--port", str(port), "--ctx", "4096", "--parallel", "1",
             "--log-format", "off"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(300):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None:
                    sys.exit("strata serve exited: " + self.proc.stderr.read().decode()[-2000:])
                time.sleep(0.1)
        sys.exit("strata serve did not come up")

    def chat(self, messages, tools):
        body = {"messages": messages, "temperature": 0, "max_tokens": 700}
        if self.repeat_penalty is not None:
            body["repeat_penalty"] = self.repeat_penalty
        if tools:
            body["tools"] = tools
        req = urllib.request.Request(self.url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.load(r)["choices"][0]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def code_block(text):
    m = re.search(r"```(?:python)?\n(.*?)```", text or "", re.S)
    return m.group(1) if m else None


def evaluate_read(server, task, counts):
    first_messages = task["turns"][0][0]
    choice = server.chat(first_messages, task["tools"])
    calls = choice["message"].get("tool_calls") or []
    valid = right = False
    if len(calls) == 1 and calls[0]["function"]["name"] == "read_file":
        try:
            args = json.loads(calls[0]["function"]["arguments"])
            valid = isinstance(args.get(task["param"]), str) and args[task["param"]].startswith("/")
            right = args.get(task["param"]) == task["path"]
        except json.JSONDecodeError:
            pass
    counts["read_call_valid"] += valid
    counts["read_call_right_path"] += right
    # The answer turn always sees the right call and the file (as the reference transcript).
    second_messages = task["turns"][1][0]
    choice = server.chat(second_messages, task["tools"])
    answer = choice["message"].get("content") or ""
    counts["read_answer_names_all"] += all(("`%s`" % n) in answer or n in answer
                                           for n in task["names"])
    counts["ends_turn"] += choice["finish_reason"] == "stop"


def evaluate_rename(server, task, counts):
    choice = server.chat(task["turns"][0][0], None)
    got = code_block(choice["message"].get("content"))
    counts["rename_exact"] += got == task["expected"]
    counts["ends_turn"] += choice["finish_reason"] == "stop"


def evaluate_write(server, task, counts):
    choice = server.chat(task["turns"][0][0], None)
    got = code_block(choice["message"].get("content"))
    ok = False
    if got:
        try:
            tree = ast.parse(got)
            ok = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in tree.body)
        except SyntaxError:
            pass
    counts["write_parses_with_function"] += ok
    counts["ends_turn"] += choice["finish_reason"] == "stop"


def main():
    args = parse_args()
    data = json.load(open(args.tasks))
    by_kind = {}
    for t in data["tasks"]:
        by_kind.setdefault(t["kind"], []).append(t)
    server = Server(args.strata, args.model, args.port, args.repeat_penalty)
    counts = {k: 0 for k in ("read_call_valid", "read_call_right_path", "read_answer_names_all", "rename_exact",
                             "write_parses_with_function", "ends_turn")}
    n = {}
    started = time.time()
    try:
        for kind, fn in (("read", evaluate_read), ("rename", evaluate_rename),
                         ("write", evaluate_write)):
            tasks = by_kind.get(kind, [])[:args.limit]
            n[kind] = len(tasks)
            for i, t in enumerate(tasks):
                fn(server, t, counts)
                print("\r%s %d/%d" % (kind, i + 1, len(tasks)), end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
    finally:
        server.stop()
    total = sum(n.values())
    metrics = {
        "read_tasks": n.get("read", 0), "rename_tasks": n.get("rename", 0),
        "write_tasks": n.get("write", 0),
        "valid_read_file_call": counts["read_call_valid"] / max(1, n["read"]),
        "valid_read_file_call_with_right_path": counts["read_call_right_path"] / max(1, n["read"]),
        "answer_names_every_definition": counts["read_answer_names_all"] / max(1, n["read"]),
        "rename_reproduced_exactly": counts["rename_exact"] / max(1, n["rename"]),
        "write_parses_and_defines_a_function": counts["write_parses_with_function"] / max(1, n["write"]),
        "answers_ending_their_turn": counts["ends_turn"] / max(1, total),
        "seconds": round(time.time() - started),
    }
    print(json.dumps(metrics, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(metrics, f, indent=1)


if __name__ == "__main__":
    main()
