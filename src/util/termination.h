#pragma once
// A process-wide "we are being stopped" flag: set where the process learns of it (serve's signal
// thread), read by waits that would otherwise never end (a distributed step waiting for a rank
// that mpirun is taking down with the rest of the job).

namespace strata {

void request_termination();
bool termination_requested();

}  // namespace strata
