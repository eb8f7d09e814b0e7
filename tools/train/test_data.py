#!/usr/bin/python3
"""Test data from a trained model and its held-out set (train.py's --work folder):
  tests/data/strata-coder-tiny.tokens.json  texts with the ids this script's BPE gives them
  WORK/profile-prompts.txt                  held-out chats, one JSON line each (strata profile)
  WORK/reference-prompt.ids                 a rendered held-out chat prompt for the reference
                                            engine's logits (tests/data/*.chat.orcl)

    /usr/bin/python3 tools/train/test_data.py --model tools/train/strata-coder-tiny.gguf \\
        --work build/train
"""

import argparse
import json
import os
import random
import struct

import bpe
import chat_tasks as ct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gguf_string_array(path, key):
    """The string array stored under key in a GGUF file's metadata (read by hand: no gguf-py)."""
    data = open(path, "rb").read()
    at = data.find(struct.pack("<Q", len(key)) + key.encode())
    if at < 0:
        raise SystemExit("%s has no %s" % (path, key))
    at += 8 + len(key)
    kind, elem, count = struct.unpack_from("<IIQ", data, at)
    assert kind == 9 and elem == 8, "not a string array"
    at += 16
    out = []
    for _ in range(count):
        (n,) = struct.unpack_from("<Q", data, at)
        out.append(data[at + 8:at + 8 + n].decode("utf-8"))
        at += 8 + n
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--work", default="build/train")
    p.add_argument("--source-root", default="/usr/lib/python3.11")
    args = p.parse_args()

    merges = [tuple(m.split(" ")) for m in gguf_string_array(args.model, "tokenizer.ggml.merges")]
    tok = bpe.Tokenizer(merges)
    held = json.load(open(os.path.join(args.work, "held_out_tasks.json")))
    files = dict(ct.source_files(args.source_root))
    rng = random.Random(7)

    texts = [files[f][:1500] for f in held["files"][:10]]
    # Made-up project roots can look like real paths of a build machine: skip those.
    tasks = [t for t in held["tasks"]
             if not any(p in json.dumps(t) for p in ("/work", "/tmp", "/root", "/home"))]
    for task in tasks[::16][:10]:
        for prompt, written in ct.turn_texts(task, rng):
            texts.append(prompt + written)
    texts.append("héllo wörld Ωμέγα 𝔘nicode 12345 \r\n\t  x  \n\n\n  it's IT'S ‘quoted’ — 中文")
    records = [{"text": t, "ids": tok.encode(t)} for t in texts]
    out = os.path.join(ROOT, "tests", "data", "strata-coder-tiny.tokens.json")
    with open(out, "w") as f:
        json.dump(records, f, ensure_ascii=False)
    print("wrote %s (%d texts)" % (out, len(records)))

    with open(os.path.join(args.work, "profile-prompts.txt"), "w") as f:
        for task in held["tasks"]:
            for messages, _ in task["turns"]:
                f.write(json.dumps({"messages": messages}) + "\n")

    # The reference prompt: a short held-out write task (every row of logits is 16 KiB).
    write = min((t for t in held["tasks"] if t["kind"] == "write"),
                key=lambda t: len(t["turns"][0][0][0]["content"]))
    prompt = ct.render(write["turns"][0][0], None, True, True)
    with open(os.path.join(args.work, "reference-prompt.ids"), "w") as f:
        f.write("\n".join(str(i) for i in tok.encode(prompt)) + "\n")
    print("reference prompt: %d tokens: %r" % (len(tok.encode(prompt)), prompt))


if __name__ == "__main__":
    main()
