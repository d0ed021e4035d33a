/* MPI_IN_PLACE is a macro whose value differs between MPI implementations (Open MPI:
 * (void *)1, MPICH: (void *)-1); the Rust side asks the mpi.h it was built against. */
#include <mpi.h>

void *fabcheck_mpi_in_place(void) { return MPI_IN_PLACE; }
