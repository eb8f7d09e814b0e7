#include "tokenizer/byte_unicode.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(ByteUnicode, KnownMappings) {
  EXPECT_EQ(byte_to_token_char(' '), "Ġ");
  EXPECT_EQ(byte_to_token_char('\n'), "Ċ");
  EXPECT_EQ(byte_to_token_char('a'), "a");
  EXPECT_EQ(byte_to_token_char(0xad), "Ń");  // soft hyphen is not printable: remapped
}

TEST(ByteUnicode, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string mapped, back;
  bytes_to_token_text(all, mapped);
  ASSERT_TRUE(token_text_to_bytes(mapped, back));
  EXPECT_EQ(back, all);
  std::string junk;
  EXPECT_FALSE(token_text_to_bytes("€", junk));  // not a mapped byte
}

TEST(ByteUnicode, Utf8DecodeEncode) {
  const std::string s = "a\xc3\xa9\xe4\xbd\xa0\xf0\x9f\x98\x80";
  size_t i = 0;
  std::vector<uint32_t> cps;
  while (i < s.size()) cps.push_back(next_codepoint(s, i));
  EXPECT_EQ(cps, (std::vector<uint32_t>{'a', 0xe9, 0x4f60, 0x1f600}));
  std::string back;
  for (uint32_t cp : cps) append_utf8(cp, back);
  EXPECT_EQ(back, s);
  i = 0;
  EXPECT_EQ(next_codepoint("\xe4\xbd", i), 0xfffdu);  // truncated
  EXPECT_EQ(i, 1u);
}

}  // namespace
}  // namespace strata
