#include "server/listen_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/error.h"

namespace strata::server {

void check_can_listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    fail(
        "--host '{}': not a name or address this machine can listen on ({}); use 127.0.0.1 "
        "for this machine only or 0.0.0.0 for every interface",
        host, gai_strerror(rc));
  }
  int error = 0;
  bool bound = false;
  for (const addrinfo* a = found; a && !bound; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // as the server binds
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
      bound = true;
    } else {
      error = errno;
    }
    ::close(fd);
  }
  freeaddrinfo(found);
  if (bound) return;
  if (error == EADDRINUSE)
    fail(
        "port {} on {} is in use (another strata serve or server?): stop it or choose another "
        "with --port (0: any free port)",
        port, host);
  if (error == EACCES)
    fail("port {} needs administrator rights (ports below 1024): choose --port 8080 or another",
         port);
  if (error == EADDRNOTAVAIL)
    fail("--host '{}' is not an address of this machine: use 127.0.0.1 or 0.0.0.0", host);
  fail("cannot listen on {}:{}: {}", host, port, std::strerror(error));
}

}  // namespace strata::server
