#pragma once
// `strata service`: the systemd unit and the environment file that run `strata serve` as a
// service of the machine (restarted when it fails, started at boot).

#include <string>
#include <string_view>
#include <vector>

namespace strata::cli {

struct ServiceSpec {
  std::string name;                     // the unit is NAME.service
  std::string executable;               // absolute path of strata
  std::vector<std::string> serve_args;  // after `serve`: absolute paths, no API key
  std::string environment_file;         // absolute path (holds STRATA_API_KEY)
  std::string run_as;                   // User= (empty: root)
  int stop_timeout_seconds = 30;        // SIGTERM, then this long before SIGKILL
};

// One ExecStart argument, quoted as systemd reads it: double quotes, C escapes, and `$` and `%`
// doubled so that systemd expands neither variables nor specifiers in it.
std::string systemd_quote(std::string_view arg);

std::string systemd_unit_text(const ServiceSpec& spec);

// KEY="value" as systemd's EnvironmentFile= reads it.
std::string environment_line(std::string_view key, std::string_view value);

// Whether `host` is reachable only from this machine (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(std::string_view host);

// A unit name systemd takes and a path cannot escape through: letters, digits, '-', '_', '.', '@'.
bool valid_service_name(std::string_view name);

}  // namespace strata::cli
