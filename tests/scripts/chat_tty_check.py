#!/usr/bin/env python3
"""`strata run --chat` in a terminal (a pseudo-terminal here): a "> " prompt after each answer,
typed turns answered, Ctrl-D ends the conversation with exit status 0.

    chat_tty_check.py STRATA MAKE_SYNTHETIC_MODEL WORK_DIR
"""
import os
import pty
import select
import subprocess
import sys
import time

strata, generator, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
model = os.path.join(work, "chat-tty.gguf")
subprocess.run([generator, "--byte-vocab", "--vocab", "512", "--layers", "2", "-o", model],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

pid, fd = pty.fork()
if pid == 0:
    os.execv(strata, [strata, "run", "-m", model, "--chat", "-n", "4", "--device", "none",
                      "-p", "Hi"])
output = b""


def read_until(needle, count, seconds=60):
    """Reads until `needle` has appeared `count` times in all output so far."""
    global output
    end = time.time() + seconds
    while output.count(needle) < count and time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                output += os.read(fd, 4096)
            except OSError:
                break
    return output.count(needle) >= count


def fail(why):
    print(f"chat_tty_check: {why}; output: {output!r}", file=sys.stderr)
    sys.exit(1)


if not read_until(b"> ", 1):
    fail("no prompt after the first answer")
os.write(fd, b"a second turn\n")
if not read_until(b"> ", 2):
    fail("no prompt after the second answer")
os.write(fd, b"\x04")  # Ctrl-D: the end of input
_, status = os.waitpid(pid, 0)
if os.waitstatus_to_exitcode(status) != 0:
    fail(f"exit status {os.waitstatus_to_exitcode(status)}")
print("chat in a terminal: two answers, two prompts, Ctrl-D ends it")
