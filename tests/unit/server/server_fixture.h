#pragma once
// A real `strata serve` stack in the test process: a small generated Qwen3-MoE model with the
// real Qwen3 vocabulary and chat template, the scheduler, and the HTTP server on a free port.

#include <httplib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "runtime/scheduler.h"
#include "server/server.h"
#include "support/test_support.h"
#include "synthetic_model.h"
#include "tokenizer/tokenizer.h"

namespace strata::server::test_support {

// A tiny qwen3moe of n_layer layers on the vocabulary (and chat template) of `vocab_from`.
inline tools::SyntheticModelSpec tiny_chat_spec(int n_layer, const std::string& vocab_from) {
  tools::SyntheticModelSpec spec;
  spec.arch = "qwen3moe";
  spec.ftype = "Q8_0";
  spec.n_layer = n_layer;
  spec.n_embd = 64;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.head_dim = 32;
  spec.n_expert = 4;
  spec.n_expert_used = 2;
  spec.n_ff_exp = 64;
  spec.n_vocab = 151680;
  spec.vocab_from = vocab_from;
  return spec;
}

// The model file, generated once per test binary.
inline std::string chat_model_path() {
  static const std::string path = [] {
    const auto p = test::temp_dir() / "server-chat-model.gguf";
    tools::write_synthetic_model(
        tiny_chat_spec(2, (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string()),
        p.string());
    return p.string();
  }();
  return path;
}

struct ServerStack {
  explicit ServerStack(SchedulerOptions so = {}, ServerOptions opts = {},
                       const std::string& model_path = chat_model_path(), int port = 0)
      : model(Model::load(model_path)),
        tokenizer(Tokenizer::from_gguf(model->file())),
        pool(2),
        scheduler(*model, pool, so) {
    opts.port = port;  // 0: any free port
    if (opts.model_id.empty()) opts.model_id = "test-model";
    server = std::make_unique<Server>(*model, *tokenizer, scheduler, opts);
    server->bind();
    thread = std::thread([this] { server->listen(); });
  }
  ~ServerStack() {
    scheduler.shutdown(std::chrono::milliseconds(0));
    server->stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(60, 0);
    return c;
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ThreadPool pool;
  Scheduler scheduler;
  std::unique_ptr<Server> server;
  std::thread thread;
};

// The JSON payloads of the "data: " lines of an SSE body; the last one must be [DONE].
inline std::vector<nlohmann::json> sse_payloads(const std::string& body, bool& saw_done) {
  std::vector<nlohmann::json> out;
  saw_done = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.empty()) continue;
    if (!event.starts_with("data: ")) throw std::runtime_error("not an SSE data line: " + event);
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      saw_done = true;
      continue;
    }
    if (saw_done) throw std::runtime_error("data after [DONE]");
    out.push_back(nlohmann::json::parse(data));
  }
  return out;
}

}  // namespace strata::server::test_support
