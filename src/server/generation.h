#pragma once
// One request's generation as the HTTP side sees it: submits the job to the scheduler, receives
// its tokens through a channel, and turns them into text events (detokenized, stop strings cut,
// and for chat: reasoning and tool calls split out). The same events build a streamed (SSE) or
// a whole response, so both carry the same text.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/scheduler.h"
#include "server/output_parser.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {

// Tokens from the scheduler thread to the HTTP thread. Shared: either side may leave first.
struct TokenChannel {
  std::mutex mutex;
  std::condition_variable ready;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;  // one per token, when the request asked for them
  std::optional<JobResult> done;
  bool stop_requested = false;  // the HTTP side wants no more tokens

  // Called by the scheduler for each token; false once the HTTP side wants no more. Wakes the
  // reader only when the queue was empty: a token pushed to a non-empty queue is read with the
  // ones before it, so a verify step's several tokens cost one wake-up (a futex syscall and a
  // thread switch each: 5-7% of the server's time on the trained model, perf).
  bool push(int32_t token);
};

struct TextEvents {
  ParsedDelta delta;  // new text (content / reasoning / tool calls)
  // Log-probabilities of the tokens behind the text so far not yet reported (requests that
  // asked): held while a token adds no text yet (part of a character or of a tag).
  std::vector<TokenLogprobs> logprobs;
  bool finished = false;             // the generation is over (no more events)
  std::string finish_reason;         // "stop", "length", "tool_calls" when finished
  std::optional<std::string> error;  // the generation failed (cancelled or error)
  bool device_lost = false;          // ... because the model's device is gone (503)
  JobResult result;                  // counts, when finished (generated: tokens in the text)
};

class GenerationRun {
 public:
  // Submits the job (its callbacks are set here). Throws ApiError 503 when the queue is full.
  // tag_tokens (sorted): special tokens whose text the chat parser reads (format_tag_tokens);
  // other control tokens add no text.
  GenerationRun(Scheduler& scheduler, const Tokenizer& tokenizer, GenerationJob job,
                std::vector<std::string> stops, std::optional<OutputParserOptions> chat,
                std::vector<int32_t> tag_tokens = {});
  ~GenerationRun();  // cancels the job if it is still running

  // Waits up to `wait` for tokens; returns what they add. After `finished`, do not call again.
  TextEvents next(std::chrono::milliseconds wait);
  void cancel();
  uint64_t id() const { return id_; }

 private:
  // Detokenized text through the stop matcher, then emit().
  void add_text(const std::string& text, TextEvents& ev);
  // Text past the stop matcher into the event: through the chat parser, or as content.
  void emit(const std::string& text, TextEvents& ev);
  // The token's text: detokenized, or a tag's own text.
  std::string token_text(int32_t token);

  Scheduler& scheduler_;
  std::shared_ptr<TokenChannel> channel_;
  const Tokenizer& tokenizer_;
  StreamingDetokenizer detok_;
  StopMatcher stop_;
  std::unique_ptr<ChatOutputParser> parser_;
  std::vector<int32_t> tag_tokens_;  // sorted
  uint64_t id_ = 0;
  std::vector<TokenLogprobs> pending_logprobs_;  // of tokens whose text is not out yet
  int64_t tokens_used_ = 0;                      // generated tokens that made it into the text
  bool stopped_early_ = false;  // on a stop string, or after the last tool call allowed
  bool finished_ = false;
};

}  // namespace strata::server
