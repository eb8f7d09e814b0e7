#pragma once
// Whether strata serve can listen where it was asked, checked before the model loads (minutes
// for a big one): an unknown --host or a port in use is an error in seconds, not after loading.

#include <string>

namespace strata::server {

// Throws strata::Error saying what is wrong and what to do: a host that is not an address of
// this machine, a port another program holds, a port below 1024 without the rights. Port 0 (any
// free port) always passes.
void check_can_listen(const std::string& host, int port);

}  // namespace strata::server
