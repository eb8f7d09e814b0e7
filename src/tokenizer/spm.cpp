#include "tokenizer/spm.h"

#include <fmt/format.h>

#include <queue>
#include <string>

#include "tokenizer/byte_unicode.h"
#include "util/error.h"

namespace strata {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581 "▁"

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    const auto id = vocab.find(fmt::format("<0x{:02X}>", b));
    byte_tokens_[b] = id ? *id : -1;
  }
}

void SpmEncoder::emit_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (const auto id = vocab_.find(std::string(piece))) {
    out.push_back(*id);
    return;
  }
  for (char c : piece) {
    const int32_t id = byte_tokens_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (vocab_.unk >= 0) {
      out.push_back(vocab_.unk);
    } else {
      fail("the vocabulary has no byte token <0x{:02X}> and no unknown token",
           static_cast<uint8_t>(c));
    }
  }
}

void SpmEncoder::encode(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  std::string s;
  if (at_start && vocab_.add_space_prefix) s += kSpace;
  for (char c : text) {
    if (c == ' ') {
      s += kSpace;
    } else {
      s += c;
    }
  }
  if (s.empty()) return;
  // Symbols are UTF-8 characters, kept as [begin, end) ranges in a linked list.
  struct Symbol {
    size_t begin, end;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    i += std::min<size_t>(static_cast<size_t>(utf8_sequence_length(static_cast<uint8_t>(s[i]))),
                          s.size() - i);
    symbols.push_back(
        {begin, i, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1});
  }
  symbols.back().next = -1;
  struct Bigram {
    float score;
    int left;
    size_t size;
    bool operator<(const Bigram& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Bigram> queue;
  auto consider = [&](int left) {
    if (left < 0 || symbols[static_cast<size_t>(left)].next < 0) return;
    const Symbol& a = symbols[static_cast<size_t>(left)];
    const Symbol& b = symbols[static_cast<size_t>(a.next)];
    const auto id = vocab_.find(s.substr(a.begin, b.end - a.begin));
    if (!id) return;
    const float score = vocab_.scores.empty() ? 0.0f : vocab_.scores[static_cast<size_t>(*id)];
    queue.push({score, left, b.end - a.begin});
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(static_cast<int>(i));
  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& a = symbols[static_cast<size_t>(top.left)];
    if (a.next < 0 || a.end == a.begin) continue;
    Symbol& b = symbols[static_cast<size_t>(a.next)];
    if (b.end - a.begin != top.size) continue;  // stale: a side changed
    a.end = b.end;
    a.next = b.next;
    b.end = b.begin;  // mark merged away
    if (a.next >= 0) symbols[static_cast<size_t>(a.next)].prev = top.left;
    consider(a.prev);
    consider(top.left);
  }
  for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& sym = symbols[static_cast<size_t>(i)];
    emit_piece(std::string_view(s).substr(sym.begin, sym.end - sym.begin), out);
  }
}

}  // namespace strata
