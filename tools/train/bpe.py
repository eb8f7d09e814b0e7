"""Byte-level BPE in the form GGUF files and strata's tokenizer use (tokenizer.ggml.model "gpt2",
pre-tokenizer "qwen2"): text is split by Qwen2's regex, each piece's UTF-8 bytes are mapped to
printable characters (GPT-2's byte table), and merges are applied lowest rank first."""

import collections
import heapq
import unicodedata

import regex

# Qwen2's pre-tokenizer split (the GGUF pre type "qwen2"): single digits, letters with one
# leading non-letter, punctuation runs with their newlines, whitespace runs.
QWEN2_SPLIT = regex.compile(
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Qwen3's special tokens: control tokens (type 3) and the tags it writes as text (type 4).
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
              "</tool_response>"]
SPECIAL_TOKENS = CONTROL_TOKENS + TAG_TOKENS
SPECIAL_SPLIT = regex.compile("(" + "|".join(regex.escape(t) for t in SPECIAL_TOKENS) + ")")


def byte_table():
    """GPT-2's map from each byte to a printable character (printable bytes map to themselves)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


BYTE_CHARS = byte_table()


def to_symbols(piece):
    return tuple(BYTE_CHARS[b] for b in piece.encode("utf-8"))


def pieces(text):
    """Pre-tokenized pieces of text without special tokens."""
    return QWEN2_SPLIT.findall(text)


def train(texts, n_merges, progress=None):
    """Learns n_merges merges from the pieces of texts; returns them in rank order."""
    counts = collections.Counter()
    for text in texts:
        for part in SPECIAL_SPLIT.split(text):
            if part and part not in SPECIAL_TOKENS:
                counts.update(pieces(part))
    words = [list(to_symbols(p)) for p in counts]
    freqs = list(counts.values())
    pair_counts = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_counts[(a, b)] += freqs[i]
            where[(a, b)].add(i)
    # A max-heap with lazy deletion: stale entries are skipped when their count changed.
    heap = [(-c, p) for p, c in pair_counts.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -neg or -neg <= 0:
            continue
        merges.append(pair)
        merged = pair[0] + pair[1]
        touched = collections.Counter()
        for i in list(where[pair]):
            w, f = words[i], freqs[i]
            for a, b in zip(w, w[1:]):
                pair_counts[(a, b)] -= f
                touched[(a, b)] += 0
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == pair[0] and w[j + 1] == pair[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pair_counts[(a, b)] += f
                where[(a, b)].add(i)
                touched[(a, b)] += 0
        del pair_counts[pair]
        where.pop(pair, None)
        for p in touched:
            if pair_counts.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_counts[p], p))
        if progress and len(merges) % 500 == 0:
            progress(len(merges))
    return merges


class Tokenizer:
    """Token strings in id order: 256 byte characters, one per merge, then the special tokens."""

    def __init__(self, merges):
        self.merges = merges
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.tokens = [BYTE_CHARS[b] for b in range(256)] + [a + b for a, b in merges]
        self.tokens += SPECIAL_TOKENS
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        assert len(self.ids) == len(self.tokens), "a merge produced a duplicate token"
        self.cache = {}

    def token_types(self):
        types = {t: 3 for t in CONTROL_TOKENS} | {t: 4 for t in TAG_TOKENS}
        return [types.get(t, 1) for t in self.tokens]

    def special(self, name):
        return self.ids[name]

    def encode_piece(self, piece):
        hit = self.cache.get(piece)
        if hit is not None:
            return hit
        word = list(to_symbols(piece))
        while len(word) > 1:
            best = min(range(len(word) - 1),
                       key=lambda j: self.ranks.get((word[j], word[j + 1]), 1 << 30))
            pair = (word[best], word[best + 1])
            if pair not in self.ranks:
                break
            out, j = [], 0
            while j < len(word):
                if j + 1 < len(word) and (word[j], word[j + 1]) == pair:
                    out.append(pair[0] + pair[1])
                    j += 2
                else:
                    out.append(word[j])
                    j += 1
            word = out
        ids = [self.ids[s] for s in word]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        text = unicodedata.normalize("NFC", text)
        out = []
        for part in SPECIAL_SPLIT.split(text):
            if not part:
                continue
            if part in self.ids and part in SPECIAL_TOKENS:
                out.append(self.ids[part])
                continue
            for p in pieces(part):
                out.extend(self.encode_piece(p))
        return out

    def decode(self, ids):
        byte_of = {c: b for b, c in BYTE_CHARS.items()}
        data = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in SPECIAL_TOKENS:
                data += t.encode()
            else:
                data += bytes(byte_of[c] for c in t)
        return data.decode("utf-8", errors="replace")
