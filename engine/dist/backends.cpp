// new_group: the backend factory. mpi/, gloo/ and nccl/ are built only where their libraries are
// found (engine/CMakeLists.txt defines TB_WITH_MPI / TB_WITH_GLOO / TB_WITH_NCCL); without them
// their names still resolve, to a clear error.
#include "engine/dist/process_group.h"

#if TB_WITH_MPI
#include "engine/dist/mpi/mpi_group.h"
#endif
#if TB_WITH_GLOO
#include "engine/dist/gloo/gloo_group.h"
#endif
#if TB_WITH_NCCL
#include "engine/dist/nccl/nccl_group.h"
#endif

namespace tb::dist {

std::shared_ptr<ProcessGroup> new_group(const std::string& backend, Options options) {
  if (backend == "mpi") {
#if TB_WITH_MPI
    return mpi::make_group(world_from_env(), std::move(options));
#else
    throw DistError("new_group",
                    "backend mpi not built (libopenmpi-dev was not found when configuring, or TB_WITH_MPI=OFF)");
#endif
  }
  if (backend == "gloo") {
#if TB_WITH_GLOO
    return gloo::make_group(world_from_env(), std::move(options));
#else
    throw DistError("new_group", "backend gloo not built (libgloo-dev was not found when configuring)");
#endif
  }
  if (backend == "nccl") {
#if TB_WITH_NCCL
    return nccl::make_group(world_from_env(), std::move(options));
#else
    throw DistError("new_group", "backend nccl not built (NCCL and the CUDA toolkit were not found when configuring)");
#endif
  }
  throw DistError("new_group", "unknown backend '" + backend + "'; known: mpi, gloo, nccl");
}

}  // namespace tb::dist
