// `strata service install|status|logs|uninstall`: `strata serve` as a systemd service of the
// machine under the desk (started at boot, restarted when it fails), its API key kept in a file
// only root reads.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/systemd_unit.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

struct ServiceOptions {
  std::string name = "strata";
  std::string root = "/";  // tests write into a temporary root and leave systemctl alone
  std::string model;
  std::string run_as;
  bool no_start = false;
  int log_lines = 100;
  bool follow = false;
};

fs::path unit_path(const ServiceOptions& o) {
  return fs::path(o.root) / "etc/systemd/system" / (o.name + ".service");
}
// The path the unit names (inside the real root) and where it is written (under --root).
std::string environment_file(const ServiceOptions& o) {
  return "/etc/strata/" + o.name + ".env";
}
fs::path environment_path(const ServiceOptions& o) {
  return fs::path(o.root) / environment_file(o).substr(1);
}

bool real_root(const ServiceOptions& o) {
  return fs::weakly_canonical(o.root) == "/";
}
// systemd runs this machine (not so in most containers).
bool systemd_running() {
  return fs::exists("/run/systemd/system");
}

// Runs a command line of validated words; its exit status.
int run_command(const std::string& command) {
  fmt::print(stderr, "running: {}\n", command);
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Serve options whose value is a file: made absolute, since the service starts in /.
constexpr std::array kPathFlags = {"--plan", "--hot-experts", "--expert-profile", "--draft-model"};

struct ServeArgs {
  std::vector<std::string> args;  // for the unit: -m MODEL, then the flags, without the key
  std::string api_key;            // from --api-key or STRATA_API_KEY
  std::string host = "127.0.0.1";
  int shutdown_grace = 10;
};

// The serve flags, checked by serve's own parser (unknown flags and bad values are refused
// here, not at the service's first start).
ServeArgs check_serve_args(const std::string& model, const std::vector<std::string>& extras) {
  STRATA_CHECK(fs::is_regular_file(model), "--model {}: no such file", model);
  ServeArgs out;
  out.args = {"-m", fs::absolute(model).lexically_normal().string()};
  for (size_t i = 0; i < extras.size(); ++i) {
    std::string a = extras[i];
    std::string value;
    const size_t eq = a.find('=');
    const std::string flag = a.starts_with("--") && eq != std::string::npos ? a.substr(0, eq) : a;
    const bool inline_value = flag.size() != a.size();
    if (inline_value) value = a.substr(eq + 1);
    const auto take_value = [&] {
      if (inline_value) return value;
      STRATA_CHECK(i + 1 < extras.size(), "{} needs a value", flag);
      return extras[++i];
    };
    if (flag == "--api-key") {
      out.api_key = take_value();  // into the environment file, not the unit
      continue;
    }
    if (std::find(kPathFlags.begin(), kPathFlags.end(), flag) != kPathFlags.end()) {
      out.args.push_back(flag);
      out.args.push_back(fs::absolute(take_value()).lexically_normal().string());
      continue;
    }
    out.args.push_back(a);
  }
  CLI::App check;
  add_serve_command(check);
  CLI::App* serve = check.get_subcommand("serve");
  // Stop once serve's flags are parsed and checked, before its callback would start a server
  // (the callback must stay set: it owns what the flags are parsed into).
  struct Parsed {};
  serve->parse_complete_callback([] { throw Parsed{}; });
  std::vector<std::string> argv = out.args;
  argv.insert(argv.begin(), "serve");
  std::reverse(argv.begin(), argv.end());  // CLI11 takes a reversed vector
  try {
    check.parse(argv);
    fail("the serve flags were not checked");  // unreachable: Parsed is thrown
  } catch (const Parsed&) {
  } catch (const CLI::ParseError& e) {
    fail("the serve flags do not parse: {}", e.what());
  }
  // Arguments serve does not know are left over (the top-level check that refuses them is not
  // reached).
  const std::vector<std::string> unknown = serve->remaining();
  if (!unknown.empty())
    fail("the serve flags do not parse: not serve's: {}", fmt::join(unknown, " "));
  out.host = serve->get_option("--host")->as<std::string>();
  out.shutdown_grace = serve->get_option("--shutdown-grace")->as<int>();
  if (out.api_key.empty()) {
    if (const char* env = std::getenv("STRATA_API_KEY")) out.api_key = env;
  }
  return out;
}

void write_file(const fs::path& path, const std::string& text, fs::perms perms) {
  fs::create_directories(path.parent_path());
  const fs::path temporary = path.string() + ".new";
  {
    std::ofstream f(temporary, std::ios::trunc);
    STRATA_CHECK(f.good(), "cannot write {}", temporary.string());
    f << text;
    STRATA_CHECK(f.good(), "cannot write {}", temporary.string());
  }
  fs::permissions(temporary, perms);
  fs::rename(temporary, path);
}

void install(const ServiceOptions& o, const std::vector<std::string>& extras) {
  STRATA_CHECK(valid_service_name(o.name), "--name '{}': use letters, digits, '-', '_', '.' or '@'",
               o.name);
  const ServeArgs serve = check_serve_args(o.model, extras);
  if (!is_loopback_host(serve.host) && serve.api_key.empty()) {
    fail(
        "--host {} makes the server reachable from other machines, and without an API key anyone "
        "who reaches it can use it: give --api-key KEY (kept in {}, which only root reads) or "
        "listen on --host 127.0.0.1",
        serve.host, environment_file(o));
  }
  if (real_root(o) && geteuid() != 0)
    fail("installing a system service needs root: sudo strata service install ...");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  STRATA_CHECK(n > 0, "cannot find the strata executable (/proc/self/exe)");
  ServiceSpec spec{.name = o.name,
                   .executable = std::string(self, static_cast<size_t>(n)),
                   .serve_args = serve.args,
                   .environment_file = environment_file(o),
                   .run_as = o.run_as,
                   .stop_timeout_seconds = serve.shutdown_grace + 20};
  const fs::path unit = unit_path(o), env = environment_path(o);
  write_file(unit, systemd_unit_text(spec),
             fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                 fs::perms::others_read);
  std::string env_text = "# strata service " + o.name + ": read by systemd as root only\n";
  if (!serve.api_key.empty()) env_text += environment_line("STRATA_API_KEY", serve.api_key);
  write_file(env, env_text, fs::perms::owner_read | fs::perms::owner_write);
  fmt::print("installed:\n  {}  (the unit: strata serve {})\n  {}  (the API key, mode 0600{})\n",
             unit.string(), fmt::join(serve.args, " "), env.string(),
             serve.api_key.empty() ? ", none given" : "");
  if (!real_root(o)) {
    fmt::print("written under {}: systemctl left alone\n", o.root);
    return;
  }
  if (!systemd_running()) {
    fmt::print(
        "systemd is not running on this machine: start it where systemd runs with\n"
        "  systemctl daemon-reload && systemctl enable --now {}\n",
        o.name);
    return;
  }
  STRATA_CHECK(run_command("systemctl daemon-reload") == 0, "systemctl daemon-reload failed");
  const std::string enable = o.no_start ? "systemctl enable " : "systemctl enable --now ";
  STRATA_CHECK(run_command(enable + o.name) == 0, "{}{} failed (see `strata service logs`)", enable,
               o.name);
  fmt::print("{} {}; `strata service status` and `strata service logs` follow it\n", o.name,
             o.no_start ? "enabled (starts at boot)" : "started, and starts at boot");
}

void status(const ServiceOptions& o) {
  STRATA_CHECK(valid_service_name(o.name), "--name '{}': not a service name", o.name);
  const fs::path unit = unit_path(o);
  if (!fs::exists(unit))
    fail("{} is not installed ({} does not exist): strata service install --model FILE", o.name,
         unit.string());
  fmt::print("unit: {}\nenvironment: {}{}\n", unit.string(), environment_path(o).string(),
             fs::exists(environment_path(o)) ? "" : " (absent)");
  if (!real_root(o) || !systemd_running()) {
    fmt::print("systemd is not running {}: no state to show\n",
               real_root(o) ? "on this machine" : "for --root " + o.root);
    return;
  }
  const int code = run_command("systemctl status --no-pager " + o.name);
  // 3: installed but not running (systemctl's convention): said, not an error of ours.
  STRATA_CHECK(code == 0 || code == 3, "systemctl status failed ({})", code);
}

void logs(const ServiceOptions& o) {
  STRATA_CHECK(valid_service_name(o.name), "--name '{}': not a service name", o.name);
  STRATA_CHECK(systemd_running(), "systemd is not running on this machine: no journal to read");
  const std::string command = fmt::format("journalctl --no-pager -u {} -n {}{}", o.name,
                                          o.log_lines, o.follow ? " -f" : "");
  STRATA_CHECK(run_command(command) == 0, "journalctl failed");
}

void uninstall(const ServiceOptions& o) {
  STRATA_CHECK(valid_service_name(o.name), "--name '{}': not a service name", o.name);
  const fs::path unit = unit_path(o), env = environment_path(o);
  if (!fs::exists(unit) && !fs::exists(env)) fail("{} is not installed", o.name);
  if (real_root(o)) {
    if (geteuid() != 0) fail("removing a system service needs root: sudo strata service uninstall");
    if (systemd_running()) run_command("systemctl disable --now " + o.name);  // may be stopped
  }
  for (const fs::path& p : {unit, env}) {
    if (fs::remove(p)) fmt::print("removed {}\n", p.string());
  }
  if (real_root(o) && systemd_running()) run_command("systemctl daemon-reload");
}

}  // namespace

void add_service_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "service", "Run `strata serve` as a systemd service: install, status, logs, uninstall");
  cmd->require_subcommand(1);
  auto o = std::make_shared<ServiceOptions>();
  const auto common = [&](CLI::App* sub) {
    sub->add_option("--name", o->name, "The service's name (NAME.service)")->capture_default_str();
    sub->add_option("--root", o->root,
                    "Write under this directory instead of / (systemctl is then left alone)");
  };
  CLI::App* add = cmd->add_subcommand(
      "install",
      "Write the unit and the environment file, then enable and start it. Flags after --model "
      "are serve's (strata serve --help); --api-key goes into the environment file");
  common(add);
  add->add_option("--model", o->model, "GGUF model file to serve")->required();
  add->add_option("--run-as", o->run_as, "Run as this user (default: root)");
  add->add_flag("--no-start", o->no_start, "Enable it for the next boot, do not start it now");
  add->allow_extras();
  add->callback([o, add] { install(*o, add->remaining()); });

  CLI::App* st = cmd->add_subcommand("status", "The unit's files and systemd's state of it");
  common(st);
  st->callback([o] { status(*o); });

  CLI::App* lg = cmd->add_subcommand("logs", "The service's log (the journal)");
  lg->add_option("--name", o->name, "The service's name")->capture_default_str();
  lg->add_option("-n,--lines", o->log_lines, "Lines from the end")->capture_default_str();
  lg->add_flag("-f,--follow", o->follow, "Keep printing new lines");
  lg->callback([o] { logs(*o); });

  CLI::App* rm = cmd->add_subcommand("uninstall", "Stop and disable it, and remove its files");
  common(rm);
  rm->callback([o] { uninstall(*o); });
}

}  // namespace strata::cli
