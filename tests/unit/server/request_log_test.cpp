// The request log's line, for people and for machines.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/request_log.h"

namespace strata::server {
namespace {

RequestLogEntry generation_entry() {
  RequestLogEntry e;
  e.start = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764700000123));
  e.method = "POST";
  e.path = "/v1/chat/completions";
  e.status = 200;
  e.seconds = 1.5;
  JobResult g;
  g.prompt_tokens = 120;
  g.cached_tokens = 100;
  g.generated_tokens = 40;
  g.decode_seconds = 0.5;
  e.generation = g;
  return e;
}

TEST(RequestLog, TextLineHasTimePathStatusTokensAndSpeed) {
  EXPECT_EQ(format_request_log(generation_entry(), LogFormat::text),
            "2025-12-02T18:26:40.123Z POST /v1/chat/completions 200 1.500 s prompt 120 (cached "
            "100) generated 40 at 80.0 tok/s");
  RequestLogEntry bad = generation_entry();
  bad.generation.reset();
  bad.status = 400;
  bad.error = "'temperature' must be between 0 and 2, got 7";
  EXPECT_EQ(format_request_log(bad, LogFormat::text),
            "2025-12-02T18:26:40.123Z POST /v1/chat/completions 400 1.500 s: 'temperature' must "
            "be between 0 and 2, got 7");
}

TEST(RequestLog, JsonLineIsOneObject) {
  const auto j = nlohmann::json::parse(format_request_log(generation_entry(), LogFormat::json));
  EXPECT_EQ(j["time"], "2025-12-02T18:26:40.123Z");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["prompt_tokens"], 120);
  EXPECT_EQ(j["cached_tokens"], 100);
  EXPECT_EQ(j["generated_tokens"], 40);
  EXPECT_DOUBLE_EQ(j["tokens_per_second"].get<double>(), 80.0);
  EXPECT_FALSE(j.contains("error"));
  EXPECT_FALSE(j.contains("drafted_tokens"));
}

TEST(RequestLog, SpeculativeDraftsAreCountedWhenThereWereSome) {
  RequestLogEntry e = generation_entry();
  e.generation->drafted_tokens = 30;
  e.generation->accepted_tokens = 24;
  EXPECT_EQ(format_request_log(e, LogFormat::text),
            "2025-12-02T18:26:40.123Z POST /v1/chat/completions 200 1.500 s prompt 120 (cached "
            "100) generated 40 at 80.0 tok/s, drafts 24 of 30 kept");
  const auto j = nlohmann::json::parse(format_request_log(e, LogFormat::json));
  EXPECT_EQ(j["drafted_tokens"], 30);
  EXPECT_EQ(j["accepted_tokens"], 24);
}

}  // namespace
}  // namespace strata::server
