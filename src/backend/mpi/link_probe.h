#pragma once
// The network between the ranks of an MPI job, measured: a short ping-pong from rank 0 to every
// other rank (small messages for the latency, a token batch's worth for the bandwidth). The
// pipeline is as fast as its slowest link, so that one is reported.

#include "backend/mpi/mpi_link.h"

namespace strata::mpi {

struct MeasuredLink {
  double latency_ms = 0;         // one message, one way (median over round trips / 2)
  double gbytes_per_second = 0;  // payload
  int slowest_rank = 1;          // the rank whose link to rank 0 these are
};

// Every rank calls it at the same point; rank 0 gets the result (the others an empty one).
MeasuredLink measure_links(MpiLink& link);

}  // namespace strata::mpi
