#pragma once
// Whether the client of the request this thread handles is still there. cpp-httplib 0.11 gives a
// handler no way to see its client leave unless it writes to it (a stream does); a whole
// response is written only at the end, so a client that gave up would otherwise keep its slot
// generating until max_tokens. The connection's socket is found by its two addresses (Linux:
// /proc/self/fd) and watched for the peer's close.

#include <string>

namespace strata::server {

class ClientConnection {
 public:
  // The socket connected from remote_addr:remote_port to local_port (not found: never gone).
  ClientConnection(const std::string& remote_addr, int remote_port, int local_port);
  // The client closed its end of the connection (or it broke).
  bool gone() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace strata::server
