"""Training and evaluation text from Python source that Debian installs: the source itself and
three kinds of chat built from it with `ast` (read a file through a tool call and name what it
defines; rename an identifier in a piece of code; write a function from its docstring), rendered
with Qwen3's chat template exactly as strata's server renders a request."""

import ast
import io
import json
import keyword
import os
import random
import tokenize
import zlib

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN3_TEMPLATE = open(os.path.join(HERE, "qwen3_chat_template.jinja")).read()
THINK_EMPTY = "<think>\n\n</think>\n\n"
SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def source_files(root):
    """(relative path, text) of every Python file under root outside tests and packages."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                try:
                    text = open(path, encoding="utf-8").read()
                except (UnicodeDecodeError, OSError):
                    continue
                out.append((os.path.relpath(path, root), text))
    return out


def is_held_out(rel_path):
    """One file in 16, chosen by a hash of its path: the same on every machine and every run."""
    return zlib.crc32(rel_path.encode()) % 16 == 0


def _tojson(value, indent=None):
    # Like the chat templates' reference renderer: key order kept, non-ASCII kept, no escaping.
    return json.dumps(value, ensure_ascii=False, indent=indent)


_env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False, keep_trailing_newline=True,
                          extensions=["jinja2.ext.loopcontrols"])
_env.filters["tojson"] = _tojson
_template = _env.from_string(QWEN3_TEMPLATE)


def render(messages, tools=None, generation_prompt=True, thinking=True):
    args = {"messages": messages, "add_generation_prompt": generation_prompt}
    if tools:
        args["tools"] = tools
    if not thinking:
        args["enable_thinking"] = False
    return _template.render(**args)


class Definition:
    def __init__(self, kind, name, code, doc):
        self.kind, self.name, self.code, self.doc = kind, name, code, doc


def definitions(text):
    """Top-level functions and classes of a module with their source and docstring."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        code = "".join(lines[first - 1:node.end_lineno]).rstrip() + "\n"
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        out.append(Definition(kind, node.name, code, ast.get_docstring(node) or ""))
    return out


def name_positions(code, name):
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return [t.start for t in toks if t.type == tokenize.NAME and t.string == name]


def rename(code, old, new):
    """code with every NAME token `old` replaced by `new` (strings and comments untouched)."""
    positions = name_positions(code, old)
    if not positions:
        return None
    lines = code.splitlines(keepends=True)
    for row, col in sorted(positions, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def identifiers(code):
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return {}
    counts = {}
    for t in toks:
        if t.type == tokenize.NAME and not keyword.iskeyword(t.string) and len(t.string) >= 3:
            counts[t.string] = counts.get(t.string, 0) + 1
    return counts


# Where a user's project may live: the model learns to join the root it is told with the file.
_ROOT_PARTS = ["home", "srv", "work", "tmp", "opt", "src", "projects", "code", "repo", "app",
               "var", "mnt", "Users"]
_NAME_PARTS = ["alice", "bob", "dev", "demo", "tools", "service", "web", "data", "lib", "core",
               "api", "util", "proj", "task", "build", "kit", "box", "run", "node", "pkg", "src",
               "release", "debug", "tests", "test", "out", "ci", "work", "project", "app", "main",
               "server", "client", "docs", "scripts", "python", "backend", "frontend", "git"]


def random_root(rng):
    depth = rng.randint(1, 8)
    parts = [rng.choice(_ROOT_PARTS)]
    for _ in range(depth):
        word = rng.choice(_NAME_PARTS)
        if rng.random() < 0.4:
            word += rng.choice(["-", "_", "", "."]) + rng.choice(_NAME_PARTS + ["2", "x", "v1", "42"])
        elif rng.random() < 0.15:
            word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(6))
        parts.append(word)
    return "/" + "/".join(parts)


def read_file_tool(param, description):
    return {"type": "function", "function": {
        "name": "read_file", "description": description,
        "parameters": {"type": "object", "properties": {
            param: {"type": "string", "description": "Absolute path of the file to read."}},
            "required": [param]}}}


_OTHER_TOOLS = [
    {"type": "function", "function": {"name": "list_directory", "description": "Lists a directory.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}}},
    {"type": "function", "function": {"name": "write_file", "description": "Writes a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                     "content": {"type": "string"}},
                    "required": ["path", "content"]}}},
    {"type": "function", "function": {"name": "run_shell_command",
     "description": "Runs a shell command.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                    "required": ["command"]}}},
]

_QUESTIONS = ["What does {f} do?", "What does {f} contain?", "Explain {f}.", "Summarize {f}.",
              "What is defined in {f}?", "Read {f} and tell me what it does.",
              "what does {f} do", "Can you explain what {f} does?"]


class AgentStyle:
    """How one client asks: its tools, the read_file parameter and the prompt it builds around a
    question (prompt(rng, root, file, question) -> system and user texts)."""

    def __init__(self, name, tools, param, prompt, flat):
        self.name, self.tools, self.param, self.prompt = name, tools, param, prompt
        self.flat = flat  # the client names files relative to the root without folders


_SYSTEMS = ["You are a coding assistant. The project root is {root}.",
            "You are a helpful assistant for the project in {root}.",
            "Project: {root}\nAnswer questions about its code."]


def generic_styles():
    styles = []
    for param in ("path", "file_path", "absolute_path"):
        def prompt(rng, root, rel, question):
            return rng.choice(_SYSTEMS).replace("{root}", root), question
        styles.append(AgentStyle(
            "generic-" + param,
            lambda rng, p=param: [read_file_tool(p, "Reads a file and returns its content.")] +
            rng.sample(_OTHER_TOOLS, rng.randint(0, 2)),
            param, prompt, False))
    return styles


_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_QWEN_SYSTEMS = ["You are a coding assistant.\n", "You are a coding assistant.",
                 "You are a helpful coding assistant.\n", "You help with code.\n"]


def qwen_code_style(path):
    """Qwen Code's own first request (recorded from the real client, see qwen_code_request.json):
    its read_file tool and the reminders it puts around the question (the content parts of one
    user message, which the server joins with newlines)."""
    recorded = json.load(open(path))

    def prompt(rng, root, rel, question):
        others = rng.sample(_FILE_NAMES, rng.randint(0, 4))
        names = sorted(set(others + [rel]), key=str.lower)
        tree = root + "/\n" + "\n".join(
            ("└───" if i == len(names) - 1 else "├───") + n for i, n in enumerate(names))
        date = "%s, %s %d, %d" % (rng.choice(_DAYS), rng.choice(_MONTHS), rng.randint(1, 28),
                                  rng.randint(2024, 2030))
        user = "\n".join(p.replace("{tree}", tree).replace("{root}", root).replace("{date}", date)
                         .replace("{question}", question) for p in recorded["user_parts"])
        return rng.choice(_QWEN_SYSTEMS + [recorded["system"]]), user

    return AgentStyle("qwen-code", lambda rng: recorded["tools"], "file_path", prompt, True)


_FILE_NAMES = ["README.md", "setup.py", "main.py", "utils.py", "config.py", "notes.txt",
               "requirements.txt", "app.py", "test_main.py", "Makefile", "data.json", "cli.py"]


class TaskMaker:
    def __init__(self, files, styles, seed):
        self.rng = random.Random(seed)
        self.files = files
        self.defs = [(rel, definitions(text)) for rel, text in files]
        self.defs = [(rel, ds) for rel, ds in self.defs if ds]
        self.styles = styles
        self.names = sorted({d.name for _, ds in self.defs for d in ds})

    # (a) read a file through the tool, then name what it defines.
    def read_task(self, style=None):
        rng = self.rng
        rel, ds = rng.choice(self.defs)
        small = [d for d in ds if len(d.code) <= 700]
        if not small:
            return None
        picked = sorted(rng.sample(small, min(len(small), rng.randint(1, 3))),
                        key=lambda d: ds.index(d))
        content = "\n\n".join(d.code.rstrip("\n") for d in picked) + "\n"
        style = style or rng.choice(self.styles)
        root = random_root(rng)
        if style.flat or rng.random() < 0.3:
            rel = os.path.basename(rel)
        path = root + "/" + rel
        question = rng.choice(_QUESTIONS).format(f=rel)
        system, user = style.prompt(rng, root, rel, question)
        tools = style.tools(rng)
        call = {"name": "read_file", "arguments": {style.param: path}}
        answer = answer_for(rel, picked)
        first = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        second = first + [
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
            {"role": "tool", "content": content}]
        return {"kind": "read", "file": rel, "path": path, "param": style.param,
                "names": [d.name for d in picked], "tools": tools,
                "turns": [(first, tool_call_text(call)), (second, answer)]}

    # (b) rename an identifier in code given in the message: the answer copies the code.
    def rename_task(self):
        rng = self.rng
        rel, ds = rng.choice(self.defs)
        d = rng.choice(ds)
        if len(d.code) > 900:
            return None
        ids = {n: c for n, c in identifiers(d.code).items() if c >= 2 and n != "self"}
        if not ids:
            return None
        old = rng.choice(sorted(ids))
        new = rng.choice(self.names)
        if new == old or new in identifiers(d.code):
            new = old + "_" + rng.choice(["new", "value", "item", "2", "obj"])
        edited = rename(d.code, old, new)
        if edited is None:
            return None
        phr = rng.choice(["Rename `{o}` to `{n}` in {f}:", "In {f}, rename {o} to {n}.",
                          "rename {o} to {n} in this code from {f}"])
        user = phr.format(o=old, n=new, f=rel) + "\n```python\n" + d.code + "```"
        return {"kind": "rename", "file": rel, "expected": edited, "tools": None,
                "turns": [([{"role": "user", "content": user}],
                           "```python\n" + edited + "```")]}

    # (c) write a function from its docstring.
    def write_task(self):
        rng = self.rng
        rel, ds = rng.choice(self.defs)
        fns = [d for d in ds if d.kind == "function" and d.doc and len(d.code) <= 900]
        if not fns:
            return None
        d = rng.choice(fns)
        line = d.doc.strip().split("\n")[0].strip()
        if not 15 <= len(line) <= 150:
            return None
        ask = rng.choice(["Write a function that does this: {l}", "Write a Python function `{n}`: {l}",
                          "write a function {n} - {l}", "Write a function `{n}` that does this: {l}"])
        return {"kind": "write", "file": rel, "name": d.name, "tools": None,
                "turns": [([{"role": "user", "content": ask.format(l=line, n=d.name)}],
                           "```python\n" + d.code + "```")]}

    def task(self):
        while True:
            r = self.rng.random()
            t = self.read_task() if r < 0.45 else self.rename_task() if r < 0.75 else self.write_task()
            if t:
                return t


def tool_call_text(call):
    return "<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>"


def answer_for(rel, picked):
    parts = ["`%s` (%s)" % (d.name, d.kind) for d in picked]
    return "`%s` defines %s." % (rel, ", ".join(parts))


def turn_texts(task, rng):
    """Each assistant turn as the text the model sees then writes: the prompt strata renders
    (thinking on or off at random) followed by the answer and <|im_end|>."""
    out = []
    for messages, answer in task["turns"]:
        thinking = rng.random() < 0.7
        prompt = render(messages, task["tools"], True, thinking)
        written = (THINK_EMPTY if thinking else "") + answer + "<|im_end|>\n"
        out.append((prompt, written))
    return out
