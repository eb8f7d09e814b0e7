#!/usr/bin/python3
"""Speculative decoding, measured side by side: every request of a task set is sent twice, with
"spec": "off" to one `strata serve` and with "spec": "auto" to another (greedy, --parallel 1), in
alternation so both see the same machine; each server's own decode timing (its JSON request log)
gives tok/s. Two servers, so that the drafts the speculating one takes from its earlier answers
(--spec-history) come from other tasks' answers only, never from the same request answered
without drafts a moment before. Checks that both answers are identical and prints, per kind of task, decode speed
with and without speculation, their ratio, and how many drafted tokens were checked and kept.

With --llama-server PATH (a llama.cpp build of your own; nothing of it is in this repository) the
same requests also go to two llama-server processes on the same model, one plain and one with
--llama-spec (default: its n-gram prompt lookup), alternating with strata's, and a second table
shows llama.cpp's speed-up from its `timings` (predicted_per_second, draft_n, draft_n_accepted).

    bench/speculation.py --model tools/train/strata-coder-tiny.gguf \\
        --tasks build/train/held_out_tasks.json [--limit 20] [--kinds rename] [--json out.json] \\
        [--llama-server /path/to/llama-server [--llama-spec "--spec-type ngram-simple"]]

The tasks are tools/train's held-out set (train.py writes it): "rename" answers copy the code
they were given with one identifier changed (an edit: what prompt-lookup drafts live on); "write"
answers and "read" answers (after the tool result) are new text.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", required=True, help="held_out_tasks.json from tools/train/train.py")
    p.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    p.add_argument("--threads", type=int, default=0, help="0: strata's default")
    p.add_argument("--port", type=int, default=18641)
    p.add_argument("--limit", type=int, default=20, help="tasks of each kind")
    p.add_argument("--kinds", default="read,rename,write",
                   help="which kinds of task, comma-separated (default: all three)")
    p.add_argument("--max-tokens", type=int, default=600)
    p.add_argument("--server-args", default="",
                   help="more flags for both strata servers (e.g. \"--spec-history 0\")")
    p.add_argument("--json", help="write the table here as JSON too")
    p.add_argument("--llama-server", help="a llama.cpp llama-server binary to compare with")
    p.add_argument("--llama-spec", default="--spec-type ngram-simple --spec-ngram-simple-size-n 3",
                   help="llama-server's speculation flags (default: its n-gram prompt lookup, "
                        "3-token keys as strata's longest suffix of 2..5)")
    return p.parse_args()


def wait_up(proc, url, what, log=None):
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return
        except OSError:
            if proc.poll() is not None:
                if log:
                    log.seek(0)
                sys.exit(what + " exited: " + (log or proc.stderr).read()[-2000:])
            time.sleep(0.1)
    sys.exit(what + " did not come up")


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def chat_body(messages, tools, max_tokens):
    body = {"messages": messages, "temperature": 0, "max_tokens": max_tokens}
    if tools:
        body["tools"] = tools
    return body


class Server:
    def __init__(self, args, port):
        cmd = [args.strata, "serve", "-m", args.model, "--port", str(port), "--ctx", "4096",
               "--parallel", "1", "--log-format", "json"] + shlex.split(args.server_args)
        if args.threads:
            cmd += ["-t", str(args.threads)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.url = "http://127.0.0.1:%d" % port
        wait_up(self.proc, self.url, "strata serve")

    def chat(self, messages, tools, spec, max_tokens):
        """(message, decode seconds, generated, drafted, kept) from the request's log line."""
        body = chat_body(messages, tools, max_tokens)
        body["spec"] = spec
        answer = post(self.url, body)
        # The request's log line (one request at a time: the next JSON line on stderr).
        while True:
            line = self.proc.stderr.readline()
            if not line:
                sys.exit("strata serve stopped")
            if line.startswith("{") and '"/v1/chat/completions"' in line:
                log = json.loads(line)
                break
        rate = log["tokens_per_second"]
        n = log["generated_tokens"]
        return (answer["choices"][0]["message"], n / rate if rate > 0 else 0.0, n,
                log.get("drafted_tokens", 0), log.get("accepted_tokens", 0))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class LlamaServer:
    """One llama-server process; its speculation is fixed at start (a server flag)."""

    def __init__(self, args, port, spec_flags):
        # --poll 0: its threads sleep between requests instead of spinning on the cores the
        # other servers of this run are measured on.
        cmd = [args.llama_server, "-m", args.model, "--port", str(port), "-c", "4096", "-np", "1",
               "--no-webui", "--poll", "0"] + spec_flags
        if args.threads:
            cmd += ["-t", str(args.threads)]
        # Its log goes to a file: a pipe nobody reads would stall it once full.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, text=True)
        self.url = "http://127.0.0.1:%d" % port
        wait_up(self.proc, self.url, "llama-server", self.log)

    def chat(self, messages, tools, max_tokens):
        body = chat_body(messages, tools, max_tokens)
        body["cache_prompt"] = False  # each request from scratch, as strata's measured decode
        answer = post(self.url, body)
        t = answer["timings"]
        return (answer["choices"][0]["message"], t["predicted_ms"] / 1000.0, t["predicted_n"],
                t.get("draft_n", 0), t.get("draft_n_accepted", 0))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def requests_of(task):
    """(kind, messages, tools) of the turns the model writes new text or copies in."""
    if task["kind"] == "read":  # the answer after the file came back
        return [("read answer", task["turns"][1][0], task["tools"])]
    return [(task["kind"], task["turns"][0][0], None)]


def add(rows, kind, off, on):
    """off, on: (message, seconds, tokens, drafted, kept) of one request each way."""
    r = rows.setdefault(kind, {"requests": 0, "tokens": 0, "seconds_off": 0.0, "seconds_auto": 0.0,
                               "drafted": 0, "accepted": 0, "tokens_auto": 0})
    r["requests"] += 1
    r["tokens"] += off[2]
    r["tokens_auto"] += on[2]
    r["seconds_off"] += off[1]
    r["seconds_auto"] += on[1]
    r["drafted"] += on[3]
    r["accepted"] += on[4]


def print_table(title, rows, mismatches, requests):
    print("\n" + title)
    print("| task | requests | tokens | tok/s off | tok/s spec | spec/off | drafted | kept |")
    print("|---|---|---|---|---|---|---|---|")
    table = []
    for kind, r in rows.items():
        off = r["tokens"] / r["seconds_off"] if r["seconds_off"] else 0.0
        on = r["tokens_auto"] / r["seconds_auto"] if r["seconds_auto"] else 0.0
        kept = r["accepted"] / r["drafted"] if r["drafted"] else 0.0
        print("| %s | %d | %d | %.1f | %.1f | %.2fx | %d | %.0f%% |" % (
            kind, r["requests"], r["tokens"], off, on, on / off if off else 0.0, r["drafted"],
            100 * kept))
        table.append(dict(r, kind=kind, tok_s_off=off, tok_s_auto=on))
    print("identical answers with and without: %d of %d" % (requests - mismatches, requests))
    return table


def main():
    args = parse_args()
    tasks = json.load(open(args.tasks))["tasks"]
    kinds = args.kinds.split(",")
    unknown = sorted(set(kinds) - {t["kind"] for t in tasks})
    if unknown:
        sys.exit("no tasks of kind %s in %s" % (", ".join(unknown), args.tasks))
    chosen, per_kind = [], {}
    for t in tasks:
        if t["kind"] in kinds and per_kind.get(t["kind"], 0) < args.limit:
            per_kind[t["kind"]] = per_kind.get(t["kind"], 0) + 1
            chosen += requests_of(t)
    plain, server = Server(args, args.port), Server(args, args.port + 1)
    llama = []
    if args.llama_server:
        llama = [LlamaServer(args, args.port + 2, []),
                 LlamaServer(args, args.port + 3, shlex.split(args.llama_spec))]
    rows, llama_rows = {}, {}
    mismatches = llama_mismatches = 0
    try:
        for i, (kind, messages, tools) in enumerate(chosen):
            off = plain.chat(messages, tools, "off", args.max_tokens)
            on = server.chat(messages, tools, "auto", args.max_tokens)
            if off[0] != on[0]:
                mismatches += 1
                print("\nDIFFERENT ANSWERS (%s #%d)" % (kind, i), file=sys.stderr)
            add(rows, kind, off, on)
            if llama:
                llama_off = llama[0].chat(messages, tools, args.max_tokens)
                llama_on = llama[1].chat(messages, tools, args.max_tokens)
                llama_mismatches += llama_off[0] != llama_on[0]
                add(llama_rows, kind, llama_off, llama_on)
            print("\r%d/%d requests" % (i + 1, len(chosen)), end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    finally:
        plain.stop()
        server.stop()
        for s in llama:
            s.stop()

    table = print_table("strata serve, \"spec\": \"auto\" against \"off\"", rows, mismatches,
                        len(chosen))
    llama_table = []
    if llama:
        llama_table = print_table("llama-server, `%s` against none" % args.llama_spec, llama_rows,
                                  llama_mismatches, len(chosen))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": table, "mismatches": mismatches, "llama_rows": llama_table,
                       "llama_spec": args.llama_spec if llama else None}, f, indent=1)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
