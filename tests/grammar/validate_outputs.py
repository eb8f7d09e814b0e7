#!/usr/bin/env python3
"""Validates the JSON lines written by random_outputs: each output must parse as JSON and be
valid under its schema (jsonschema Draft 2020-12 validator). Prints "N passed, M failed" as the
last line; exits 1 on any failure."""

import json
import sys

import jsonschema


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: validate_outputs.py PAIRS.jsonl", file=sys.stderr)
        return 2
    passed = failed = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            pair = json.loads(line)
            try:
                value = json.loads(pair["output"])
                jsonschema.Draft202012Validator.check_schema(pair["schema"])
                jsonschema.Draft202012Validator(pair["schema"]).validate(value)
                passed += 1
            except (ValueError, jsonschema.exceptions.ValidationError,
                    jsonschema.exceptions.SchemaError) as e:
                failed += 1
                message = str(e).splitlines()[0]
                print(f"line {number}: {message}\n  schema: {json.dumps(pair['schema'])}\n"
                      f"  output: {pair['output']!r}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
