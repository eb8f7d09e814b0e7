#include "server/generation.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "server/api_error.h"
#include "util/error.h"

namespace strata::server {

bool TokenChannel::push(int32_t token) {
  bool wake, more;
  {
    std::lock_guard lock(mutex);
    tokens.push_back(token);
    wake = std::exchange(reader_waiting_, false);
    more = !stop_requested;
  }
  if (wake) ready.notify_one();  // after unlocking: the reader does not wake into a held lock
  return more;
}

void TokenChannel::finish(const JobResult& result) {
  {
    std::lock_guard lock(mutex);
    done = result;
  }
  ready.notify_one();
}

TokenChannel::Taken TokenChannel::take(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex);
  const auto due = last_take_ + kReadInterval;
  if (!done && std::chrono::steady_clock::now() < due)
    ready.wait_until(lock, due, [&] { return done.has_value(); });
  reader_waiting_ = true;
  ready.wait_for(lock, wait, [&] { return !tokens.empty() || done.has_value(); });
  reader_waiting_ = false;
  Taken taken;
  taken.tokens.swap(tokens);
  // A token's log-probabilities are added just before the token itself: one whose token is not
  // here yet stays for the next take, so each taken token has its own.
  const auto with_token = logprobs.begin() + static_cast<std::ptrdiff_t>(
                                                 std::min(logprobs.size(), taken.tokens.size()));
  taken.logprobs.assign(std::make_move_iterator(logprobs.begin()),
                        std::make_move_iterator(with_token));
  logprobs.erase(logprobs.begin(), with_token);
  taken.done = done;
  if (!taken.tokens.empty()) last_take_ = std::chrono::steady_clock::now();
  return taken;
}

GenerationRun::GenerationRun(Scheduler& scheduler, const Tokenizer& tokenizer, GenerationJob job,
                             std::vector<std::string> stops,
                             std::optional<OutputParserOptions> chat,
                             std::vector<int32_t> tag_tokens)
    : scheduler_(scheduler),
      channel_(std::make_shared<TokenChannel>()),
      tokenizer_(tokenizer),
      detok_(tokenizer, /*render_special=*/false),
      stop_(std::move(stops)),
      tag_tokens_(std::move(tag_tokens)) {
  if (chat) parser_ = make_output_parser(std::move(*chat));
  job.on_token = [ch = channel_](int32_t token) { return ch->push(token); };
  if (job.top_logprobs >= 0) {
    job.on_logprobs = [ch = channel_](const TokenLogprobs& lp) {
      std::lock_guard lock(ch->mutex);
      ch->logprobs.push_back(lp);
    };
  }
  job.on_done = [ch = channel_](const JobResult& r) { ch->finish(r); };
  std::optional<uint64_t> id;
  try {
    id = scheduler_.submit(std::move(job));
  } catch (const DeviceLost& e) {
    throw device_unavailable(e.what());
  }
  if (!id && scheduler_.stats().draining) {
    // A load balancer retries it on another replica (send_error adds Retry-After).
    throw ApiError(503, "server_error",
                   "the server is shutting down and takes no new requests; retry on another "
                   "replica or later",
                   {}, "shutting_down");
  }
  if (!id) {
    throw ApiError(503, "server_busy",
                   "the server is busy: all slots are in use and the queue is full; retry later");
  }
  id_ = *id;
}

GenerationRun::~GenerationRun() {
  if (!finished_) cancel();
}

void GenerationRun::cancel() {
  {
    std::lock_guard lock(channel_->mutex);
    channel_->stop_requested = true;
  }
  scheduler_.cancel(id_);
}

std::string GenerationRun::token_text(int32_t token) {
  if (!std::binary_search(tag_tokens_.begin(), tag_tokens_.end(), token)) return detok_.push(token);
  // A tag ends whatever character was open before it.
  return detok_.flush() + tokenizer_.token_bytes(token, /*render_special=*/true);
}

void GenerationRun::add_text(const std::string& text, TextEvents& ev) {
  if (stopped_early_ || text.empty()) return;
  StopMatcher::Result r = stop_.push(text);
  stopped_early_ = r.stopped;
  emit(r.text, ev);
  if (parser_ && parser_->closed()) stopped_early_ = true;
}

void GenerationRun::emit(const std::string& text, TextEvents& ev) {
  if (text.empty()) return;
  if (parser_) {
    ev.delta.append(parser_->push(text));
  } else {
    ev.delta.content += text;
  }
}

TextEvents GenerationRun::next(std::chrono::milliseconds wait, size_t max_tokens) {
  TextEvents ev;
  if (backlog_.empty() && !done_) {
    TokenChannel::Taken taken = channel_->take(wait);
    backlog_.insert(backlog_.end(), taken.tokens.begin(), taken.tokens.end());
    for (TokenLogprobs& lp : taken.logprobs) backlog_logprobs_.push_back(std::move(lp));
    done_ = std::move(taken.done);
  }
  for (size_t i = 0; i < max_tokens && !backlog_.empty() && !stopped_early_; ++i) {
    const int32_t token = backlog_.front();
    backlog_.pop_front();
    ++tokens_used_;
    if (!backlog_logprobs_.empty()) {  // one per token when the request asked for them
      pending_logprobs_.push_back(std::move(backlog_logprobs_.front()));
      backlog_logprobs_.pop_front();
    }
    add_text(token_text(token), ev);
  }
  if (stopped_early_) {
    // The rest is not wanted: the job ends at its next token (tokens after this are dropped).
    backlog_.clear();
    backlog_logprobs_.clear();
    std::lock_guard lock(channel_->mutex);
    channel_->stop_requested = true;
  }
  if (!done_ || !backlog_.empty()) {
    if (!ev.delta.empty()) ev.logprobs = std::exchange(pending_logprobs_, {});
    return ev;
  }
  const JobResult& done = *done_;

  // Finished: release what the detokenizer, the stop matcher and the parser still hold.
  add_text(detok_.flush(), ev);
  if (!stopped_early_) emit(stop_.flush(), ev);
  if (parser_) ev.delta.append(parser_->finish());
  ev.finished = true;
  finished_ = true;
  ev.logprobs = std::exchange(pending_logprobs_, {});
  ev.result = done;
  ev.result.generated_tokens = tokens_used_;
  if (stopped_early_) {
    ev.finish_reason = "stop";
  } else if (done.reason == FinishReason::length) {
    ev.finish_reason = "length";
  } else if (done.reason == FinishReason::stop) {
    ev.finish_reason = "stop";
  } else {
    ev.error = done.reason == FinishReason::cancelled ? std::string("the generation was cancelled")
                                                      : done.error;
    ev.device_lost = done.device_lost;
  }
  if (ev.finish_reason == "stop" && parser_ && parser_->tool_calls_seen() > 0)
    ev.finish_reason = "tool_calls";
  return ev;
}

}  // namespace strata::server
