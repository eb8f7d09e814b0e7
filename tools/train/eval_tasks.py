#!/usr/bin/python3
"""Writes tools/train/eval_tasks.jsonl, the task file `strata eval` ships with, from the held-out
tasks train.py writes (build/train/held_out_tasks.json: files never trained on):

- "write" tasks as multiple choice: the request, and four functions to choose from: the one that
  was asked for and the answers to three other held-out requests (rotated into place so the right
  one is not always first);
- "read" tasks as short answers: the conversation up to the file's contents (the client's tool
  result), and the one-line summary the model is to write ("`F` defines `a` (function), ...").

The made-up project folders some tasks name under a `work` directory are renamed `srv`, so the
committed file names no folder a developer's machine has.

    /usr/bin/python3 tools/train/eval_tasks.py --tasks build/train/held_out_tasks.json
"""

import argparse
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", required=True, help="held_out_tasks.json from train.py")
    p.add_argument("--out", default=os.path.join(ROOT, "tools/train/eval_tasks.jsonl"))
    args = p.parse_args()
    tasks = json.load(open(args.tasks))["tasks"]
    writes = [t for t in tasks if t["kind"] == "write"]
    reads = [t for t in tasks if t["kind"] == "read"]
    lines = []
    for i, t in enumerate(writes):
        messages, answer = t["turns"][0]
        others = [writes[(i + k) % len(writes)]["turns"][0][1] for k in (1, 2, 3)]
        choices = others[:]
        place = i % 4
        choices.insert(place, answer)
        lines.append({"id": "write-%d-%s-%s" % (i, t["file"], t["name"]), "messages": messages,
                      "choices": choices, "answer": place})
    for i, t in enumerate(reads):
        messages, answer = t["turns"][-1]
        lines.append({"id": "read-%d-%s" % (i, t["file"]), "messages": messages, "tools": t["tools"],
                      "answer": answer})
    with open(args.out, "w") as f:
        for line in lines:
            f.write(re.sub(r"/work\b", "/srv", json.dumps(line, ensure_ascii=False)) + "\n")
    print("wrote %d tasks (%d multiple choice, %d short answer) to %s"
          % (len(lines), len(writes), len(reads), args.out))


if __name__ == "__main__":
    main()
