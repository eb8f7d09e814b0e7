// GET /status (the web page's figures) against the model and /metrics, and the page's files.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "server/web_assets.h"
#include "server_fixture.h"
#include "util/error.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using Json = nlohmann::json;

std::string chat_body(bool stream) {
  return Json{{"messages", {{{"role", "user"}, {"content", "Write a haiku about memory."}}}},
              {"max_tokens", 6},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

// strata_NAME's value in the Prometheus text.
double metric(const std::string& text, const std::string& name) {
  const std::regex line("\n" + name + " ([0-9.e+-]+)\n");
  std::smatch m;
  if (!std::regex_search(text, m, line)) throw std::runtime_error(name + " not in /metrics");
  return std::stod(m[1]);
}

TEST(Status, DescribesTheModelAndAgreesWithMetrics) {
  ServerStack s({.n_slots = 1, .n_ctx = 256, .record_experts = true},
                {.log_format = LogFormat::off});
  auto c = s.client();
  ASSERT_EQ(c.Post("/v1/chat/completions", chat_body(false), "application/json")->status, 200);
  ASSERT_EQ(c.Post("/v1/chat/completions", chat_body(true), "application/json")->status, 200);
  // The page polls: those requests must not push the generations out of the recent list. A
  // stream's log entry is written once its body is sent, which may be just after the client has
  // it: the polls wait for it, so the failure below is logged after both generations.
  for (int i = 0; i < 200; ++i) {
    const auto polled = c.Get("/status");
    ASSERT_EQ(polled->status, 200);
    if (i >= 2 && Json::parse(polled->body)["recent_requests"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(c.Post("/v1/chat/completions", "{", "application/json")->status, 400);

  Json st;
  std::string metrics;
  for (int i = 0; i < 200; ++i) {
    st = Json::parse(c.Get("/status")->body);
    metrics = c.Get("/metrics")->body;
    if (st["recent_requests"].size() == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const ModelHParams& hp = s.model->hparams();
  EXPECT_EQ(st["model"]["architecture"], hp.arch);
  EXPECT_EQ(st["model"]["n_layer"], hp.n_layer);
  EXPECT_EQ(st["model"]["n_ctx"], 256);
  ASSERT_GT(hp.n_expert, 0);

  const Json& layers = st["placement"]["layers"];
  ASSERT_EQ(layers.size(), static_cast<size_t>(hp.n_layer));
  for (const Json& l : layers) {
    EXPECT_EQ(l["attention"], "CPU");
    EXPECT_EQ(l["experts"],
              Json::parse(R"([{"device": "CPU", "count": )" + std::to_string(hp.n_expert) + "}]"));
  }
  EXPECT_EQ(st["placement"]["output"], "CPU");

  const Json& sch = st["scheduler"];
  EXPECT_EQ(sch["generated_tokens"].get<double>(),
            metric(metrics, "strata_generated_tokens_total"));
  EXPECT_EQ(sch["prompt_tokens"].get<double>(), metric(metrics, "strata_prompt_tokens_total"));
  EXPECT_EQ(sch["generations_finished"].get<double>(),
            metric(metrics, "strata_generations_finished_total"));
  EXPECT_EQ(sch["kv_pages_total"].get<double>(), metric(metrics, "strata_kv_pages_total"));
  EXPECT_NEAR(sch["generated_tokens_per_second"].get<double>(),
              metric(metrics, "strata_generated_tokens_per_second"), 1e-3);
  EXPECT_EQ(sch["generations_finished"], 2);

  // Every routed token chose n_expert_used experts in every layer.
  const Json& experts = st["experts"];
  const int64_t tokens = experts["tokens"];
  EXPECT_GT(tokens, 0);
  ASSERT_EQ(experts["counts"].size(), static_cast<size_t>(hp.n_layer));
  for (const Json& row : experts["counts"]) {
    ASSERT_EQ(row.size(), static_cast<size_t>(hp.n_expert));
    int64_t sum = 0;
    for (const Json& n : row) sum += n.get<int64_t>();
    EXPECT_EQ(sum, tokens * hp.n_expert_used);
  }

  const Json& memory = st["memory"];
  EXPECT_GT(memory["weights_bytes"].get<int64_t>(), 0);
  EXPECT_GT(memory["ram"]["total_bytes"].get<int64_t>(), 0);
  EXPECT_GT(memory["ram"]["process_resident_bytes"].get<int64_t>(), 0);
  EXPECT_GT(memory["kv"]["bytes"].get<int64_t>(), 0);
  EXPECT_EQ(memory["recurrent_state_bytes"], 0) << "no recurrent layers";
  EXPECT_EQ(memory["kv"]["positions"].get<int64_t>(),
            sch["kv_pages_total"].get<int64_t>() * sch["kv_page_size"].get<int64_t>());

  // The generations and the failure, oldest first; no GETs.
  const Json& recent = st["recent_requests"];
  ASSERT_EQ(recent.size(), 3u) << recent;
  EXPECT_EQ(recent[0]["method"], "POST");
  EXPECT_GT(recent[0]["generated_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(recent[2]["status"], 400);
  EXPECT_TRUE(recent[2].contains("error"));
}

TEST(Status, RecentRequestsKeepTheLastOnes) {
  RecentRequests recent(3);
  for (int i = 0; i < 5; ++i) {
    RequestLogEntry e = request_arriving("POST", "/v1/completions/" + std::to_string(i));
    e.status = 200;
    recent.add(e);
  }
  RequestLogEntry poll = request_arriving("GET", "/status");
  poll.status = 200;
  recent.add(poll);
  const nlohmann::ordered_json list = recent.list();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["path"], "/v1/completions/2");
  EXPECT_EQ(list[2]["path"], "/v1/completions/4");
}

TEST(Status, PageIsServedWithoutTheKeyAndItsCallsNeedIt) {
  ServerStack s({.n_slots = 1, .n_ctx = 128}, {.api_key = "sekret"});
  auto c = s.client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  // Every file the page names is served, from this server.
  const std::regex linked(R"re((?:src|href)="(/[^"]*)")re");
  int files = 0;
  for (std::sregex_iterator it(page->body.begin(), page->body.end(), linked), end; it != end;
       ++it) {
    auto r = c.Get((*it)[1].str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << (*it)[1];
    ++files;
  }
  EXPECT_EQ(files, 2) << "the script and the style sheet";
  EXPECT_EQ(c.Get("/app.js")->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(c.Get("/status")->status, 401);
  EXPECT_EQ(c.Get("/status", {{"Authorization", "Bearer sekret"}})->status, 200);
  EXPECT_EQ(c.Get("/app.jsx", {{"Authorization", "Bearer sekret"}})->status, 404);
  EXPECT_FALSE(web_assets().empty());
}

TEST(Status, PlanIsMadeOnceAndFailuresAreSaid) {
  auto calls = std::make_shared<int>(0);
  ServerOptions opts;
  opts.plan_report = [calls] {
    ++*calls;
    return Json{{"text", "the plan"}, {"svg", "<svg/>"}};
  };
  {
    ServerStack s({.n_slots = 1, .n_ctx = 128}, opts);
    for (int i = 0; i < 2; ++i) {
      auto r = s.client().Get("/plan");
      ASSERT_EQ(r->status, 200);
      EXPECT_EQ(Json::parse(r->body)["text"], "the plan");
    }
    EXPECT_EQ(*calls, 1);
  }
  opts.plan_report = []() -> Json { throw Error("no GPU answers"); };
  {
    ServerStack s({.n_slots = 1, .n_ctx = 128}, opts);
    auto r = s.client().Get("/plan");
    EXPECT_EQ(r->status, 500);
    EXPECT_NE(r->body.find("planning failed: no GPU answers"), std::string::npos) << r->body;
  }
  ServerStack none({.n_slots = 1, .n_ctx = 128});
  EXPECT_EQ(none.client().Get("/plan")->status, 404);
}

}  // namespace
}  // namespace strata::server
