#pragma once
// One request's generation as the HTTP side sees it: submits the job to the scheduler, receives
// its tokens through a channel, and turns them into text events (detokenized, stop strings cut,
// and for chat: reasoning and tool calls split out). The same events build a streamed (SSE) or
// a whole response, so both carry the same text.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
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
  // The reader takes what has come at most this often. A small model makes thousands of tokens a
  // second; waking the reader for each cost a futex call on the scheduler thread and a thread
  // switch on the cores the forward runs on (15-20 us a token on the trained model, 10% of its
  // decode). Tokens further apart than this (any model big enough to matter) still wake the
  // reader one by one, at once; a token waits at most this long.
  static constexpr std::chrono::microseconds kReadInterval{1000};

  std::mutex mutex;
  std::condition_variable ready;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;  // one per token, added before it, when asked for
  std::optional<JobResult> done;
  bool stop_requested = false;  // the HTTP side wants no more tokens

  // Called by the scheduler for each token; false once the HTTP side wants no more. Wakes the
  // reader only when it waits for tokens, once: tokens pushed before it reads (a verify step's,
  // or those of the pause after a read) come with the first.
  bool push(int32_t token);
  // Called by the scheduler at the end: wakes the reader whatever it waits for.
  void finish(const JobResult& result);

  struct Taken {
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> logprobs;
    std::optional<JobResult> done;
  };
  // The reader's side: waits up to `wait` for tokens or the end and takes all there is. Within
  // kReadInterval of a take that got tokens, first waits out the interval (the end cuts it short).
  Taken take(std::chrono::milliseconds wait);

 private:
  bool reader_waiting_ = false;  // for tokens: the next push wakes it
  std::chrono::steady_clock::time_point last_take_{};
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

  // What the next tokens add: at most max_tokens of those taken from the channel, waiting up to
  // `wait` for more only when none are left. A stream asks for one at a time, so each token is
  // its own chunk (as OpenAI streams them) though the channel hands them over in batches. After
  // `finished`, do not call again.
  TextEvents next(std::chrono::milliseconds wait,
                  size_t max_tokens = std::numeric_limits<size_t>::max());
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
  // Taken from the channel, not yet through next(): tokens, their log-probabilities, the end.
  std::deque<int32_t> backlog_;
  std::deque<TokenLogprobs> backlog_logprobs_;
  std::optional<JobResult> done_;
  std::vector<TokenLogprobs> pending_logprobs_;  // of tokens whose text is not out yet
  int64_t tokens_used_ = 0;                      // generated tokens that made it into the text
  bool stopped_early_ = false;  // on a stop string, or after the last tool call allowed
  bool finished_ = false;
};

}  // namespace strata::server
