#include "cli/distributed_plan.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>

#include "plan/pipeline_plan.h"
#include "util/error.h"
#include "util/log.h"

#ifdef STRATA_HAVE_MPI
#include "backend/mpi/link_probe.h"
#include "backend/mpi/mpi_link.h"
#include "backend/mpi/wire.h"
#endif

namespace strata::cli {

namespace {

#ifdef STRATA_HAVE_MPI
// Each rank's host, probed (RAM size, what is available, read bandwidth, cores), gathered on rank
// 0 with the slowest link; the other ranks end the process when they have answered.
std::vector<plan::HostSpec> measured_hosts(plan::LinkSpec& link_spec) {
  mpi::MpiLink link;
  STRATA_CHECK(link.size() >= 2,
               "--hosts measure: this MPI job has one rank; start it with mpirun -np N -H "
               "host1,host2,... (one rank per host)");
  plan::ProbeOptions probe;
  probe.calibrate = false;  // the link and RAM are what a split is about; rates come from RAM
  const plan::HardwareProfile hw = plan::make_hardware_profile({}, probe);
  mpi::WireWriter w;
  w.put_string(link.host());
  w.put(hw.ram_total_bytes);
  w.put(hw.ram_available_bytes);
  w.put(hw.ram_bandwidth_gbps);
  w.put<int32_t>(hw.physical_cores);
  const mpi::MeasuredLink measured = mpi::measure_links(link);
  if (link.rank() != 0) {
    link.send(0, mpi::Tag::hello, w.bytes());
    return {};
  }
  struct Probed {
    std::string host;
    uint64_t ram_total = 0, ram_available = 0;
    double ram_gbs = 0;
    int32_t cores = 1;
  };
  std::vector<Probed> probed;
  std::map<std::string, int> ranks_on;
  for (int r = 0; r < link.size(); ++r) {
    const std::vector<uint8_t> bytes =
        r == 0 ? w.bytes() : link.receive(r, mpi::Tag::hello, "its host's measurements");
    mpi::WireReader reader(bytes);
    Probed p;
    p.host = reader.get_string();
    p.ram_total = reader.get<uint64_t>();
    p.ram_available = reader.get<uint64_t>();
    p.ram_gbs = reader.get<double>();
    p.cores = reader.get<int32_t>();
    ++ranks_on[p.host];
    probed.push_back(p);
  }
  std::vector<plan::HostSpec> hosts;
  for (const Probed& p : probed) {
    // Ranks that share a host share its RAM.
    const int sharing = ranks_on[p.host];
    hosts.push_back(
        plan::host_spec(sharing > 1 ? fmt::format("{} ({} ranks)", p.host, sharing) : p.host,
                        p.ram_total, p.ram_available / static_cast<uint64_t>(sharing), p.ram_gbs,
                        p.cores, "measured by its rank"));
  }
  link_spec.gbytes_per_second = measured.gbytes_per_second;
  link_spec.latency_ms = measured.latency_ms;
  link_spec.source =
      fmt::format("measured by MPI ping-pong, slowest: rank 0 to rank {}", measured.slowest_rank);
  return hosts;
}
#endif

}  // namespace

void print_pipeline_plan(const plan::ModelInventory& inv, const std::string& hosts_text,
                         const std::string& link_text, const plan::PlanGoals& goals, bool json) {
  plan::LinkSpec link;
  std::vector<plan::HostSpec> hosts;
  if (hosts_text == "measure") {
#ifdef STRATA_HAVE_MPI
    STRATA_CHECK(link_text.empty(), "--hosts measure measures the link; leave --link out");
    STRATA_CHECK(mpi::launched_by_mpi(),
                 "--hosts measure runs under mpirun, one rank per host: mpirun -np N -H "
                 "host1,host2,... strata plan -m FILE --hosts measure");
    hosts = measured_hosts(link);
    if (hosts.empty()) std::exit(0);  // a rank other than 0: it answered
#else
    fail("--hosts measure: this strata was built without MPI (install libopenmpi-dev, rebuild)");
#endif
  } else {
    hosts = plan::parse_hosts(hosts_text, &link);
    if (!link_text.empty()) link = plan::parse_link(link_text);
  }
  const plan::PipelinePlan p = plan::plan_pipeline(inv, hosts, link, goals);
  if (json) {
    fmt::print("{}\n", plan::pipeline_json(p).dump(2));
  } else {
    fmt::print("{}", plan::pipeline_text(inv, p));
  }
  STRATA_CHECK(p.fits, "{}", p.fit_error);
}

}  // namespace strata::cli
