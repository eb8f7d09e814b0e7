#include "cli/systemd_unit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace strata::cli {

std::string systemd_quote(std::string_view arg) {
  std::string out(1, '"');
  for (const char c : arg) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '$':
        out += "$$";
        break;
      case '%':
        out += "%%";
        break;
      default:
        out += c;
    }
  }
  out += '"';
  return out;
}

std::string systemd_unit_text(const ServiceSpec& spec) {
  std::string exec = systemd_quote(spec.executable);
  exec += " serve";
  for (const std::string& a : spec.serve_args) {
    exec += ' ';
    exec += systemd_quote(a);
  }
  std::string user;
  if (!spec.run_as.empty()) user = fmt::format("User={}\n", spec.run_as);
  return fmt::format(
      "# Written by `strata service install`; `strata service uninstall --name {0}` removes it.\n"
      "[Unit]\n"
      "Description=strata: an OpenAI-compatible server for a MoE model ({0})\n"
      "After=network-online.target\n"
      "Wants=network-online.target\n"
      "\n"
      "[Service]\n"
      "Type=exec\n"
      "ExecStart={1}\n"
      "# The API key, readable by root only ('-': the file may be absent).\n"
      "EnvironmentFile=-{2}\n"
      "{3}"
      "Restart=on-failure\n"
      "RestartSec=5\n"
      "# serve finishes its running requests on SIGTERM before it exits.\n"
      "TimeoutStopSec={4}\n"
      "\n"
      "[Install]\n"
      "WantedBy=multi-user.target\n",
      spec.name, exec, spec.environment_file, user, spec.stop_timeout_seconds);
}

std::string environment_line(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  for (const char c : value) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  out += "\"\n";
  return out;
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

bool valid_service_name(std::string_view name) {
  return !name.empty() && name.size() <= 200 && name.front() != '.' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
                  c == '@';
         });
}

}  // namespace strata::cli
